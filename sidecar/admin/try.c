/* `sidecar try -c FILE --consumer NAME EVENT.json...`: for each file, the
 * path a delivery takes (parse, claim, handler) on one database
 * connection, inside one transaction that is always rolled back. Each
 * event runs under its own savepoint, so later files see what earlier ones
 * did (a repeated id is a duplicate) and a refused one leaves no trace for
 * the next. A handler that ends the transaction (commit, rollback,
 * autocommit on) is reported, with what it committed, and the next events
 * run in a new session. Nothing touches the broker. */
#include "try.h"

#include <dlfcn.h>
#include <errno.h>
#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/try_file.h"
#include "envelope/message.h"
#include "io/db.h"
#include "plugin.h"

enum outcome { O_APPLIED, O_DUPLICATE, O_RETRY, O_REJECT, O_MALFORMED, O_N };

static const char *const outcome_names[O_N] = {"applied", "duplicate", "retry", "reject",
                                               "malformed"};

int sc_try_check_handler(const struct sc_plugin *p, struct st_mysql *conn, int *had_check,
                         char *err, size_t err_len)
{
    sc_handler_check_v1_fn fn;
    *had_check = 0;
    *(void **)&fn = dlsym(p->dl, SC_HANDLER_CHECK_SYMBOL);
    if (!fn)
        return 0;
    *had_check = 1;
    char msg[1024] = "";
    if (fn(p->state, conn, msg, sizeof msg) != 0) {
        snprintf(err, err_len, "%s", msg[0] ? msg : "the handler's check failed without a reason");
        return -1;
    }
    return 0;
}

/* Prints one statement the handler ran, and its warnings. */
static void trace_statement(void *ctx, struct st_mysql *conn, const char *label,
                            unsigned long long rows, unsigned warnings)
{
    (void)ctx;
    printf("  statement %s: %llu row%s affected, %u warning%s\n", label, rows, rows == 1 ? "" : "s",
           warnings, warnings == 1 ? "" : "s");
    if (!warnings)
        return;
    /* SHOW WARNINGS leaves the diagnostics area as it is. */
    if (mysql_query(conn, "SHOW WARNINGS") != 0)
        return;
    MYSQL_RES *r = mysql_store_result(conn);
    MYSQL_ROW row;
    while (r && (row = mysql_fetch_row(r)) != NULL)
        printf("    warning %s: %s\n", row[1] ? row[1] : "?", row[2] ? row[2] : "");
    if (r)
        mysql_free_result(r);
}

static void db_reason(char *out, size_t len, const char *what, const struct sc_db_err *e)
{
    snprintf(out, len, "%s: error %u (SQLSTATE %s, %s): %s", what, e->code, e->sqlstate,
             sc_db_error_class_name(e->cls), e->msg);
}

/* How try_event left the session. */
enum session {
    S_OK,       /* the transaction goes on */
    S_ENDED,    /* the server ended it (deadlock, lost connection): a new session */
    S_BROKEN,   /* the handler ended it (commit, rollback, autocommit on): a new
                   session, and whatever it committed is in the database */
};

/* One event: claim, handler, decided under savepoint sc_try (kept when
 * applied, rolled back to otherwise). Returns the outcome with its reason,
 * and in *session whether the transaction goes on. */
