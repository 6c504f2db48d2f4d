#include "consumer.h"

#include <malloc.h>
#include <mysql.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amqp_conn.h"
#include "db.h"
#include "event.h"
#include "fault.h"
#include "http.h"
#include "lifecycle.h"
#include "log.h"
#include "metrics.h"
#include "plugin.h"

#define RECEIVE_POLL_MS 200
#define DB_IDLE_PING_MS 30000
#define PUBLISHER_SERVICE_MS 1000
#define SC_BATCH_MAX 1000 /* the config bound of batch_max */
#define REASON_LEN 512
/* Attempt counts read from headers are clamped here (a header is input). */
#define SC_MAX_ATTEMPTS_SEEN 1000000
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 30000

/* Headers the sidecar writes on messages it republishes. */
#define H_ATTEMPTS "x-sidecar-attempts"
#define H_REASON "x-sidecar-reason"
#define H_CONSUMER "x-sidecar-consumer"
#define H_FAILED_AT "x-sidecar-failed-at"
#define H_ORIG_EXCHANGE "x-sidecar-original-exchange"
#define H_ORIG_ROUTING_KEY "x-sidecar-original-routing-key"
#define H_LAST_ERROR "x-sidecar-last-error"

struct consumer {
    const struct sc_config *cfg;
    const struct sc_consumer_config *k;
    struct sc_plugin plugin;
    struct sc_consumer_metrics m;
};

struct worker {
    struct consumer *c;
    int index;
    struct sc_db db;
    struct sc_amqp in;   /* consuming connection */
    struct sc_amqp out;  /* publishing connection, confirm mode: DLQ and retries */
    pthread_t thread;
    int64_t last_db_use_ms;
    int64_t last_heartbeat_ms; /* last heartbeat sent by keep_alive() */
    struct item *items;  /* batch_max deliveries */
    char *reasons;       /* batch_max * REASON_LEN, for handle_batch */
    int up_db, up_amqp, up_consuming; /* this worker's part of the gauges */
};

/* What the loop does after a delivery. */
enum next { NEXT_CONTINUE, NEXT_RESET };

/* ---- headers of republished messages ------------------------------------ */

struct headers {
    amqp_table_entry_t *e;
    int n, cap;
};

/* Starts from the delivery's headers minus the keys the sidecar rewrites. */
static int headers_from(struct headers *h, const amqp_table_t *old)
{
    int n_old = old ? old->num_entries : 0;
    h->cap = n_old + 8;
    h->n = 0;
    if (!(h->e = calloc((size_t)h->cap, sizeof *h->e)))
        return -1;
    static const char *const rewritten[] = {H_ATTEMPTS, H_REASON, H_CONSUMER, H_FAILED_AT,
                                            H_LAST_ERROR};
    for (int i = 0; i < n_old; i++) {
        const amqp_table_entry_t *e = &old->entries[i];
        int drop = 0;
        for (size_t j = 0; j < sizeof rewritten / sizeof *rewritten; j++)
            drop |= e->key.len == strlen(rewritten[j]) &&
                    memcmp(e->key.bytes, rewritten[j], e->key.len) == 0;
        if (!drop)
            h->e[h->n++] = *e;
    }
    return 0;
}

static void headers_str(struct headers *h, const char *key, amqp_bytes_t val)
{
    amqp_table_entry_t *e = &h->e[h->n++];
    e->key = amqp_cstring_bytes(key);
    e->value.kind = AMQP_FIELD_KIND_UTF8;
    e->value.value.bytes = val;
}

static void headers_int(struct headers *h, const char *key, int64_t val)
{
    amqp_table_entry_t *e = &h->e[h->n++];
    e->key = amqp_cstring_bytes(key);
    e->value.kind = AMQP_FIELD_KIND_I64;
    e->value.value.i64 = val;
}

static const amqp_table_t *delivery_headers(const amqp_envelope_t *env)
{
    const amqp_basic_properties_t *p = &env->message.properties;
    return (p->_flags & AMQP_BASIC_HEADERS_FLAG) ? &p->headers : NULL;
}

/* The first exchange and routing key the message was published with. */
static void headers_original_route(struct headers *h, const amqp_envelope_t *env)
{
    const amqp_table_t *old = delivery_headers(env);
    if (!sc_amqp_header_bytes(old, H_ORIG_EXCHANGE).len &&
        !sc_amqp_header_bytes(old, H_ORIG_ROUTING_KEY).len) {
        headers_str(h, H_ORIG_EXCHANGE, env->exchange);
        headers_str(h, H_ORIG_ROUTING_KEY, env->routing_key);
    }
}

/* Publishes a copy of the delivery to the default exchange with routing key
 * `queue` and the given headers, under confirms. Returns 0 when confirmed. */
static int republish(struct worker *w, const amqp_envelope_t *env, const char *queue,
                     struct headers *h, const struct sc_log_fields *lf)
{
    amqp_basic_properties_t props = env->message.properties;
    props._flags |= AMQP_BASIC_HEADERS_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG;
    /* The publisher's per-message TTL must not follow the copy: it would
     * silently expire out of the DLQ, or cut a retry delay short. */
    sc_amqp_props_clear_ttl(&props);
    props.headers.num_entries = h->n;
    props.headers.entries = h->e;
    props.delivery_mode = AMQP_DELIVERY_PERSISTENT;
    struct sc_publish msg = {.exchange = "", .routing_key = queue, .props = &props,
                             .body = env->message.body, .mandatory = 1};
    char err[256] = "";
    int acked = sc_amqp_publish_confirmed(&w->out, &msg, 1, 10000, err, sizeof err);
    if (acked == 1)
        return 0;
    sc_log(SC_LOG_ERROR, lf, "publish to %s not confirmed (%s%s%s): the delivery is not acked",
           queue, sc_publish_result_name(msg.result), err[0] ? ": " : "", err);
    return -1;
}

static void gauge(atomic_int *g, int *mine, int up);

/* ---- one batch ----------------------------------------------------------- */

/* What becomes of a delivery of the batch. */
enum disposition {
    D_OPEN = 0,   /* not decided yet */
    D_APPLIED,    /* claim + effect are in the transaction: ack after COMMIT */
    D_DUPLICATE,  /* already consumed: ack after the transaction */
    D_RETRY,      /* rolled back: through a delay queue, then ack */
    D_DEAD,       /* malformed, rejected or exhausted: to the DLQ, then ack */
    D_REQUEUE,    /* outcome unknown for this one: nack with requeue */
};

