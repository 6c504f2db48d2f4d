/* sql.so: a handler configured in JSON instead of written in C.
 *
 * handler_config maps event types to statements with '?' placeholders and
 * the event values bound to them (sql_config.h has the grammar). Statements
 * are prepared once per worker connection and bound as real parameters:
 * event text never becomes SQL text. Transient server errors answer RETRY,
 * every other error REJECT with its code and SQLSTATE. */
#include <mysql.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sidecar/handler.h"
#include "sidecar/admin/try.h"
#include "sql_config.h"

#define EXPORT __attribute__((visibility("default")))

/* One worker thread's prepared statements, for the connection it had when
 * they were prepared. A worker owns one connection at a time: when its
 * thread comes with another one (a reconnect), the old statements are
 * dropped and prepared again. */
struct conn_stmts {
    pthread_t owner;
    MYSQL *conn;
    unsigned long thread_id;
    int ready;
    MYSQL_STMT **stmts; /* one per statement of the config, by index */
    struct conn_stmts *next;
};

struct sql_state {
    struct sc_sql_config cfg;
    pthread_mutex_t mu; /* guards the list, not the entries: each has one owner */
    struct conn_stmts *conns;
    sc_handler_trace_fn trace;
    void *trace_ctx;
};

struct db_failure {
    unsigned code;
    char sqlstate[6];
    char msg[512]; /* MYSQL_ERRMSG_SIZE */
};

static void drop_stmts(const struct sql_state *st, struct conn_stmts *c)
{
    for (size_t i = 0; i < st->cfg.n_all; i++) {
        if (c->stmts[i])
            mysql_stmt_close(c->stmts[i]); /* after a mysql_close this only frees it */
        c->stmts[i] = NULL;
    }
    c->ready = 0;
    c->conn = NULL;
}

static void fail_from_stmt(MYSQL_STMT *s, struct db_failure *f)
{
    f->code = mysql_stmt_errno(s);
    snprintf(f->sqlstate, sizeof f->sqlstate, "%s", mysql_stmt_sqlstate(s));
    snprintf(f->msg, sizeof f->msg, "%s", mysql_stmt_error(s));
}

static void fail_from_conn(MYSQL *conn, struct db_failure *f)
{
    f->code = mysql_errno(conn);
    snprintf(f->sqlstate, sizeof f->sqlstate, "%s", mysql_sqlstate(conn));
    snprintf(f->msg, sizeof f->msg, "%s", mysql_error(conn));
}

/* RETRY for what may succeed later (deadlock, lock wait, lost connection, a
 * statement to re-prepare), REJECT for everything else. */
static sc_handler_status status_of(const struct db_failure *f)
{
    /* The ABI's list: the same codes the sidecar retries. */
    if (sc_handler_error_is_transient(f->code) || f->code == 1615 /* reprepare */)
        return SC_HANDLER_RETRY;
    return SC_HANDLER_REJECT;
}

/* Prepares statement s on conn and checks its placeholder count. Returns
 * 0, or -1 with f filled. *out is the statement handle whenever one was
 * made, failed or not: the caller closes it (closing clears the
 * connection's error, so not before whoever reads it has). */
static int prepare_one(MYSQL *conn, const struct sc_sql_stmt *s, MYSQL_STMT **out,
                       struct db_failure *f)
{
    MYSQL_STMT *ps = *out = mysql_stmt_init(conn);
    if (!ps) {
        fail_from_conn(conn, f);
        return -1;
    }
    if (mysql_stmt_prepare(ps, s->sql, (unsigned long)strlen(s->sql))) {
        fail_from_stmt(ps, f);
        return -1;
    }
    if (mysql_stmt_param_count(ps) != s->n_params) {
        f->code = 0;
        snprintf(f->sqlstate, sizeof f->sqlstate, "HY000");
        snprintf(f->msg, sizeof f->msg, "the server counts %lu placeholders, params has %zu",
                 mysql_stmt_param_count(ps), s->n_params);
        return -1;
    }
    return 0;
}

static void describe(char *out, size_t len, const char *key, const char *what,
                     const struct db_failure *f)
{
    if (f->code)
        snprintf(out, len, "%s: %s: error %u (SQLSTATE %s): %s", key, what, f->code, f->sqlstate,
                 f->msg);
    else
        snprintf(out, len, "%s: %s: %s", key, what, f->msg);
}

