/* A handler template: copy this folder, rename, replace the effect.
 *
 * The effect here is a placeholder: for ORDER_ACCEPTED it inserts a
 * notification_job row with status 'TEMPLATE' (the compose stack grants the
 * consumer that table), so a copy dropped in unchanged can be seen working.
 *
 * The rules (sidecar/handler.h): handle() runs inside the sidecar's open
 * transaction, after consumed_event was inserted; do the effect with
 * statements on `conn`, never COMMIT, ROLLBACK or touch autocommit; it may
 * run on several threads at once (one connection each). */
#include <errno.h>
#include <inttypes.h>
#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sidecar/handler.h"

static sc_handler_status handle(void *state, struct st_mysql *conn, const struct sc_event *ev,
                                char *reason, size_t reason_len)
{
    (void)state;
    if (strcmp(ev->type, "ORDER_ACCEPTED") != 0)
        return SC_HANDLER_OK; /* not ours: consumed with no effect */

    char *end;
    errno = 0;
    long long order_id = ev->subject ? strtoll(ev->subject, &end, 10) : 0;
    if (!ev->subject || errno || *end || order_id <= 0) {
        snprintf(reason, reason_len, "subject is not an order id");
        return SC_HANDLER_REJECT; /* permanent: dead-lettered with this reason */
    }
    /* ev->id is a validated canonical UUID: safe to put in the text. Bind
     * anything that comes from the message body (mysql_stmt_*) instead. */
    char sql[320];
    snprintf(sql, sizeof sql,
             "INSERT INTO notification_job (event_id, order_id, source_version, status, created_at) "
             "VALUES ('%s', %lld, %" PRId64 ", 'TEMPLATE', UTC_TIMESTAMP(6))",
             ev->id, order_id, ev->has_eventversion ? ev->eventversion : 0);
    if (mysql_real_query(conn, sql, strlen(sql)) != 0) {
        unsigned err = mysql_errno(conn);
        snprintf(reason, reason_len, "insert notification_job: error %u (SQLSTATE %s): %s", err,
                 mysql_sqlstate(conn), mysql_error(conn));
        /* The sidecar's own list: deadlocks, lock waits, every form of lost
         * connection and a node that is read-only during a failover mean try
         * again later; anything else is permanent for this event. */
        return sc_handler_error_is_transient(err) ? SC_HANDLER_RETRY : SC_HANDLER_REJECT;
    }
    return SC_HANDLER_OK;
}

static const struct sc_handler_v1 my_handler = {
    .abi_version = SC_HANDLER_ABI_VERSION,
    .struct_size = sizeof(struct sc_handler_v1),
    .name = "my_handler",
    .init = NULL,     /* optional: parse handler_config (JSON text) into state */
    .handle = handle,
    .shutdown = NULL, /* optional: free state */
};

__attribute__((visibility("default"))) const struct sc_handler_v1 *sc_handler_v1(void)
{
    return &my_handler;
}