struct item {
    amqp_envelope_t env;
    int64_t received_us;
    int attempt;
    int parsed;
    struct sc_parsed_event ev;
    enum disposition d;
    int republished;      /* its retry or dead-letter copy was confirmed */
    int decided_early;    /* dead before the transaction (x-delivery-count guard):
                             no retry of the batch reopens it */
    struct sc_log_fields lf;
    char ev_sqlstate[6];
    char why[1024];
};

/* How a batch's transaction ended. */
enum txn {
    TXN_COMMITTED,  /* COMMIT succeeded */
    TXN_OPEN,       /* internal: the transaction goes on */
    TXN_NOTHING,    /* internal to the fast path: take the per-delivery path */
    TXN_EMPTY,      /* nothing to commit (duplicates and failures only): rolled back */
    TXN_DEADLOCK,   /* the server rolled the whole transaction back (1213) */
    TXN_VANISHED,   /* the claims were gone before COMMIT: a handler swallowed an
                       error that rolled the transaction back (1213, 1205) */
    TXN_LOST,       /* the connection died before COMMIT: nothing committed */
    TXN_UNKNOWN,    /* COMMIT failed or the connection dropped around it */
    TXN_BROKEN,     /* a handler ended the transaction itself */
};

static const char *txn_name(enum txn t)
{
    static const char *const names[] = {
        [TXN_COMMITTED] = "committed", [TXN_OPEN] = "open",         [TXN_NOTHING] = "nothing",
        [TXN_EMPTY] = "empty",         [TXN_DEADLOCK] = "deadlock", [TXN_VANISHED] = "vanished",
        [TXN_LOST] = "lost",           [TXN_UNKNOWN] = "unknown",   [TXN_BROKEN] = "broken",
    };
    return names[t];
}

/* rabbitmq-c services heartbeats only inside its own calls. A batch that
 * spends long in the database (lock waits, slow handlers, many deliveries)
 * would go silent and the broker would close the connection, returning the
 * whole batch, possibly forever: send heartbeats on both connections every
 * half interval while the batch runs. */
static void keep_alive(struct worker *w)
{
    int hb = w->c->cfg->amqp_heartbeat_s;
    int64_t now = sc_now_ms();
    if (hb <= 0 || now - w->last_heartbeat_ms < (int64_t)hb * 500)
        return;
    w->last_heartbeat_ms = now;
    sc_amqp_heartbeat(&w->in);
    sc_amqp_heartbeat(&w->out);
}

static void describe_db_error(char *out, size_t len, const char *what, const struct sc_db_err *e)
{
    snprintf(out, len, "%s failed: error %u (SQLSTATE %s, %s): %s", what, e->code, e->sqlstate,
             sc_db_error_class_name(e->cls), e->msg);
}

/* Undoes one delivery's part: back to its savepoint, or the whole
 * transaction when it is alone. Returns 0, or -1 when the connection is gone. */
static int undo_item(struct worker *w, int savepoints)
{
    struct sc_db_err e = {0};
    if (savepoints)
        return sc_db_query(&w->db, "ROLLBACK TO SAVEPOINT sc_item", &e);
    return sc_db_rollback(&w->db, &e);
}

static void set_error_fields(struct item *it, const struct sc_db_err *e)
{
    it->lf.error_code = e->code;
    snprintf(it->ev_sqlstate, sizeof it->ev_sqlstate, "%s", e->sqlstate);
    it->lf.sqlstate = it->ev_sqlstate;
}

static enum txn finish(struct worker *w, struct item *items, int n, int applied);

/* After the fast path rolled back: what it had applied is open again. */
static void reopen_applied(struct item *items, int n)
{
    for (int i = 0; i < n; i++)
        if (items[i].parsed && items[i].d == D_APPLIED)
            items[i].d = D_OPEN;
}
static enum txn run_fast_batch_handler(struct worker *w, struct item *items, int n);

/* Calls the handler for one delivery inside the open transaction and
 * decides it: D_APPLIED, or D_RETRY / D_DEAD with the reason (the caller
 * undoes its part). Returns TXN_OPEN when the transaction goes on, or how it
 * ended: the connection died (nothing committed), a deadlock rolled it all
 * back, or the handler ended it itself. */
static enum txn call_handler(struct worker *w, struct item *it)
{
    struct consumer *c = w->c;
    struct sc_db_err e = {0};
    char reason[512] = "";
    keep_alive(w);
    int64_t t0 = sc_now_us();
    sc_handler_status st = c->plugin.h->handle(c->plugin.state, w->db.conn, &it->ev.ev, reason,
                                               sizeof reason);
    sc_hist_observe(&c->m.handler_seconds, (double)(sc_now_us() - t0) / 1e6);
    sc_db_last_error(&w->db, &e);
    if (st != SC_HANDLER_OK && e.cls == SC_DBERR_CONNECTION)
        return TXN_LOST;
    if (st != SC_HANDLER_OK && e.cls == SC_DBERR_DEADLOCK)
        return TXN_DEADLOCK;
    if (st == SC_HANDLER_OK && !sc_db_in_transaction(&w->db)) {
        /* Whatever came before in this batch may have been committed by the
         * handler: those are returned, this one is dead-lettered. */
        snprintf(it->why, sizeof it->why,
                 "handler %s ended the transaction (commit, rollback or autocommit): contract "
                 "violation", c->plugin.h->name);
        sc_log(SC_LOG_ERROR, &it->lf, "%s", it->why);
        it->d = D_DEAD;
        sc_db_rollback(&w->db, &e);
        return TXN_BROKEN;
    }
    if (st == SC_HANDLER_OK) {
        it->d = D_APPLIED;
        return TXN_OPEN;
    }
    char dberr[160] = "";
    if (e.code)
        snprintf(dberr, sizeof dberr, " (last database error %u, SQLSTATE %s)", e.code, e.sqlstate);
    snprintf(it->why, sizeof it->why, "%s: %s%s",
             st == SC_HANDLER_RETRY ? "handler asked to retry" : "rejected by handler",
             reason[0] ? reason : "no reason", dberr);
    it->d = st == SC_HANDLER_RETRY ? D_RETRY : D_DEAD;
    return TXN_OPEN;
}