static enum outcome try_event(struct sc_db *db, const struct sc_plugin *p, const char *consumer,
                              const struct sc_event *ev, int traced, char *why, size_t why_len,
                              enum session *session)
{
    struct sc_db_err e = {0}, u = {0};
    *session = S_OK;
    if (sc_db_query(db, "SAVEPOINT sc_try", &e)) {
        db_reason(why, why_len, "SAVEPOINT", &e);
        *session = S_ENDED;
        return O_RETRY;
    }
    if (sc_db_insert_consumed(db, consumer, ev->id, &e)) {
        if (e.cls == SC_DBERR_DUPLICATE) {
            snprintf(why, why_len, "consumer %s already has event %s in consumed_event", consumer,
                     ev->id);
            return O_DUPLICATE;
        }
        db_reason(why, why_len, "claim (INSERT consumed_event)", &e);
        if (e.cls == SC_DBERR_CONNECTION || e.code == 1213 ||
            sc_db_query(db, "ROLLBACK TO SAVEPOINT sc_try", &u))
            *session = S_ENDED;
        return O_RETRY;
    }
    printf("  claim: INSERT consumed_event (%s, %s): 1 row affected\n", consumer, ev->id);
    char reason[1024] = "";
    sc_handler_status st = sc_plugin_handle(p, db->conn, ev, reason, sizeof reason);
    sc_db_last_error(db, &e);
    unsigned long long rows = (unsigned long long)mysql_affected_rows(db->conn);
    unsigned warnings = mysql_warning_count(db->conn);
    /* Whatever the handler answered, the transaction must still be the one
     * the claim was made in: open, autocommit off, and its savepoint there
     * (a handler that committed and ran another statement is in a new
     * transaction, without the savepoint). Applied: RELEASE keeps the work
     * and proves the savepoint; otherwise ROLLBACK TO it undoes the part. */
    int transient = e.cls == SC_DBERR_CONNECTION || e.code == 1213;
    int open = sc_db_in_transaction(db);
    if (open && !transient)
        open = sc_db_query(db, st == SC_HANDLER_OK ? "RELEASE SAVEPOINT sc_try"
                                                  : "ROLLBACK TO SAVEPOINT sc_try", &u) == 0;
    if (!open && !transient && u.cls != SC_DBERR_CONNECTION) {
        snprintf(why, why_len, "handler %s ended the transaction (commit, rollback or "
                 "autocommit): contract violation; the sidecar dead-letters such an event and "
                 "replaces the session", p->h->name);
        *session = S_BROKEN;
        return O_REJECT;
    }
    char dberr[160] = "";
    if (e.code)
        snprintf(dberr, sizeof dberr, " (last database error %u, SQLSTATE %s)", e.code, e.sqlstate);
    if (!open || transient) {
        /* The server ended it: a deadlock, a lost connection. */
        *session = S_ENDED;
        if (st == SC_HANDLER_OK && transient) {
            snprintf(why, why_len, "handler %s answered OK after an error that ended the "
                     "transaction%s", p->h->name, dberr);
            return O_RETRY;
        }
        if (st == SC_HANDLER_OK) {
            db_reason(why, why_len, "RELEASE SAVEPOINT after the handler", &u);
            return O_RETRY;
        }
    } else if (st == SC_HANDLER_OK) {
        /* A handler without a trace: what the connection said of its last
         * statement is all there is to show. */
        if (!traced)
            printf("  handler %s: OK; last statement: %llu row%s affected, %u warning%s\n",
                   p->h->name, rows, rows == 1 ? "" : "s", warnings, warnings == 1 ? "" : "s");
        return O_APPLIED;
    }
    snprintf(why, why_len, "%s%s", reason[0] ? reason : "no reason given", dberr);
    return st == SC_HANDLER_RETRY ? O_RETRY : O_REJECT;
}

/* A new session after the old transaction ended: the sidecar's settings
 * again (autocommit off above all: a handler that switched it on would
 * otherwise have every later claim commit on its own). Returns 0, or -1
 * with e filled. */
static int renew_session(struct sc_db *db, const struct sc_config *cfg, struct sc_db_err *e)
{
    struct sc_db_err ignored = {0};
    if (sc_db_connected(db))
        sc_db_rollback(db, &ignored);
    sc_db_close(db);
    return sc_db_connect(db, cfg, e) || sc_db_prepare_consumer(db, e) ? -1 : 0;
}

/* After a handler ended the transaction: which of the claims this
 * transaction made are in the database now (the handler committed them,
 * with the effects made before its COMMIT), printed one per line. */
static void report_committed(struct sc_db *db, const char *consumer, char (*ids)[37], int n)
{
    for (int i = 0; i < n; i++) {
        const char *id = ids[i];
        long count = 0;
        struct sc_db_err e = {0};
        if (sc_db_count_consumed_many(db, consumer, &id, 1, &count, &e))
            printf("  cannot tell whether the claim of %s was committed: error %u: %s\n", id,
                   e.code, e.msg);
        else if (count > 0)
            printf("  committed for real by the handler: consumer %s's claim of %s, with the "
                   "effects made before its COMMIT (the consumer will take the event for a "
                   "duplicate)\n", consumer, id);
    }
}

