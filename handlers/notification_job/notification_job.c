/* The sample handler: for ORDER_ACCEPTED, plan a notification job.
 *
 * notification_job(event_id, order_id = subject as integer,
 *                  source_version = eventversion, status 'PENDING', created_at)
 * Any other event type is consumed with no effect. A subject that is not an
 * integer is a REJECT with that reason. */
#include <errno.h>
#include <inttypes.h>
#include <mysql.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sidecar/handler.h"

static int parse_order_id(const char *s, long long *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v <= 0 || s[0] == '+' || s[0] == ' ')
        return -1;
    *out = v;
    return 0;
}

static sc_handler_status handle(void *state, struct st_mysql *conn, const struct sc_event *ev,
                                char *reason, size_t reason_len)
{
    (void)state;
    if (strcmp(ev->type, "ORDER_ACCEPTED") != 0)
        return SC_HANDLER_OK; /* not ours: consumed, no effect */

    long long order_id;
    if (parse_order_id(ev->subject, &order_id)) {
        snprintf(reason, reason_len, "subject %s%.64s%s is not an integer order id",
                 ev->subject ? "'" : "", ev->subject ? ev->subject : "(missing)",
                 ev->subject ? "'" : "");
        return SC_HANDLER_REJECT;
    }
    if (!ev->has_eventversion || ev->eventversion < INT32_MIN || ev->eventversion > INT32_MAX) {
        snprintf(reason, reason_len, "eventversion is missing or out of range");
        return SC_HANDLER_REJECT;
    }
    /* event_id is a validated canonical UUID and the numbers are integers,
     * so the text needs no escaping; one round trip instead of three. */
    char sql[320];
    snprintf(sql, sizeof sql,
             "INSERT INTO notification_job (event_id, order_id, source_version, status, created_at) "
             "VALUES ('%s', %lld, %" PRId64 ", 'PENDING', UTC_TIMESTAMP(6))",
             ev->id, order_id, ev->eventversion);
    if (mysql_real_query(conn, sql, strlen(sql)) != 0) {
        unsigned err = mysql_errno(conn);
        snprintf(reason, reason_len, "insert notification_job: error %u (SQLSTATE %s): %s", err,
                 mysql_sqlstate(conn), mysql_error(conn));
        return sc_handler_error_is_transient(err) ? SC_HANDLER_RETRY : SC_HANDLER_REJECT;
    }
    return SC_HANDLER_OK;
}

/* A growing SQL buffer: every append checks the room it needs and grows,
 * so no event, however hostile, can write or make the server read past it.
 * After a failed append the buffer is marked broken and stays so. */
struct sqlbuf {
    char *p;
    size_t len, cap;
    int broken;
};

__attribute__((format(printf, 2, 3))) static void sqlbuf_printf(struct sqlbuf *b, const char *fmt,
                                                               ...)
{
    if (b->broken)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->broken = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap * 2 > b->len + (size_t)n + 1 ? b->cap * 2 : b->len + (size_t)n + 1;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->broken = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

/* The whole batch in one multi-row INSERT. Events it must refuse are
 * decided without touching the database; if the INSERT fails, nothing of
 * it happened and handle() per event finds the culprit. */
static int handle_batch(void *state, struct st_mysql *conn, const struct sc_event *const *events,
                        size_t n, sc_handler_status *status, char *reasons, size_t reason_len)
{
    (void)state;
    struct sqlbuf b = {.p = malloc(256), .cap = 256};
    if (!b.p)
        return -1;
    size_t rows = 0;
    sqlbuf_printf(&b, "INSERT INTO notification_job (event_id, order_id, source_version, status, "
                      "created_at) VALUES ");
    for (size_t i = 0; i < n; i++) {
        const struct sc_event *ev = events[i];
        long long order_id;
        status[i] = SC_HANDLER_OK;
        if (strcmp(ev->type, "ORDER_ACCEPTED") != 0)
            continue;
        if (parse_order_id(ev->subject, &order_id) || !ev->has_eventversion ||
            ev->eventversion < INT32_MIN || ev->eventversion > INT32_MAX) {
            /* handle() words the reason */
            status[i] = handle(state, NULL, ev, reasons + i * reason_len, reason_len);
            continue;
        }
        /* The id is a validated canonical UUID and the rest are integers:
         * nothing here needs escaping. */
        sqlbuf_printf(&b, "%s('%s', %lld, %" PRId64 ", 'PENDING', UTC_TIMESTAMP(6))",
                      rows ? ", " : "", ev->id, order_id, ev->eventversion);
        rows++;
    }
    int rc = 0;
    if (b.broken)
        rc = -1; /* out of memory: handle() per event instead */
    else if (rows && mysql_real_query(conn, b.p, b.len) != 0)
        rc = -1;
    free(b.p);
    return rc;
}

static const struct sc_handler_v1 notification_job_handler = {
    .abi_version = SC_HANDLER_ABI_VERSION,
    .struct_size = sizeof(struct sc_handler_v1),
    .name = "notification_job",
    .init = NULL,
    .handle = handle,
    .shutdown = NULL,
    .handle_batch = handle_batch,
};

__attribute__((visibility("default"))) const struct sc_handler_v1 *sc_handler_v1(void)
{
    return &notification_job_handler;
}