/* After the claims: the handler's handle_batch for all open items at once
 * (one round trip for the sample handler). Events it refuses lose their
 * claim again; if it cannot answer, the batch takes the per-delivery path. */
static enum txn run_fast_batch_handler(struct worker *w, struct item *items, int n)
{
    struct consumer *c = w->c;
    struct sc_db_err e = {0};
    const struct sc_event *evs[SC_BATCH_MAX];
    sc_handler_status st[SC_BATCH_MAX];
    int idx[SC_BATCH_MAX], k = 0;
    for (int i = 0; i < n; i++)
        if (items[i].parsed && items[i].d == D_OPEN) {
            idx[k] = i;
            evs[k++] = &items[i].ev.ev;
        }
    memset(w->reasons, 0, (size_t)k * REASON_LEN);
    int64_t t0 = sc_now_us();
    int rc = c->plugin.handle_batch(c->plugin.state, w->db.conn, evs, (size_t)k, st, w->reasons,
                                    REASON_LEN);
    sc_hist_observe(&c->m.handler_seconds, (double)(sc_now_us() - t0) / 1e6);
    sc_db_last_error(&w->db, &e);
    if (rc != 0) {
        if (e.cls == SC_DBERR_CONNECTION)
            return TXN_LOST;
        if (e.cls == SC_DBERR_DEADLOCK)
            return TXN_DEADLOCK;
        if (sc_db_rollback(&w->db, &e))
            return TXN_LOST;
        return TXN_NOTHING;
    }
    if (!sc_db_in_transaction(&w->db)) {
        /* What it committed (claims, some effects?) cannot be told apart:
         * neither redeliver (a second effect) nor ack (a lost one): every
         * delivery of the batch goes to the DLQ for a person to look at. */
        sc_db_rollback(&w->db, &e);
        for (int j = 0; j < k; j++) {
            struct item *it = &items[idx[j]];
            snprintf(it->why, sizeof it->why,
                     "handler %s ended the transaction in handle_batch: contract violation; the "
                     "batch's claims may be committed without their effects", c->plugin.h->name);
            sc_log(SC_LOG_ERROR, &it->lf, "%s", it->why);
            it->d = D_DEAD;
        }
        return TXN_BROKEN;
    }
    const char *refused[SC_BATCH_MAX];
    int n_refused = 0, applied = 0;
    for (int j = 0; j < k; j++) {
        struct item *it = &items[idx[j]];
        if (st[j] == SC_HANDLER_OK) {
            it->d = D_APPLIED;
            applied++;
            continue;
        }
        const char *reason = w->reasons + (size_t)j * REASON_LEN;
        snprintf(it->why, sizeof it->why, "%s: %.*s",
                 st[j] == SC_HANDLER_RETRY ? "handler asked to retry" : "rejected by handler",
                 REASON_LEN, reason[0] ? reason : "no reason");
        it->d = st[j] == SC_HANDLER_RETRY ? D_RETRY : D_DEAD;
        refused[n_refused++] = it->ev.ev.id;
    }
    if (n_refused && sc_db_delete_consumed_many(&w->db, c->k->name, refused, n_refused, &e)) {
        if (e.cls == SC_DBERR_CONNECTION)
            return TXN_LOST;
        if (sc_db_rollback(&w->db, &e))
            return TXN_LOST;
        reopen_applied(items, n);
        return TXN_NOTHING;
    }
    return finish(w, items, n, applied);
}

/* The event ids of the parsed deliveries still undecided; returns how many. */
static int open_ids(const struct item *items, int n, const char **ids)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        if (items[i].parsed && items[i].d == D_OPEN)
            ids[k++] = items[i].ev.ev.id;
    return k;
}

/* A handler committed inside the fast path: that COMMIT also committed the
 * claims of the deliveries whose handler had not run yet, without their
 * effects. Take those claims back so their redelivery applies them. */
static enum txn release_unhandled_claims(struct worker *w, struct item *items, int n)
{
    struct sc_db_err e = {0};
    const char *ids[SC_BATCH_MAX];
    int k = open_ids(items, n, ids);
    if (k && (sc_db_delete_consumed_many(&w->db, w->c->k->name, ids, k, &e) ||
              sc_db_commit(&w->db, &e))) {
        sc_log(SC_LOG_ERROR, &items[0].lf, "could not take back %d claims after a handler's "
               "COMMIT: error %u: %s; those deliveries are dead-lettered", k, e.code, e.msg);
        for (int i = 0; i < n; i++)
            if (items[i].parsed && items[i].d == D_OPEN) {
                snprintf(items[i].why, sizeof items[i].why, "claim committed by another "
                         "delivery's handler and could not be taken back: error %u", e.code);
                items[i].d = D_DEAD;
            }
    }
    return TXN_BROKEN;
}

/* The fast path for a batch: all claims in one multi-row INSERT, then the
 * handlers, then COMMIT: n + 2 round trips instead of 3n + 1. Returns
 * TXN_NOTHING when the batch must take the per-delivery path instead: the
 * claim failed (a duplicate among them, or any other error: nothing was
 * inserted), or a handler said RETRY or REJECT (that one is decided, the
 * transaction rolled back, the others reopened). */
static enum txn run_fast(struct worker *w, struct item *items, int n)
{
    struct consumer *c = w->c;
    struct sc_db_err e = {0};
    const char *ids[SC_BATCH_MAX];
    int k = open_ids(items, n, ids);
    if (sc_db_insert_consumed_many(&w->db, c->k->name, ids, k, &e)) {
        if (e.cls == SC_DBERR_DEADLOCK)
            return TXN_DEADLOCK;
        if (e.cls == SC_DBERR_CONNECTION)
            return TXN_LOST;
        return TXN_NOTHING; /* the statement undid itself; per delivery now */
    }
    SC_FAULT("consumer.after_insert");
    if (c->plugin.handle_batch)
        return run_fast_batch_handler(w, items, n);
    int applied = 0;
    for (int i = 0; i < n; i++) {
        struct item *it = &items[i];
        if (!it->parsed || it->d != D_OPEN)
            continue;
        enum txn t = call_handler(w, it);
        if (t == TXN_BROKEN)
            return release_unhandled_claims(w, items, n);
        if (t != TXN_OPEN)
            return t;
        if (it->d == D_APPLIED) {
            applied++;
            continue;
        }
        /* Undo the whole batch; the others run again on the per-delivery
         * path, this one is not called again. */
        if (sc_db_rollback(&w->db, &e))
            return TXN_LOST;
        reopen_applied(items, n);
        return TXN_NOTHING;
    }
    return finish(w, items, n, applied);
}