/* What the files of one run share. */
struct try_run {
    struct sc_db *db;
    const struct sc_plugin *p;
    const struct sc_consumer_config *k;
    const struct sc_config *cfg;
    int traced;
    int *counts;
    char (*claimed)[37]; /* the claims made in the current transaction: what a
                            handler that commits would commit for real */
    int n_claimed;
    int gone; /* the session could not be made again: the rest is not tried */
};

static void report(struct try_run *r, enum outcome o, const char *why)
{
    r->counts[o]++;
    if (o == O_APPLIED)
        printf("  outcome: applied\n");
    else
        printf("  outcome: %s: %s\n", outcome_names[o], why);
}

/* One event of a file, as the consumer would run it. Returns its outcome. */
static enum outcome try_one(struct try_run *r, const struct sc_parsed_event *pe)
{
    char why[2048] = "";
    enum session session = S_OK;
    if (pe->id_from[0] && pe->id_of_source)
        printf("  id %s (UUIDv5 of source '%s' and id '%s'), type %s\n", pe->ev.id,
               pe->ev.source, pe->id_from, pe->ev.type);
    else if (pe->id_from[0])
        printf("  id %s (UUIDv5 of message_id '%s'), type %s\n", pe->ev.id, pe->id_from,
               pe->ev.type);
    else
        printf("  id %s, type %s\n", pe->ev.id, pe->ev.type);
    enum outcome o = try_event(r->db, r->p, r->k->name, &pe->ev, r->traced, why, sizeof why,
                               &session);
    if (o == O_APPLIED || session == S_BROKEN)
        memcpy(r->claimed[r->n_claimed++], pe->ev.id, 37);
    report(r, o, why);
    if (session == S_OK)
        return o;
    if (session == S_ENDED)
        printf("  note: the transaction ended; earlier events' effects are gone; the next "
               "events run in a new database session\n");
    else
        printf("  note: the handler ended the transaction; the next events run in a new "
               "database session, so nothing of theirs can commit\n");
    struct sc_db_err e = {0};
    if (renew_session(r->db, r->cfg, &e)) {
        printf("  cannot reconnect: error %u: %s; the remaining events are not tried\n", e.code,
               e.msg);
        r->gone = 1;
        return o;
    }
    if (session == S_BROKEN)
        report_committed(r->db, r->k->name, r->claimed, r->n_claimed);
    r->n_claimed = 0;
    return o;
}

/* Every event of one file in the consumer's envelope. Returns 0 when each
 * would apply. */
static int try_file(struct try_run *r, const char *path)
{
    char why[2048] = "";
    struct sc_try_message tm;
    if (sc_try_message_read(path, r->k, &tm, why, sizeof why)) {
        report(r, O_MALFORMED, why);
        return -1;
    }
    const struct sc_message m = {.props = &tm.props, .body = tm.body, .exchange = tm.exchange,
                                 .routing_key = tm.routing_key};
    const struct sc_envelope_opts o = sc_envelope_opts_for(r->k);
    struct sc_message_events evs;
    int failed = 0;
    if (sc_message_open(&m, &o, &evs, why, sizeof why)) {
        report(r, O_MALFORMED, why);
        failed = 1;
    } else {
        if (evs.mode != SC_MODE_STRUCTURED || tm.fields)
            printf("  %s mode, %d event%s\n", sc_message_mode_name(evs.mode), evs.n,
                   evs.n == 1 ? "" : "s");
        for (int i = 0; i < evs.n && !r->gone; i++) {
            struct sc_parsed_event pe;
            if (evs.mode == SC_MODE_BATCH)
                printf("  member %d:\n", i);
            if (sc_message_event(&m, &o, &evs, i, &pe, why, sizeof why)) {
                report(r, O_MALFORMED, why);
                failed = 1;
                continue;
            }
            failed |= try_one(r, &pe) != O_APPLIED;
            sc_event_free(&pe);
        }
    }
    sc_message_events_free(&evs);
    sc_try_message_free(&tm);
    return failed ? -1 : 0;
}

