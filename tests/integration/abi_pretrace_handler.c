/* A handler built against the handler ABI header as it was before the trace
 * context was appended to struct sc_event (a verbatim copy of
 * include/sidecar/handler.h from before them, in abi_pretrace/, the only header path this file is
 * compiled with). The consumer built today must still load it and hand it
 * events it reads right: for type OLD_ABI it stores what it sees of each
 * field of that header in t_abi_old, so the test compares them with what was sent. */
#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sidecar/handler.h>

/* The header really is the old one: its struct sc_event is 72 bytes on LP64
 * and has no trace fields. */
_Static_assert(sizeof(void *) != 8 || sizeof(struct sc_event) == 72, "abi_pretrace is the header from before the trace fields");
#ifdef SC_EVENT_HAS
#error "abi_pretrace must be the header from before the trace context"
#endif

/* s escaped as a quoted SQL literal into out (sized 2n+3), or NULL. */
static char *literal(MYSQL *conn, const char *s, size_t n)
{
    char *out = malloc(2 * n + 3);
    if (!out)
        return NULL;
    out[0] = '\'';
    unsigned long k = mysql_real_escape_string(conn, out + 1, s, (unsigned long)n);
    out[k + 1] = '\'';
    out[k + 2] = 0;
    return out;
}

static sc_handler_status handle(void *state, struct st_mysql *conn, const struct sc_event *ev,
                                char *reason, size_t reason_len)
{
    (void)state;
    if (strcmp(ev->type, "OLD_ABI") != 0)
        return SC_HANDLER_OK;
    const char *subject = ev->subject ? ev->subject : "";
    const char *data = ev->data_json ? ev->data_json : "";
    size_t data_len = ev->data_json ? ev->data_json_len : 0;
    char *id = literal(conn, ev->id, strlen(ev->id)), *sub = literal(conn, subject, strlen(subject)),
         *src = literal(conn, ev->source, strlen(ev->source)), *dat = literal(conn, data, data_len);
    char *sql = NULL;
    sc_handler_status st = SC_HANDLER_RETRY;
    if (id && sub && src && dat) {
        size_t len = strlen(id) + strlen(sub) + strlen(src) + strlen(dat) + 160;
        if ((sql = malloc(len))) {
            snprintf(sql, len, "INSERT INTO t_abi_old (event_id, source, subject, eventversion, data) "
                     "VALUES (%s, %s, %s, %lld, %s)", id, src, sub,
                     ev->has_eventversion ? (long long)ev->eventversion : -1LL, dat);
            if (mysql_query(conn, sql) == 0) {
                st = SC_HANDLER_OK;
            } else {
                st = sc_handler_error_is_transient(mysql_errno(conn)) ? SC_HANDLER_RETRY
                                                                       : SC_HANDLER_REJECT;
                snprintf(reason, reason_len, "error %u: %s", mysql_errno(conn), mysql_error(conn));
            }
        }
    }
    if (!sql && st == SC_HANDLER_RETRY)
        snprintf(reason, reason_len, "out of memory");
    free(sql);
    free(id);
    free(sub);
    free(src);
    free(dat);
    return st;
}

static const struct sc_handler_v1 h = {
    .abi_version = SC_HANDLER_ABI_VERSION,
    .struct_size = sizeof(struct sc_handler_v1),
    .name = "abi_pretrace",
    .handle = handle,
};

__attribute__((visibility("default"))) const struct sc_handler_v1 *sc_handler_v1(void)
{
    return &h;
}