/* Runs the claim and the handler of every open parsed item in one
 * transaction, each under its own savepoint when there are several. */
static enum txn run_transaction(struct worker *w, struct item *items, int n)
{
    struct consumer *c = w->c;
    int open = 0;
    for (int i = 0; i < n; i++)
        open += items[i].parsed && items[i].d == D_OPEN;
    int savepoints = open > 1, applied = 0;
    struct sc_db_err e = {0};

    w->last_db_use_ms = sc_now_ms();
    if (open > 1) {
        enum txn fast = run_fast(w, items, n);
        if (fast != TXN_NOTHING)
            return fast;
        /* Fall through: the per-delivery path decides each one. */
    }
    for (int i = 0; i < n; i++) {
        struct item *it = &items[i];
        if (!it->parsed || it->d != D_OPEN)
            continue;
        keep_alive(w);
        if (savepoints && sc_db_query(&w->db, "SAVEPOINT sc_item", &e))
            return e.cls == SC_DBERR_DEADLOCK ? TXN_DEADLOCK : TXN_LOST;
        if (sc_db_insert_consumed(&w->db, c->k->name, it->ev.ev.id, &e)) {
            set_error_fields(it, &e);
            if (e.cls == SC_DBERR_DUPLICATE) {
                it->d = D_DUPLICATE; /* the failed statement undid itself */
                continue;
            }
            if (e.cls == SC_DBERR_DEADLOCK)
                return TXN_DEADLOCK;
            if (e.cls == SC_DBERR_CONNECTION)
                return TXN_LOST;
            /* Any other error, 1062 on another key included, is a failure. */
            describe_db_error(it->why, sizeof it->why, "claim (INSERT consumed_event)", &e);
            sc_log(SC_LOG_WARN, &it->lf, "%s", it->why);
            it->d = D_RETRY;
            if (undo_item(w, savepoints))
                return TXN_LOST;
            continue;
        }
        SC_FAULT("consumer.after_insert");

        enum txn t = call_handler(w, it);
        if (t != TXN_OPEN)
            return t;
        if (it->d == D_APPLIED) {
            applied++;
            continue;
        }
        if (undo_item(w, savepoints))
            return TXN_LOST;
    }
    return finish(w, items, n, applied);
}

/* Proves, before COMMIT, that the applied deliveries' claims are still in
 * the transaction. A handler that swallows an error which rolled the
 * transaction back (deadlock 1213; 1205 under innodb_rollback_on_timeout)
 * and returns OK leaves nothing of it: the client cannot see that (an ERR
 * packet carries no status, and with autocommit off the next statement
 * opens a new transaction), so COMMIT would succeed on nothing and the ack
 * would lose the messages. One COUNT of the claim rows on the same
 * connection tells. Returns TXN_OPEN when all are there, TXN_VANISHED
 * (rolled back now) when any is missing, TXN_LOST when the connection died. */
static enum txn verify_claims(struct worker *w, struct item *items, int n, int applied)
{
    const char *ids[SC_BATCH_MAX];
    int k = 0;
    for (int i = 0; i < n; i++)
        if (items[i].d == D_APPLIED)
            ids[k++] = items[i].ev.ev.id;
    struct sc_db_err e = {0};
    long found = -1;
    if (k == 0)
        return TXN_OPEN;
    if (sc_db_count_consumed_many(&w->db, w->c->k->name, ids, k, &found, &e) == 0) {
        if (found == k)
            return TXN_OPEN;
        sc_log(SC_LOG_ERROR, &items[0].lf,
               "%d of %d claims are gone before COMMIT: handler %s ignored an error that rolled "
               "the transaction back; rolling back and retrying", k - (int)found, applied,
               w->c->plugin.h->name);
    } else if (e.cls == SC_DBERR_CONNECTION) {
        return TXN_LOST;
    } else {
        /* No proof either way: roll back, the ladder retries. */
        sc_log(SC_LOG_WARN, &items[0].lf, "could not verify the claims before COMMIT: error %u: "
               "%s; rolling back and retrying", e.code, e.msg);
    }
    if (sc_db_rollback(&w->db, &e))
        return TXN_LOST;
    for (int i = 0; i < n; i++)
        if (items[i].d == D_APPLIED)
            snprintf(items[i].why, sizeof items[i].why,
                     "claim vanished before COMMIT (the handler ignored an error that rolled the "
                     "transaction back)");
    return TXN_VANISHED;
}

/* Ends the batch's transaction: COMMIT when something was applied, else a
 * ROLLBACK that releases the duplicates' locks. */
static enum txn finish(struct worker *w, struct item *items, int n, int applied)
{
    struct sc_db_err e = {0};
    if (!applied) {
        if (sc_db_rollback(&w->db, &e))
            return TXN_LOST;
        return TXN_EMPTY;
    }
    enum txn v = verify_claims(w, items, n, applied);
    if (v != TXN_OPEN)
        return v;
    SC_FAULT("consumer.before_commit");
    keep_alive(w);
    int64_t t0 = sc_now_us();
    int failed = sc_db_commit(&w->db, &e);
    sc_hist_observe(&w->c->m.commit_seconds, (double)(sc_now_us() - t0) / 1e6);
    if (failed) {
        for (int i = 0; i < n; i++) {
            if (items[i].d != D_APPLIED)
                continue;
            set_error_fields(&items[i], &e);
            snprintf(items[i].why, sizeof items[i].why, "%s", e.msg);
        }
        return TXN_UNKNOWN;
    }
    SC_FAULT("consumer.after_commit");
    return TXN_COMMITTED;
}

/* Publishes a copy of the delivery to the dead-letter queue with the reason
 * headers. Returns 0 once the broker confirmed it. */
