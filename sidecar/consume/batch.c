/* One batch's transaction: parse every delivery, claim and run the handler
 * (fast path: one multi-row claim and handle_batch; else one savepoint per
 * delivery), prove the claims before COMMIT, retry a deadlocked batch once
 * and then one delivery per transaction, and settle each delivery: ack,
 * retry through a delay queue, dead-letter, or return it. */
#include <mysql.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "lifecycle.h"
#include "republish.h"
#include "worker.h"

/* Attempt counts read from headers are clamped here (a header is input). */
#define SC_MAX_ATTEMPTS_SEEN 1000000

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
    sc_worker_keep_alive(w);
    int64_t t0 = sc_now_us();
    sc_handler_status st = sc_plugin_handle(&c->plugin, w->db.conn, &it->ev.ev, reason,
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
    const struct sc_event *evs[SC_BATCH_LIMIT];
    sc_handler_status st[SC_BATCH_LIMIT];
    int idx[SC_BATCH_LIMIT], k = 0;
    for (int i = 0; i < n; i++)
        if (items[i].parsed && items[i].d == D_OPEN) {
            idx[k] = i;
            evs[k++] = &items[i].ev.ev;
        }
    int64_t t0 = sc_now_us();
    int rc = sc_plugin_handle_batch(&c->plugin, w->db.conn, evs, (size_t)k, st, w->reasons,
                                    SC_REASON_LEN);
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
    const char *refused[SC_BATCH_LIMIT];
    int n_refused = 0, applied = 0;
    for (int j = 0; j < k; j++) {
        struct item *it = &items[idx[j]];
        if (st[j] == SC_HANDLER_OK) {
            it->d = D_APPLIED;
            applied++;
            continue;
        }
        const char *reason = w->reasons + (size_t)j * SC_REASON_LEN;
        snprintf(it->why, sizeof it->why, "%s: %.*s",
                 st[j] == SC_HANDLER_RETRY ? "handler asked to retry" : "rejected by handler",
                 SC_REASON_LEN, reason[0] ? reason : "no reason");
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
    const char *ids[SC_BATCH_LIMIT];
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
    const char *ids[SC_BATCH_LIMIT];
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
        sc_worker_keep_alive(w);
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
            /* Logged here, where the error is known: the outcome line comes
             * later and not on every path (a lost connection or an unknown
             * COMMIT later in the batch requeues without one). */
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
    const char *ids[SC_BATCH_LIMIT];
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
    sc_worker_keep_alive(w);
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
        return sc_republish_dead(&w->out, k, &it->env, it->attempt, it->why, &it->lf);
    }
    size_t step = (size_t)(it->attempt - 1) < k->n_retry_delays ? (size_t)(it->attempt - 1)
                                                                 : k->n_retry_delays - 1;
    int rc = sc_republish_retry(&w->out, k, &it->env, it->attempt, k->retry_delays_ms[step],
                                it->why, &it->lf);
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
        sc_worker_keep_alive(w);
        if ((it->d == D_RETRY ? publish_retry(w, it) : sc_republish_dead(&w->out, w->c->k, &it->env, it->attempt, it->why, &it->lf)) != 0)
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

/* A delivery over the x-delivery-count limit had no outcome as far as the
 * broker knows, but an earlier COMMIT may have applied it all the same (the
 * process died after COMMIT, or a COMMIT's outcome was unknown and its
 * redeliveries were returned again by resets). Its claim tells, by the one
 * test of a duplicate: 1062 on the constraint means already consumed (acked
 * without effect); a claim that goes in means it never had an outcome, and
 * it is dead-lettered without running the handler. The probe is always
 * rolled back. Returns TXN_LOST when the connection died, else TXN_EMPTY. */
static enum txn probe_over_limit(struct worker *w, struct item *items, int n)
{
    for (int i = 0; i < n; i++) {
        struct item *it = &items[i];
        if (!it->decided_early || !it->parsed)
            continue;
        struct sc_db_err e = {0}, r = {0};
        sc_worker_keep_alive(w);
        int failed = sc_db_insert_consumed(&w->db, w->c->k->name, it->ev.ev.id, &e);
        if (sc_db_rollback(&w->db, &r) || (failed && e.cls == SC_DBERR_CONNECTION))
            return TXN_LOST;
        if (!failed)
            continue;
        set_error_fields(it, &e);
        if (e.cls == SC_DBERR_DUPLICATE) {
            it->d = D_DUPLICATE;
            continue;
        }
        /* No proof either way: the DLQ keeps it, and says why. */
        size_t len = strlen(it->why);
        describe_db_error(it->why + len, sizeof it->why - len, "; checking its claim", &e);
    }
    return TXN_EMPTY;
}

/* The batch back to the queue, nothing of it acked (earlier batches are all
 * settled, so `multiple` covers just this one), and a new database session
 * next. Closes everything when even the nack cannot be sent. */
static enum next return_batch(struct worker *w, struct item *items, int n)
{
    if (sc_amqp_nack_requeue(&w->in, items[n - 1].env.delivery_tag, n > 1))
        return NEXT_RESET;
    return NEXT_DB_LOST;
}

/* Parses, runs the transaction (retrying a deadlocked batch once, then one
 * delivery per transaction), and settles every delivery of the batch. */
enum next sc_batch_process(struct worker *w, struct item *items, int n)
{
    const struct sc_consumer_config *k = w->c->k;
    int parsed = 0, over_limit = 0;
    for (int i = 0; i < n; i++) {
        struct item *it = &items[i];
        const amqp_basic_properties_t *p = &it->env.message.properties;
        const amqp_table_t *h = sc_delivery_headers(&it->env);
        memset(&it->lf, 0, sizeof it->lf);
        it->lf.consumer = k->name;
        it->lf.delivery_tag = it->env.delivery_tag;
        int64_t attempt = sc_amqp_header_int(h, SC_H_ATTEMPTS, 1);
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
            over_limit++;
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
    enum txn t = over_limit ? probe_over_limit(w, items, n) : TXN_EMPTY;
    if (t != TXN_LOST && parsed)
        t = run_transaction(w, items, n);
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
        /* Nothing committed. */
        sc_log(SC_LOG_WARN, &items[0].lf, "database connection lost during a batch of %d: "
               "returned to the queue, reconnecting", n);
        return return_batch(w, items, n);
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
         * unique key and settles it. What failed the COMMIT may have left
         * the session unusable: a new one. */
        return return_batch(w, items, n);
    case TXN_BROKEN: {
        for (int i = 0; i < n; i++)
            if (items[i].parsed && items[i].d != D_DEAD)
                items[i].d = D_REQUEUE;
        enum next after = settle(w, items, n, committed_us);
        /* The handler may have left the session changed (autocommit on: every
         * later claim would commit on its own, and a retried copy would meet
         * its own claim as a "duplicate"): never reuse it. */
        return after == NEXT_CONTINUE && sc_worker_reset_db(w) ? NEXT_DB_LOST : after;
    }
    default:
        return settle(w, items, n, committed_us);
    }
}

