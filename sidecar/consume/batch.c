/* A batch of deliveries, from receipt to settlement: its events set up in
 * one place (batch_begin.c), the x-delivery-count guard's probe, the
 * deadlock ladder (the batch again, then one event per transaction), and
 * what the transaction's end means for the batch: settle, hold it through a
 * new database session, or return it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consume/batch_core.h"
#include "lifecycle.h"

/* Before a retry of the batch: everything the failed transaction decided
 * is open again, but not what was decided before it ran. */
static void reopen(struct item *items, int n)
{
    for (int i = 0; i < n; i++)
        if (items[i].parsed && !items[i].sticky && items[i].d != D_OPEN) {
            items[i].d = D_OPEN;
            items[i].committing = 0;
        }
}

/* A delivery over the x-delivery-count limit had no outcome as far as the
 * broker knows, but an earlier COMMIT may have applied it all the same (the
 * process died after COMMIT, or a COMMIT's outcome was unknown and its
 * redeliveries were returned again). Its claim tells, by the one test of a
 * duplicate: 1062 on the constraint means already consumed (acked without
 * effect); a claim that goes in means it never had an outcome, and it is
 * dead-lettered without running the handler. The probe is always rolled
 * back. */
/* Another copy of item i's event runs in this batch (the relay published it
 * twice, and this copy was returned often enough to pass the limit): that
 * copy settles the event — committed, copied to a delay queue or the DLQ, or
 * returned — so this one is its duplicate, not a dead letter. Its claim could
 * not tell: the twin's claim is not committed yet. */
static int twin_in_batch(const struct item *items, int n, int i)
{
    for (int j = 0; j < n; j++)
        if (j != i && items[j].parsed && items[j].d == D_OPEN &&
            strcmp(items[j].ev.ev.id, items[i].ev.ev.id) == 0)
            return 1;
    return 0;
}

static struct txn_end probe_over_limit(struct worker *w, struct item *items, int n)
{
    struct txn_end end = {.t = TXN_EMPTY, .culprit = -1};
    for (int i = 0; i < n; i++) {
        struct item *it = &items[i];
        if (it->sticky != 2 || it->d != D_DEAD)
            continue;
        if (twin_in_batch(items, n, i)) {
            it->d = D_DUPLICATE;
            continue;
        }
        struct sc_db_err e = {0}, r = {0};
        w->io->keep_alive(w);
        int failed = w->io->claim(w, it->ev.ev.id, &e);
        int lost = failed && sc_session_gone(&e);
        if (w->io->rollback(w, &r) || lost) {
            end.t = TXN_OUTAGE;
            end.cause = lost ? e : r;
            return end;
        }
        if (!failed)
            continue;
        sc_item_error_fields(it, &e);
        if (e.cls == SC_DBERR_DUPLICATE) {
            it->d = D_DUPLICATE;
            continue;
        }
        /* No proof either way: the DLQ keeps it, and says why. */
        size_t len = strlen(it->why);
        sc_describe_db_error(it->why + len, sizeof it->why - len, "; checking its claim", &e);
    }
    return end;
}

static const char *rolled_back_why(const struct txn_end *t)
{
    return t->cause.cls == SC_DBERR_DEADLOCK ? "deadlock"
                                             : "transaction rolled back under the handler";
}

/* The ladder: the batch, the batch once more after a deadlock, then one
 * delivery per transaction. */
static struct txn_end run_ladder(struct worker *w, struct item *items, int n)
{
    struct txn_end t = sc_txn_run(w, items, n);
    for (int round = 0; round < 2 && t.t == TXN_ROLLED_BACK; round++) {
        sc_log(SC_LOG_WARN, &items[0].lf, round == 0 ? "%s: retrying the batch of %d"
                                                     : "%s again: one delivery per transaction",
               rolled_back_why(&t), n);
        reopen(items, n);
        if (round == 0)
            t = sc_txn_run(w, items, n);
    }
    if (t.t != TXN_ROLLED_BACK)
        return t;
    struct txn_end all = {.t = TXN_EMPTY, .culprit = -1};
    for (int i = 0; i < n; i++) {
        if (!items[i].parsed || items[i].d != D_OPEN)
            continue;
        struct txn_end one = sc_txn_run(w, &items[i], 1);
        if (one.culprit >= 0)
            one.culprit += i;
        if (one.t == TXN_ROLLED_BACK) {
            snprintf(items[i].why, sizeof items[i].why, "%s in its own transaction",
                     one.cause.cls == SC_DBERR_DEADLOCK ? "deadlock (1213)"
                                                        : "transaction rolled back under the handler");
            items[i].d = D_RETRY;
            continue;
        }
        if (one.t == TXN_COMMITTED) {
            all.t = TXN_COMMITTED;
            continue;
        }
        if (one.t == TXN_EMPTY)
            continue;
        /* Outage, unknown COMMIT or a broken session: the rest does not run
         * on this session. */
        for (int j = i + 1; j < n; j++)
            if (items[j].parsed && items[j].d == D_OPEN)
                items[j].d = D_REQUEUE;
        return one;
    }
    return all;
}

/* A COMMIT whose outcome nobody knows: logged once per event in it, never
 * acked; held in hand or returned, it runs again and its claim tells. */
static void log_unknown(struct worker *w, struct item *items, int n, int held)
{
    for (int i = 0; i < n; i++) {
        struct item *it = &items[i];
        if (!it->committing)
            continue;
        atomic_fetch_add(&w->c->m.outcomes[SC_OUT_UNKNOWN], 1);
        it->lf.outcome = "unknown";
        sc_log(SC_LOG_ERROR, &it->lf, "COMMIT failed, outcome unknown: not acked; %s: %s",
               held ? "held in hand, runs again on a new database session (its claim tells)"
                    : "returned for redelivery", it->why);
        it->lf.outcome = NULL;
    }
}