static int publish_dead(struct worker *w, struct item *it)
{
    const struct sc_consumer_config *k = w->c->k;
    struct headers h;
    char failed_at[64];
    if (headers_from(&h, delivery_headers(&it->env)))
        return -1;
    sc_log_timestamp(failed_at, sizeof failed_at);
    headers_str(&h, H_REASON, amqp_cstring_bytes(it->why));
    headers_str(&h, H_CONSUMER, amqp_cstring_bytes(k->name));
    headers_int(&h, H_ATTEMPTS, it->attempt);
    headers_str(&h, H_FAILED_AT, amqp_cstring_bytes(failed_at));
    headers_original_route(&h, &it->env);
    int rc = republish(w, &it->env, k->dead_letter_queue, &h, &it->lf);
    free(h.e);
    return rc;
}

/* Publishes a copy to the delay queue of its attempt, or to the DLQ once
 * attempts are exhausted (then it->d becomes D_DEAD). */
static int publish_retry(struct worker *w, struct item *it)
{
    const struct sc_consumer_config *k = w->c->k;
    if (it->attempt >= k->max_attempts) {
        char prefix[64];
        int plen = snprintf(prefix, sizeof prefix, "attempts exhausted (%d of %d): ", it->attempt,
                            k->max_attempts);
        size_t keep = sizeof it->why - (size_t)plen - 1;
        memmove(it->why + plen, it->why, keep);
        it->why[sizeof it->why - 1] = 0;
        memcpy(it->why, prefix, (size_t)plen);
        it->d = D_DEAD;
        return publish_dead(w, it);
    }
    size_t step = (size_t)(it->attempt - 1) < k->n_retry_delays ? (size_t)(it->attempt - 1)
                                                                 : k->n_retry_delays - 1;
    char queue[300];
    sc_amqp_retry_queue_name(k, k->retry_delays_ms[step], queue, sizeof queue);
    struct headers h;
    if (headers_from(&h, delivery_headers(&it->env)))
        return -1;
    headers_int(&h, H_ATTEMPTS, it->attempt + 1);
    headers_str(&h, H_LAST_ERROR, amqp_cstring_bytes(it->why));
    headers_original_route(&h, &it->env);
    int rc = republish(w, &it->env, queue, &h, &it->lf);
    free(h.e);
    if (rc == 0)
        snprintf(it->why + strlen(it->why), sizeof it->why - strlen(it->why),
                 " (retry in %d ms)", k->retry_delays_ms[step]);
    return rc;
}

static void log_outcome(struct worker *w, struct item *it, int64_t committed_us)
{
    atomic_ullong *out = w->c->m.outcomes;
    switch (it->d) {
    case D_APPLIED:
        atomic_fetch_add(&out[SC_OUT_APPLIED], 1);
        sc_hist_observe(&w->c->m.receive_to_commit, (double)(committed_us - it->received_us) / 1e6);
        it->lf.outcome = "applied";
        it->lf.duration_us = (uint64_t)(committed_us - it->received_us);
        sc_log(SC_LOG_INFO, &it->lf, "applied");
        break;
    case D_DUPLICATE:
        atomic_fetch_add(&out[SC_OUT_DUPLICATE], 1);
        it->lf.outcome = "duplicate";
        sc_log(SC_LOG_INFO, &it->lf, "already consumed (1062 on %s): acked without effect",
               SC_CONSUMED_EVENT_CONSTRAINT);
        break;
    case D_RETRY:
        atomic_fetch_add(&out[SC_OUT_RETRIED], 1);
        it->lf.outcome = "retried";
        sc_log(SC_LOG_WARN, &it->lf, "will retry (attempt %d of %d): %s", it->attempt + 1,
               w->c->k->max_attempts, it->why);
        break;
    case D_DEAD:
        atomic_fetch_add(&out[SC_OUT_DEAD_LETTERED], 1);
        it->lf.outcome = "dead_lettered";
        sc_log(SC_LOG_WARN, &it->lf, "dead-lettered to %s: %s", w->c->k->dead_letter_queue,
               it->why);
        break;
    default:
        break;
    }
}

/* After the transaction: republish what goes to a delay queue or the DLQ,
 * then ack. With every delivery of the batch settled one basic.ack with
 * `multiple` covers them all (earlier batches are all settled already). */
static enum next settle(struct worker *w, struct item *items, int n, int64_t committed_us)
{
    int all_settled = 1, requeue = 0;
    for (int i = 0; i < n; i++) {
        struct item *it = &items[i];
        if (it->d == D_REQUEUE) {
            requeue = 1;
            continue;
        }
        it->republished = 0;
        if (!all_settled || (it->d != D_RETRY && it->d != D_DEAD))
            continue;
        keep_alive(w);
        if ((it->d == D_RETRY ? publish_retry(w, it) : publish_dead(w, it)) != 0)
            all_settled = 0; /* this one and the rest stay unacked */
        else
            it->republished = 1;
    }
    uint64_t last = items[n - 1].env.delivery_tag;
    if (all_settled && !requeue) {
        if (sc_amqp_ack(&w->in, last, n > 1)) {
            sc_log(SC_LOG_WARN, &items[n - 1].lf, "ack could not be sent; the broker will redeliver");
            return NEXT_RESET;
        }
        for (int i = 0; i < n; i++)
            log_outcome(w, &items[i], committed_us);
        return NEXT_CONTINUE;
    }
    /* Mixed batch: ack one by one what is settled, return the rest. */
    int failed = 0;
    for (int i = 0; i < n; i++) {
        struct item *it = &items[i];
        int settled = it->d == D_APPLIED || it->d == D_DUPLICATE || it->republished;
        if (settled) {
            failed |= sc_amqp_ack(&w->in, it->env.delivery_tag, 0) != 0;
            log_outcome(w, it, committed_us);
        } else if (it->d == D_REQUEUE) {
            failed |= sc_amqp_nack_requeue(&w->in, it->env.delivery_tag, 0) != 0;
        }
    }
    return failed || !all_settled ? NEXT_RESET : NEXT_CONTINUE;
}

/* Before a retry of the batch: everything the failed transaction decided
 * is open again, but not what was decided before it ran. */