/* This thread's statements for conn, prepared now when needed. Returns
 * NULL with reason and *status set when one does not prepare. */
static struct conn_stmts *stmts_for(struct sql_state *st, MYSQL *conn, sc_handler_status *status,
                                    char *reason, size_t reason_len)
{
    pthread_t self = pthread_self();
    struct conn_stmts *c;
    pthread_mutex_lock(&st->mu);
    for (c = st->conns; c; c = c->next)
        if (pthread_equal(c->owner, self))
            break;
    if (!c && (c = calloc(1, sizeof *c)) != NULL) {
        c->owner = self;
        if (st->cfg.n_all && !(c->stmts = calloc(st->cfg.n_all, sizeof *c->stmts))) {
            free(c);
            c = NULL;
        } else {
            c->next = st->conns;
            st->conns = c;
        }
    }
    pthread_mutex_unlock(&st->mu);
    if (!c) {
        snprintf(reason, reason_len, "sql: out of memory");
        *status = SC_HANDLER_RETRY;
        return NULL;
    }
    /* Same connection object, same server thread, and the statements still
     * attached to it (a closed connection detaches them). */
    if (c->ready && c->conn == conn && c->thread_id == mysql_thread_id(conn) &&
        (st->cfg.n_all == 0 || c->stmts[0]->mysql == conn))
        return c;
    drop_stmts(st, c);
    for (size_t i = 0; i < st->cfg.n_all; i++) {
        struct db_failure f;
        if (prepare_one(conn, st->cfg.all[i], &c->stmts[i], &f)) {
            describe(reason, reason_len, st->cfg.all[i]->key, "does not prepare", &f);
            *status = f.code ? status_of(&f) : SC_HANDLER_REJECT;
            return NULL; /* c->ready is 0: dropped and prepared again next time */
        }
    }
    c->conn = conn;
    c->thread_id = mysql_thread_id(conn);
    c->ready = 1;
    return c;
}

/* The values of statement s for ev. Returns 0, or -1 with the reason
 * naming the parameter (values then hold nothing to free). */
static int values_for(const struct sc_sql_stmt *s, const struct sc_event *ev,
                      struct sc_sql_value *vals, char *reason, size_t reason_len)
{
    for (size_t i = 0; i < s->n_params; i++) {
        char why[400];
        if (sc_sql_param_value(&s->params[i], ev, &vals[i], why, sizeof why)) {
            snprintf(reason, reason_len, "%s.params[%zu]: %s", s->key, i, why);
            for (size_t j = 0; j < i; j++)
                sc_sql_value_free(&vals[j]);
            return -1;
        }
    }
    return 0;
}

static void bind_values(const struct sc_sql_value *vals, size_t n, MYSQL_BIND *b,
                        unsigned long *lens, MYSQL_TIME *times)
{
    memset(b, 0, n * sizeof *b);
    for (size_t i = 0; i < n; i++) {
        const struct sc_sql_value *v = &vals[i];
        switch (v->kind) {
        case SC_SQL_V_NULL:
            b[i].buffer_type = MYSQL_TYPE_NULL;
            break;
        case SC_SQL_V_INT:
        case SC_SQL_V_BOOL:
            b[i].buffer_type = MYSQL_TYPE_LONGLONG;
            b[i].buffer = (void *)&v->i;
            break;
        case SC_SQL_V_DOUBLE:
            b[i].buffer_type = MYSQL_TYPE_DOUBLE;
            b[i].buffer = (void *)&v->d;
            break;
        case SC_SQL_V_DECIMAL:
        case SC_SQL_V_TEXT:
            lens[i] = (unsigned long)v->len;
            b[i].buffer_type = v->kind == SC_SQL_V_DECIMAL ? MYSQL_TYPE_NEWDECIMAL : MYSQL_TYPE_STRING;
            b[i].buffer = (void *)v->s;
            b[i].buffer_length = lens[i];
            b[i].length = &lens[i];
            break;
        case SC_SQL_V_DATETIME:
            memset(&times[i], 0, sizeof times[i]);
            times[i].year = (unsigned)v->dt.year;
            times[i].month = (unsigned)v->dt.month;
            times[i].day = (unsigned)v->dt.day;
            times[i].hour = (unsigned)v->dt.hour;
            times[i].minute = (unsigned)v->dt.minute;
            times[i].second = (unsigned)v->dt.second;
            times[i].second_part = v->dt.usec;
            times[i].time_type = MYSQL_TIMESTAMP_DATETIME;
            b[i].buffer_type = MYSQL_TYPE_DATETIME;
            b[i].buffer = &times[i];
            break;
        }
    }
}