static int parse_args(int argc, char **argv, const char **consumer, char ***files, int *n_files)
{
    *consumer = NULL;
    *n_files = 0;
    *files = argv;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--consumer") == 0 && i + 1 < argc)
            *consumer = argv[++i];
        else if (argv[i][0] == '-' && argv[i][1])
            return fprintf(stderr, "sidecar try: unknown option '%s'\n", argv[i]), -1;
        else
            argv[(*n_files)++] = argv[i];
    }
    if (!*consumer)
        return fprintf(stderr, "sidecar try: --consumer NAME is required\n"), -1;
    if (!*n_files)
        return fprintf(stderr, "sidecar try: name at least one EVENT.json file\n"), -1;
    return 0;
}

int sc_try_run(const struct sc_config *cfg, int argc, char **argv)
{
    const char *name;
    char **files;
    int n_files;
    if (parse_args(argc, argv, &name, &files, &n_files))
        return 2;
    const struct sc_consumer_config *k = sc_config_consumer(cfg, name);
    if (!k) {
        fprintf(stderr, "sidecar try: no consumer named '%s' in the config\n", name);
        return 2;
    }
    char err[1024];
    struct sc_plugin p;
    if (sc_plugin_load(&p, k->handler, k->handler_config, err, sizeof err)) {
        fprintf(stderr, "sidecar try: consumer %s: %s\n", k->name, err);
        return 2;
    }
    struct sc_db db;
    struct sc_db_err e = {0};
    if (sc_db_connect(&db, cfg, &e) || sc_db_prepare_consumer(&db, &e)) {
        fprintf(stderr, "sidecar try: mysql: error %u (SQLSTATE %s): %s\n", e.code, e.sqlstate,
                e.msg);
        sc_plugin_unload(&p);
        return 1;
    }
    printf("try: consumer %s, handler %s, %d event file%s; everything is rolled back\n", k->name,
           p.h->name, n_files, n_files == 1 ? "" : "s");
    int had_check, rc = 0;
    if (sc_try_check_handler(&p, db.conn, &had_check, err, sizeof err)) {
        printf("handler check: FAILED: %s\n", err);
        rc = 1;
    } else if (had_check) {
        printf("handler check: every statement prepares\n");
    }
    sc_handler_trace_v1_fn set_trace;
    *(void **)&set_trace = dlsym(p.dl, SC_HANDLER_TRACE_SYMBOL);
    if (set_trace)
        set_trace(p.state, trace_statement, NULL);

    int counts[O_N] = {0};
    /* The claims made in the current transaction: what a handler that
     * commits would commit for real. */
    char (*claimed)[37] = calloc((size_t)n_files * SC_MESSAGE_BATCH_MAX, sizeof *claimed);
    if (!claimed) {
        fprintf(stderr, "sidecar try: out of memory\n");
        rc = 1;
        n_files = 0;
    }
    struct try_run run = {.db = &db, .p = &p, .k = k, .cfg = cfg, .traced = set_trace != NULL,
                          .counts = counts, .claimed = claimed};
    for (int i = 0; i < n_files && claimed; i++) {
        printf("event %d: %s\n", i + 1, files[i]);
        if (try_file(&run, files[i]) || run.gone)
            rc = 1;
        if (run.gone)
            break;
    }
    free(claimed);
    if (set_trace)
        set_trace(p.state, NULL, NULL);
    if (sc_db_connected(&db) && sc_db_rollback(&db, &e)) {
        fprintf(stderr, "sidecar try: ROLLBACK failed: error %u: %s\n", e.code, e.msg);
        rc = 1;
    }
    printf("try: %d applied, %d duplicate, %d retry, %d reject, %d malformed; rolled back\n",
           counts[O_APPLIED], counts[O_DUPLICATE], counts[O_RETRY], counts[O_REJECT],
           counts[O_MALFORMED]);
    sc_plugin_unload(&p);
    sc_db_close(&db);
    return rc;
}