static void reopen(struct item *items, int n)
{
    for (int i = 0; i < n; i++)
        if (items[i].parsed && !items[i].decided_early)
            items[i].d = D_OPEN;
}

/* A fresh database session with the sidecar's settings (autocommit off,
 * UTC, bounded lock waits) and its statements prepared again. Returns 0, or
 * -1 when it could not be made (the caller resets everything). */
static int reset_db_session(struct worker *w)
{
    struct sc_db_err e = {0};
    struct sc_log_fields lf = {.consumer = w->c->k->name};
    sc_db_close(&w->db);
    if (sc_db_connect(&w->db, w->c->cfg, &e) || sc_db_prepare_consumer(&w->db, &e)) {
        gauge(&w->c->m.db_connected, &w->up_db, 0);
        sc_log(SC_LOG_WARN, &lf, "database session reset failed: %s", e.msg);
        return -1;
    }
    sc_log(SC_LOG_WARN, &lf, "database session reset after a handler contract violation "
           "(database thread %lu)", w->db.thread_id);
    return 0;
}

/* Parses, runs the transaction (retrying a deadlocked batch once, then one
 * delivery per transaction), and settles every delivery of the batch. */
static enum next process_batch(struct worker *w, struct item *items, int n)
{
    const struct sc_consumer_config *k = w->c->k;
    int parsed = 0;
    for (int i = 0; i < n; i++) {
        struct item *it = &items[i];
        const amqp_basic_properties_t *p = &it->env.message.properties;
        const amqp_table_t *h = delivery_headers(&it->env);
        memset(&it->lf, 0, sizeof it->lf);
        it->lf.consumer = k->name;
        it->lf.delivery_tag = it->env.delivery_tag;
        int64_t attempt = sc_amqp_header_int(h, H_ATTEMPTS, 1);
        int64_t delivery_count = sc_amqp_header_int(h, "x-delivery-count", -1); /* quorum */
        /* Anyone can write the header: clamp before any arithmetic. */
        if (delivery_count > SC_MAX_ATTEMPTS_SEEN)
            delivery_count = SC_MAX_ATTEMPTS_SEEN;
        if (delivery_count >= 0 && delivery_count + 1 > attempt)
            attempt = delivery_count + 1;
        if (attempt < 1 || attempt > SC_MAX_ATTEMPTS_SEEN)
            attempt = 1;
        it->attempt = (int)attempt;
        it->lf.attempt = it->attempt;
        it->d = D_OPEN;
        it->decided_early = 0;
        char reason[512];
        const char *mid = (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG) ? p->message_id.bytes : NULL;
        size_t mid_len = mid ? p->message_id.len : 0;
        if (sc_event_parse(it->env.message.body.bytes, it->env.message.body.len, mid, mid_len,
                           &it->ev, reason, sizeof reason)) {
            it->parsed = 0;
            it->d = D_DEAD;
            if (it->ev.log_id[0])
                it->lf.event_id = it->ev.log_id; /* readable even when malformed */
            snprintf(it->why, sizeof it->why, "malformed: %s", reason);
            atomic_fetch_add(&w->c->m.outcomes[SC_OUT_MALFORMED], 1);
            it->lf.outcome = "malformed";
            sc_log(SC_LOG_WARN, &it->lf, "%s", it->why);
            it->lf.outcome = NULL;
            continue;
        }
        it->parsed = 1;
        it->lf.event_id = it->ev.ev.id;
        if (delivery_count >= k->max_attempts) {
            /* A quorum queue counted more deliveries than attempts allowed:
             * the earlier ones never finished (a crash mid-message, most
             * likely): dead-letter it before it can take the process down
             * again. */
            snprintf(it->why, sizeof it->why,
                     "delivered %lld%s times (x-delivery-count), more than max_attempts %d "
                     "without an outcome: dead-lettered without running the handler",
                     (long long)delivery_count + 1,
                     delivery_count == SC_MAX_ATTEMPTS_SEEN ? " or more" : "", k->max_attempts);
            it->d = D_DEAD;
            it->decided_early = 1;
            continue;
        }
        parsed++;
        if (sc_log_enabled(SC_LOG_DEBUG)) {
            it->lf.redelivered = it->env.redelivered;
            sc_log(SC_LOG_DEBUG, &it->lf, "received");
            it->lf.redelivered = 0;
        }
    }