/* Runs one prepared statement with vals. Returns 0, or -1 with f filled. */
static int execute(struct sql_state *st, MYSQL *conn, MYSQL_STMT *ps, const struct sc_sql_stmt *s,
                   const struct sc_sql_value *vals, struct db_failure *f)
{
    MYSQL_BIND b[SC_SQL_MAX_PARAMS];
    unsigned long lens[SC_SQL_MAX_PARAMS];
    MYSQL_TIME times[SC_SQL_MAX_PARAMS];
    bind_values(vals, s->n_params, b, lens, times);
    if ((s->n_params && mysql_stmt_bind_param(ps, b)) || mysql_stmt_execute(ps)) {
        fail_from_stmt(ps, f);
        return -1;
    }
    /* Every result is read and dropped: a SELECT has one, a CALL one per
     * result set of the procedure and then its status. One left unread
     * makes the connection's next statement fail with 2014 (commands out
     * of sync), the sidecar's own included. */
    unsigned long long affected = 0;
    for (;;) {
        if (mysql_stmt_field_count(ps) > 0) {
            int rc = mysql_stmt_store_result(ps);
            mysql_stmt_free_result(ps);
            if (rc) {
                fail_from_stmt(ps, f);
                return -1;
            }
        } else {
            affected = (unsigned long long)mysql_stmt_affected_rows(ps);
        }
        int more = mysql_stmt_next_result(ps);
        if (more == -1)
            break;
        if (more > 0) {
            /* an error raised by the procedure after its first result */
            if (mysql_stmt_errno(ps))
                fail_from_stmt(ps, f);
            else
                fail_from_conn(conn, f);
            return -1;
        }
    }
    if (st->trace)
        st->trace(st->trace_ctx, conn, s->key, affected, mysql_warning_count(conn));
    return 0;
}

/* Not configured: consumed with no effect, or refused. */
static sc_handler_status other_event(const struct sql_state *st, const struct sc_event *ev,
                                     char *reason, size_t reason_len)
{
    if (!st->cfg.reject_others)
        return SC_HANDLER_OK;
    snprintf(reason, reason_len, "event type '%.64s' is not in handler_config.events "
             "(other_events is \"reject\")", ev->type);
    return SC_HANDLER_REJECT;
}

static sc_handler_status handle(void *state, struct st_mysql *conn, const struct sc_event *ev,
                                char *reason, size_t reason_len)
{
    struct sql_state *st = state;
    sc_handler_status status = SC_HANDLER_OK;
    const struct sc_sql_route *r = sc_sql_route_find(&st->cfg, ev->type);
    /* Every statement prepares on a connection's first event, whatever its
     * type: a statement that does not fit the schema shows at once. */
    struct conn_stmts *c = stmts_for(st, conn, &status, reason, reason_len);
    if (!c)
        return status;
    if (!r)
        return other_event(st, ev, reason, reason_len);
    if (r->n_stmts == 0)
        return SC_HANDLER_OK;
    for (size_t i = 0; i < r->n_stmts && status == SC_HANDLER_OK; i++) {
        const struct sc_sql_stmt *s = &r->stmts[i];
        struct sc_sql_value vals[SC_SQL_MAX_PARAMS];
        struct db_failure f;
        if (values_for(s, ev, vals, reason, reason_len)) {
            status = SC_HANDLER_REJECT;
            break;
        }
        if (execute(st, conn, c->stmts[s->index], s, vals, &f)) {
            describe(reason, reason_len, s->key, "failed", &f);
            status = status_of(&f);
            /* Prepared again on the next call, not closed now: closing a
             * statement clears the connection's error (MariaDB
             * Connector/C), and the sidecar reads it after handle() returns
             * to tell a deadlock (the whole transaction rolled back) from a
             * lock wait or a lost connection. */
            if (status == SC_HANDLER_RETRY)
                c->ready = 0;
        }
        for (size_t j = 0; j < s->n_params; j++)
            sc_sql_value_free(&vals[j]);
    }
    return status;
}