/* The session is gone before COMMIT (nothing of the batch was committed),
 * or with it (what was in it may be): hold the batch through a new session,
 * where the claims tell. The same delivery running when a
 * fresh session fails again is not the database's fault: it counts as an
 * attempt (through a delay queue, then the DLQ at max_attempts). */
static enum next hold(struct worker *w, struct item *items, int n, const struct txn_end *t)
{
    const char *culprit = t->culprit >= 0 ? items[t->culprit].ev.ev.id : "";
    /* A node that cannot take writes, or a claim that waited out a lock,
     * is never the delivery's fault, however often a fresh session meets
     * it (a Galera node outside the primary component answers the
     * read-only probe as writable; a table lock lasts as long as it is
     * held). */
    int not_writable = t->cause.cls == SC_DBERR_NOT_WRITABLE;
    int locked = t->cause.cls == SC_DBERR_LOCK_WAIT;
    if (not_writable || locked)
        culprit = "";
    if (w->holding && culprit[0] && strcmp(culprit, w->hold_culprit) == 0) {
        struct item *it = &items[t->culprit];
        sc_item_error_fields(it, &t->cause);
        snprintf(it->why, sizeof it->why, "error %u (%s) again for this delivery on a new "
                 "database session: %s", t->cause.code, sc_db_error_class_name(t->cause.cls),
                 t->cause.msg);
        sc_log(SC_LOG_WARN, &it->lf, "%s; counted as an attempt", it->why);
        it->d = D_RETRY;
        it->sticky = 1;
        w->hold_blamed = 1;
        culprit = "";
    } else {
        /* Lost again with no delivery to blame (a multi-row claim, a batch
         * handler): next time one savepoint per delivery tells which. */
        if (w->holding && !culprit[0])
            w->hold_one_by_one = 1;
        sc_log(SC_LOG_WARN, &items[0].lf, "database %s during a batch of %d (error %u: %s): "
               "holding the batch while the session is made again",
               not_writable ? "cannot take writes" : locked ? "locked" : "session lost", n,
               t->cause.code, t->cause.msg);
    }
    w->hold_cause = t->cause;
    snprintf(w->hold_culprit, sizeof w->hold_culprit, "%s", culprit);
    return NEXT_DB_HOLD;
}

enum next sc_batch_process(struct worker *w, struct delivery *dls, int n_dls)
{
    int over_limit = sc_batch_begin(w, dls, n_dls);
    struct item *items = w->items;
    int n = w->n_items;
    if (!w->holding)
        sc_hist_observe(&w->c->m.batch_size, n);
    struct txn_end t = {.t = TXN_EMPTY, .culprit = -1};
    if (over_limit)
        t = probe_over_limit(w, items, n);
    if (t.t != TXN_OUTAGE)
        t = run_ladder(w, items, n);
    int64_t committed_us = sc_now_us();
    if (sc_log_enabled(SC_LOG_DEBUG)) {
        int counts[D_REQUEUE + 1] = {0};
        for (int i = 0; i < n; i++)
            counts[items[i].d]++;
        sc_log(SC_LOG_DEBUG, &(struct sc_log_fields){.consumer = w->c->k->name},
               "batch of %d: transaction %s, applied=%d duplicate=%d retry=%d dead=%d requeue=%d",
               n, sc_txn_name(t.t), counts[D_APPLIED], counts[D_DUPLICATE], counts[D_RETRY],
               counts[D_DEAD], counts[D_REQUEUE]);
    }
    switch (t.t) {
    case TXN_OUTAGE:
        return hold(w, items, n, &t);
    case TXN_UNKNOWN:
        /* Never ack what was in the COMMIT: the batch is held like an
         * outage and runs again on a new session, where each claim tells
         * (1062: the COMMIT happened). A nack would spend x-delivery-count
         * on a database fault (RabbitMQ before 4.3 counts every return),
         * and enough of them dead-letter a good message unrun. */
        if (sc_session_gone(&t.cause)) {
            log_unknown(w, items, n, 1);
            return hold(w, items, n, &t);
        }
        /* A COMMIT refused on a session that goes on (a Galera certification
         * failure, 1213): returned, and the session replaced all the same. */
        log_unknown(w, items, n, w->c->k->ordering.present); /* ordered: kept in hand */
        for (int i = 0; i < n; i++)
            if (items[i].committing || (items[i].parsed && items[i].d == D_OPEN))
                items[i].d = D_REQUEUE;
        if (sc_settle(w, dls, n_dls, committed_us) == NEXT_RESET)
            return NEXT_RESET;
        return NEXT_DB_LOST;
    case TXN_BROKEN: {
        /* What ran before in this transaction may have been committed by the
         * handler: returned, so its redelivery meets its claim or applies. */
        for (int i = 0; i < n; i++)
            if (items[i].parsed && ((items[i].d == D_APPLIED && !items[i].committed) ||
                                    items[i].d == D_OPEN))
                items[i].d = D_REQUEUE;
        enum next after = sc_settle(w, dls, n_dls, committed_us);
        /* The handler may have left the session changed (autocommit on: every
         * later claim would commit on its own, and a retried copy would meet
         * its own claim as a "duplicate"): never reuse it. */
        return after == NEXT_CONTINUE && w->io->replace_session(w) ? NEXT_DB_LOST : after;
    }
    default:
        return sc_settle(w, dls, n_dls, committed_us);
    }
}