    sc_hist_observe(&w->c->m.batch_size, n);
    enum txn t = parsed ? run_transaction(w, items, n) : TXN_EMPTY;
    if (t == TXN_DEADLOCK || t == TXN_VANISHED) {
        sc_log(SC_LOG_WARN, &items[0].lf, "%s: retrying the batch of %d",
               t == TXN_DEADLOCK ? "deadlock" : "transaction rolled back under the handler", n);
        reopen(items, n);
        t = run_transaction(w, items, n);
    }
    if (t == TXN_DEADLOCK || t == TXN_VANISHED) {
        sc_log(SC_LOG_WARN, &items[0].lf, "%s again: one delivery per transaction",
               t == TXN_DEADLOCK ? "deadlock" : "transaction rolled back under the handler");
        reopen(items, n);
        t = TXN_EMPTY;
        for (int i = 0; i < n && t != TXN_LOST && t != TXN_UNKNOWN; i++) {
            if (!items[i].parsed || items[i].d != D_OPEN)
                continue;
            enum txn one = run_transaction(w, &items[i], 1);
            if (one == TXN_DEADLOCK || one == TXN_VANISHED) {
                if (one == TXN_DEADLOCK)
                    snprintf(items[i].why, sizeof items[i].why,
                             "deadlock (1213) in its own transaction");
                items[i].d = D_RETRY;
            } else if (one == TXN_LOST || one == TXN_UNKNOWN || one == TXN_BROKEN) {
                t = one == TXN_BROKEN ? TXN_EMPTY : one;
                if (one == TXN_UNKNOWN) {
                    items[i].d = D_REQUEUE;
                    for (int j = i + 1; j < n; j++)
                        items[j].d = D_REQUEUE;
                }
            } else if (one == TXN_COMMITTED) {
                t = TXN_COMMITTED;
            }
        }
    }
    int64_t committed_us = sc_now_us();
    if (sc_log_enabled(SC_LOG_DEBUG)) {
        int counts[D_REQUEUE + 1] = {0};
        for (int i = 0; i < n; i++)
            counts[items[i].d]++;
        sc_log(SC_LOG_DEBUG, &(struct sc_log_fields){.consumer = k->name},
               "batch of %d: transaction %s, applied=%d duplicate=%d retry=%d dead=%d requeue=%d",
               n, txn_name(t), counts[D_APPLIED], counts[D_DUPLICATE], counts[D_RETRY], counts[D_DEAD],
               counts[D_REQUEUE]);
    }
    switch (t) {
    case TXN_LOST:
        /* Nothing committed; dropping the session returns every unacked
         * delivery to the queue. */
        sc_log(SC_LOG_WARN, &items[0].lf, "database connection lost during a batch of %d: "
               "reconnecting, the broker redelivers", n);
        return NEXT_RESET;
    case TXN_UNKNOWN:
        for (int i = 0; i < n; i++) {
            if (items[i].d != D_APPLIED && items[i].d != D_REQUEUE)
                continue;
            atomic_fetch_add(&w->c->m.outcomes[SC_OUT_UNKNOWN], 1);
            items[i].lf.outcome = "unknown";
            sc_log(SC_LOG_ERROR, &items[i].lf, "COMMIT failed, outcome unknown: not acked, "
                   "returned for redelivery: %s", items[i].why);
        }
        /* Never ack: return the whole batch; the redelivery meets the
         * unique key and settles it. */
        sc_amqp_nack_requeue(&w->in, items[n - 1].env.delivery_tag, n > 1);
        return NEXT_RESET;
    case TXN_BROKEN: {
        for (int i = 0; i < n; i++)
            if (items[i].parsed && items[i].d != D_DEAD)
                items[i].d = D_REQUEUE;
        enum next after = settle(w, items, n, committed_us);
        /* The handler may have left the session changed (autocommit on: every
         * later claim would commit on its own, and a retried copy would meet
         * its own claim as a "duplicate"): never reuse it. */
        return reset_db_session(w) ? NEXT_RESET : after;
    }
    default:
        return settle(w, items, n, committed_us);
    }
}

/* ---- sessions and workers ------------------------------------------------ */

/* Moves this worker's contribution to a connection gauge. */
static void gauge(atomic_int *g, int *mine, int up)
{
    if (*mine != up)
        atomic_fetch_add(g, up ? 1 : -1);
    *mine = up;
}

static void session_close(struct worker *w)
{
    sc_amqp_close(&w->in);
    sc_amqp_close(&w->out);
    sc_db_close(&w->db);
    gauge(&w->c->m.db_connected, &w->up_db, 0);
    gauge(&w->c->m.amqp_connected, &w->up_amqp, 0);
    gauge(&w->c->m.consuming, &w->up_consuming, 0);
}

static int session_open(struct worker *w)
{
    const struct sc_config *cfg = w->c->cfg;
    const struct sc_consumer_config *k = w->c->k;
    struct sc_log_fields lf = {.consumer = k->name};
    struct sc_db_err e = {0};
    char err[512], name[300];

    if (sc_db_connect(&w->db, cfg, &e) || sc_db_prepare_consumer(&w->db, &e)) {
        lf.error_code = e.code;
        sc_log(SC_LOG_WARN, &lf, "database connect failed: %s", e.msg);
        return -1;
    }
    gauge(&w->c->m.db_connected, &w->up_db, 1);
    snprintf(name, sizeof name, "sidecar consume %s worker %d", k->name, w->index);
    if (sc_amqp_connect(&w->in, cfg, name, err, sizeof err) ||
        sc_amqp_declare_consumer(&w->in, k, err, sizeof err)) {
        sc_log(SC_LOG_WARN, &lf, "broker: %s", err);
        return -1;
    }
    snprintf(name, sizeof name, "sidecar publish %s worker %d", k->name, w->index);
    if (sc_amqp_connect(&w->out, cfg, name, err, sizeof err) ||
        sc_amqp_confirm_select(&w->out, err, sizeof err)) {
        sc_log(SC_LOG_WARN, &lf, "broker (publisher): %s", err);
        return -1;
    }
    snprintf(name, sizeof name, "sidecar-%s-%d", k->name, w->index);
    gauge(&w->c->m.amqp_connected, &w->up_amqp, 1);
    if (sc_amqp_start_consume(&w->in, k->queue, k->prefetch, name, err, sizeof err)) {
        sc_log(SC_LOG_WARN, &lf, "broker: %s", err);
        return -1;
    }
    gauge(&w->c->m.consuming, &w->up_consuming, 1);
    w->last_db_use_ms = sc_now_ms();
    sc_log(SC_LOG_INFO, &lf, "worker %d consuming from %s (prefetch %d, database thread %lu)",
           w->index, k->queue, k->prefetch, w->db.thread_id);
    return 0;
}

/* Consumes until a connection fails or a stop is requested. A batch takes
 * what is already waiting, up to batch_max, and closes as soon as nothing
 * more is: under low load every delivery is its own batch, without delay.
 * Returns the number of deliveries handled. */