/* Checks every parameter of ev's statements without the database: 0 when
 * they all convert, else the REJECT reason. */
static int validate(const struct sc_sql_route *r, const struct sc_event *ev, char *reason,
                    size_t reason_len)
{
    int rc = 0;
    for (size_t i = 0; i < r->n_stmts && rc == 0; i++) {
        struct sc_sql_value vals[SC_SQL_MAX_PARAMS];
        rc = values_for(&r->stmts[i], ev, vals, reason, reason_len);
        for (size_t j = 0; rc == 0 && j < r->stmts[i].n_params; j++)
            sc_sql_value_free(&vals[j]);
    }
    return rc;
}

/* The batch: events whose values do not convert are refused without a
 * round trip and without undoing the others; the rest run their
 * statements. Any statement error returns -1: the sidecar rolls back and
 * calls handle() per event, which words that event's reason. */
static int handle_batch(void *state, struct st_mysql *conn, const struct sc_event *const *events,
                        size_t n, sc_handler_status *status, char *reasons, size_t reason_len)
{
    struct sql_state *st = state;
    sc_handler_status ps = SC_HANDLER_OK;
    char why[600];
    if (!stmts_for(st, conn, &ps, why, sizeof why))
        return -1;
    for (size_t i = 0; i < n; i++) {
        const struct sc_sql_route *r = sc_sql_route_find(&st->cfg, events[i]->type);
        char *reason = reasons + i * reason_len;
        status[i] = !r ? other_event(st, events[i], reason, reason_len)
                       : validate(r, events[i], reason, reason_len) ? SC_HANDLER_REJECT
                                                                    : SC_HANDLER_OK;
    }
    for (size_t i = 0; i < n; i++) {
        if (status[i] != SC_HANDLER_OK || !sc_sql_route_find(&st->cfg, events[i]->type))
            continue;
        if (handle(state, conn, events[i], why, sizeof why) != SC_HANDLER_OK)
            return -1;
    }
    return 0;
}

static int init(const char *config_json, void **state, char *err, size_t err_len)
{
    struct sql_state *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    if (sc_sql_config_parse(config_json, strlen(config_json), &st->cfg, err, err_len)) {
        free(st);
        return -1;
    }
    pthread_mutex_init(&st->mu, NULL);
    *state = st;
    return 0;
}

static void shutdown_handler(void *state)
{
    struct sql_state *st = state;
    if (!st)
        return;
    struct conn_stmts *c = st->conns;
    while (c) {
        struct conn_stmts *next = c->next;
        drop_stmts(st, c);
        free(c->stmts);
        free(c);
        c = next;
    }
    pthread_mutex_destroy(&st->mu);
    sc_sql_config_free(&st->cfg);
    free(st);
}

EXPORT int sc_handler_check_v1(void *state, struct st_mysql *conn, char *err, size_t err_len);
EXPORT void sc_handler_trace_v1(void *state, sc_handler_trace_fn fn, void *ctx);

/* Prepares every statement on conn and closes it again: 0, or -1 with the
 * first that fails, named by its key. */
EXPORT int sc_handler_check_v1(void *state, struct st_mysql *conn, char *err, size_t err_len)
{
    struct sql_state *st = state;
    for (size_t i = 0; i < st->cfg.n_all; i++) {
        struct db_failure f;
        MYSQL_STMT *ps = NULL;
        int rc = prepare_one(conn, st->cfg.all[i], &ps, &f);
        if (ps)
            mysql_stmt_close(ps);
        if (rc) {
            describe(err, err_len, st->cfg.all[i]->key, "does not prepare", &f);
            return -1;
        }
    }
    return 0;
}

EXPORT void sc_handler_trace_v1(void *state, sc_handler_trace_fn fn, void *ctx)
{
    struct sql_state *st = state;
    st->trace = fn;
    st->trace_ctx = ctx;
}

static const struct sc_handler_v1 sql_handler = {
    .abi_version = SC_HANDLER_ABI_VERSION,
    .struct_size = sizeof(struct sc_handler_v1),
    .name = "sql",
    .init = init,
    .handle = handle,
    .shutdown = shutdown_handler,
    .handle_batch = handle_batch,
};

EXPORT const struct sc_handler_v1 *sc_handler_v1(void)
{
    return &sql_handler;
}