static long consume_loop(struct worker *w, struct item *items)
{
    const struct sc_consumer_config *k = w->c->k;
    struct sc_log_fields lf = {.consumer = k->name};
    long handled = 0;
    int64_t last_service_ms = sc_now_ms();
    char err[512];
    while (!sc_stop_requested()) {
        err[0] = 0;
        /* The publishing connection is idle between dead-letters and
         * retries: service its heartbeats even while deliveries stream. */
        if (sc_now_ms() - last_service_ms > PUBLISHER_SERVICE_MS) {
            last_service_ms = sc_now_ms();
            if (sc_amqp_service(&w->out)) {
                sc_log(SC_LOG_WARN, &lf, "publisher connection lost");
                break;
            }
        }
        enum sc_amqp_recv r = sc_amqp_receive(&w->in, &items[0].env, RECEIVE_POLL_MS, err, sizeof err);
        if (r == SC_AMQP_RECV_CLOSED) {
            sc_log(SC_LOG_WARN, &lf, "broker connection lost: %s", err);
            break;
        }
        if (r == SC_AMQP_RECV_TIMEOUT) {
            if (sc_now_ms() - w->last_db_use_ms > DB_IDLE_PING_MS) {
                w->last_db_use_ms = sc_now_ms();
                if (mysql_ping(w->db.conn)) {
                    sc_log(SC_LOG_WARN, &lf, "database connection lost while idle: %s",
                           mysql_error(w->db.conn));
                    break;
                }
            }
            continue;
        }
        items[0].received_us = sc_now_us();
        int n = 1, closed = 0;
        while (n < k->batch_max) {
            r = sc_amqp_receive(&w->in, &items[n].env, 0, err, sizeof err);
            if (r == SC_AMQP_RECV_TIMEOUT)
                break;
            if (r == SC_AMQP_RECV_CLOSED) {
                closed = 1;
                break;
            }
            items[n++].received_us = sc_now_us();
        }
        enum next next = NEXT_RESET;
        if (closed)
            sc_log(SC_LOG_WARN, &lf, "broker connection lost: %s", err); /* all requeued */
        else
            next = process_batch(w, items, n);
        for (int i = 0; i < n; i++) {
            if (items[i].parsed)
                sc_event_free(&items[i].ev);
            items[i].parsed = 0;
            amqp_destroy_envelope(&items[i].env);
        }
        handled += n;
        if (next == NEXT_RESET)
            break;
    }
    return handled;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    int backoff = BACKOFF_MIN_MS;
    mysql_thread_init();
    while (!sc_stop_requested()) {
        long handled = 0;
        if (session_open(w) == 0)
            handled = consume_loop(w, w->items);
        /* Closing the channel returns every unacked delivery to the queue. */
        session_close(w);
        /* Hand the connections' buffers back to the system: a daemon that
         * reconnects now and then should not keep its peak heap forever.
         * (Not under ASan: its allocator replaces glibc's, whose arenas
         * malloc_trim would then corrupt at thread exit.) */
#ifndef SC_NO_MALLOC_TRIM
        malloc_trim(0);
#endif
        if (sc_stop_requested())
            break;
        if (handled > 0)
            backoff = BACKOFF_MIN_MS;
        int jitter = rand() % (backoff / 4 + 1);
        sc_sleep_ms(backoff + jitter);
        backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
    }
    mysql_thread_end();
    return NULL;
}

static int load_handlers(struct consumer *cs, const struct sc_config *cfg)
{
    for (size_t i = 0; i < cfg->n_consumers; i++) {
        char err[1024];
        cs[i].cfg = cfg;
        cs[i].k = &cfg->consumers[i];
        sc_consumer_metrics_init(&cs[i].m, cs[i].k->name, cs[i].k->workers);
        if (sc_plugin_load(&cs[i].plugin, cs[i].k->handler, cs[i].k->handler_config, err,
                           sizeof err)) {
            struct sc_log_fields lf = {.consumer = cs[i].k->name};
            sc_log(SC_LOG_ERROR, &lf, "consumers[%zu].handler: %s", i, err);
            fprintf(stderr, "sidecar: consumers[%zu].handler: %s\n", i, err);
            for (size_t j = 0; j < i; j++)
                sc_plugin_unload(&cs[j].plugin);
            return -1;
        }
    }
    return 0;
}

int sc_consume_run(const struct sc_config *cfg)
{
    if (cfg->n_consumers == 0) {
        fprintf(stderr, "sidecar: consumers: at least one consumer is required to consume\n");
        return 2;
    }
    struct consumer *cs = calloc(cfg->n_consumers, sizeof *cs);
    if (!cs)
        return 1;
    if (load_handlers(cs, cfg)) {
        free(cs);
        return 2;
    }
    size_t n_workers = 0;
    for (size_t i = 0; i < cfg->n_consumers; i++) {
        n_workers += (size_t)cfg->consumers[i].workers;
        sc_metrics_register_consumer(&cs[i].m);
    }
    struct worker *ws = calloc(n_workers, sizeof *ws);
    struct sc_http *http = NULL;
    char err[512];
    if (ws && strcmp(cfg->http_listen, "off") != 0 &&
        !(http = sc_http_start(cfg->http_listen, err, sizeof err))) {
        fprintf(stderr, "sidecar: %s\n", err);
        sc_error("%s", err);
        free(ws);
        ws = NULL;
    }
    if (!ws) {
        for (size_t i = 0; i < cfg->n_consumers; i++)
            sc_plugin_unload(&cs[i].plugin);
        free(cs);
        return 1;
    }
    size_t started = 0;
    for (size_t i = 0; i < cfg->n_consumers; i++) {
        for (int j = 0; j < cfg->consumers[i].workers; j++) {
            struct worker *w = &ws[started];
            w->c = &cs[i];
            w->index = j;
            w->items = calloc((size_t)cfg->consumers[i].batch_max, sizeof *w->items);
            w->reasons = malloc((size_t)cfg->consumers[i].batch_max * REASON_LEN);
            if (!w->items || !w->reasons) {
                sc_error("out of memory");
                sc_request_stop();
                break;
            }
            if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
                sc_error("cannot start a worker thread");
                sc_request_stop();
                break;
            }
            started++;
        }
    }
    for (size_t i = 0; i < started; i++)
        pthread_join(ws[i].thread, NULL);
    sc_http_stop(http); /* before the metrics it reads go away */
    for (size_t i = 0; i < cfg->n_consumers; i++) {
        atomic_ullong *o = cs[i].m.outcomes;
        struct sc_log_fields lf = {.consumer = cs[i].k->name};
        sc_log(SC_LOG_INFO, &lf,
               "stopped: applied=%llu duplicate=%llu retried=%llu dead_lettered=%llu unknown=%llu "
               "malformed=%llu",
               atomic_load(&o[SC_OUT_APPLIED]), atomic_load(&o[SC_OUT_DUPLICATE]),
               atomic_load(&o[SC_OUT_RETRIED]), atomic_load(&o[SC_OUT_DEAD_LETTERED]),
               atomic_load(&o[SC_OUT_UNKNOWN]), atomic_load(&o[SC_OUT_MALFORMED]));
        sc_plugin_unload(&cs[i].plugin);
    }
    for (size_t i = 0; i < n_workers; i++) {
        free(ws[i].items);
        free(ws[i].reasons);
    }
    free(ws);
    free(cs);
    return started == n_workers ? 0 : 1;
}
