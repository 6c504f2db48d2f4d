/* One transaction of a batch: the claims, the handler, the proof that the
 * transaction is still the one the claims went into, and COMMIT.
 *
 * Fast path (several deliveries): one multi-row claim, a guard savepoint,
 * the handler (handle_batch, or handle per delivery), then COMMIT: n + 4
 * round trips. Per-delivery path (one delivery, or after the fast path gave
 * up): a savepoint per delivery (the first is the guard), so one delivery's
 * duplicate or failure undoes only its own part.
 *
 * Before COMMIT the guard is released and the claims counted: a handler that
 * committed and went on leaves no guard; one that swallowed an error which
 * rolled the transaction back leaves no claims. Either way COMMIT would ack
 * what is not there. */
#include <stdio.h>
#include <string.h>

#include "consume/batch_core.h"
#include "fault.h"
#include "lifecycle.h"

#define GUARD "sc_guard"
#define ITEM_SP "sc_item"

struct run {
    struct worker *w;
    struct item *items;
    int n;
    struct txn_end end;
};

void sc_describe_db_error(char *out, size_t len, const char *what, const struct sc_db_err *e)
{
    snprintf(out, len, "%s failed: error %u (SQLSTATE %s, %s): %s", what, e->code, e->sqlstate,
             sc_db_error_class_name(e->cls), e->msg);
}

void sc_item_error_fields(struct item *it, const struct sc_db_err *e)
{
    it->lf.error_code = e->code;
    snprintf(it->ev_sqlstate, sizeof it->ev_sqlstate, "%s", e->sqlstate);
    it->lf.sqlstate = it->ev_sqlstate;
}

/* Records how the transaction ended; returns 1 (ended) for the caller to
 * pass up. */
static int ended(struct run *r, enum txn t, int culprit, const struct sc_db_err *e)
{
    r->end.t = t;
    r->end.culprit = culprit;
    if (e)
        r->end.cause = *e;
    return 1;
}

/* What a failed statement of the sidecar's own means for the transaction:
 * gone with all its work (deadlock, a savepoint no longer there), or a
 * session that cannot go on (lost, not writable, out of sync). */
static enum txn after_error(const struct sc_db_err *e)
{
    return e->cls == SC_DBERR_DEADLOCK || e->cls == SC_DBERR_SAVEPOINT_GONE ? TXN_ROLLED_BACK
                                                                             : TXN_OUTAGE;
}

/* SAVEPOINT, ROLLBACK TO SAVEPOINT or RELEASE SAVEPOINT. 1305 here can only
 * mean the savepoint is gone, and with it the transaction it was set in. */
static int savepoint(struct run *r, const char *verb, const char *name, struct sc_db_err *e)
{
    char sql[64];
    snprintf(sql, sizeof sql, "%s %s", verb, name);
    if (r->w->io->exec(r->w, sql, e) == 0)
        return 0;
    if (e->code == 1305)
        e->cls = SC_DBERR_SAVEPOINT_GONE;
    return -1;
}

static int open_ids(const struct run *r, const char **ids)
{
    int k = 0;
    for (int i = 0; i < r->n; i++)
        if (r->items[i].parsed && r->items[i].d == D_OPEN)
            ids[k++] = r->items[i].ev.ev.id;
    return k;
}

/* After the fast path rolled back: what it had applied is open again. */
static void reopen_applied(struct run *r)
{
    for (int i = 0; i < r->n; i++)
        if (r->items[i].d == D_APPLIED)
            r->items[i].d = D_OPEN;
}

static void decide_refused(struct item *it, sc_handler_status st, const char *reason,
                           const struct sc_db_err *e)
{
    char dberr[160] = "";
    if (e && e->code)
        snprintf(dberr, sizeof dberr, " (last database error %u, SQLSTATE %s)", e->code,
                 e->sqlstate);
    snprintf(it->why, sizeof it->why, "%s: %.*s%s",
             st == SC_HANDLER_RETRY ? "handler asked to retry" : "rejected by handler",
             SC_REASON_LEN, reason[0] ? reason : "no reason", dberr);
    it->d = st == SC_HANDLER_RETRY ? D_RETRY : D_DEAD;
}

/* A handler ended the transaction itself (commit, rollback, autocommit on):
 * this delivery is dead-lettered, the session is replaced afterwards. */
static int broken(struct run *r, int i, const char *where)
{
    struct worker *w = r->w;
    struct item *it = &r->items[i];
    struct sc_db_err e = {0};
    snprintf(it->why, sizeof it->why,
             "handler %s ended the transaction (commit, rollback or autocommit) in %s: contract "
             "violation", w->c->plugin.h->name, where);
    sc_log(SC_LOG_ERROR, &it->lf, "%s", it->why);
    it->d = D_DEAD;
    w->io->rollback(w, &e);
    return ended(r, TXN_BROKEN, i, NULL);
}

/* Calls the handler for one delivery inside the open transaction and
 * decides it: D_APPLIED, or D_RETRY / D_DEAD with the reason (the caller
 * undoes its part). Returns 1 when the transaction ended. */
static int call_handler(struct run *r, int i)
{
    struct worker *w = r->w;
    struct item *it = &r->items[i];
    struct sc_db_err e = {0};
    char reason[SC_REASON_LEN] = "";
    w->io->keep_alive(w);
    int64_t t0 = sc_now_us();
    sc_handler_status st = w->io->handle(w, &it->ev.ev, reason, sizeof reason);
    sc_hist_observe(&w->c->m.handler_seconds, (double)(sc_now_us() - t0) / 1e6);
    w->io->last_error(w, &e);
    if (st != SC_HANDLER_OK && sc_session_gone(&e))
        return ended(r, TXN_OUTAGE, i, &e);
    if (st != SC_HANDLER_OK && e.cls == SC_DBERR_DEADLOCK)
        return ended(r, TXN_ROLLED_BACK, i, &e);
    if (!w->io->in_transaction(w))
        return broken(r, i, "handle");
    if (st == SC_HANDLER_OK) {
        it->d = D_APPLIED;
        return 0;
    }
    decide_refused(it, st, reason, &e);
    return 0;
}

/* Undoes one delivery's part. Returns 1 when the transaction ended. */
static int undo(struct run *r, const char *sp, int i)
{
    struct sc_db_err e = {0};
    if (savepoint(r, "ROLLBACK TO SAVEPOINT", sp, &e) == 0)
        return 0;
    return ended(r, after_error(&e), i, &e);
}

static int rollback(struct run *r, enum txn t, int culprit)
{
    struct sc_db_err e = {0};
    if (r->w->io->rollback(r->w, &e))
        return ended(r, TXN_OUTAGE, culprit, &e);
    return ended(r, t, culprit, NULL);
}

/* Proves, before COMMIT, that the transaction is still the one the claims
 * went into (the guard savepoint is there) and that the applied deliveries'
 * claims are in it. A handler can end the transaction in ways the client
 * cannot see afterwards: an ERR packet carries no status, and with
 * autocommit off the next statement opens a new transaction. Returns 1 when
 * the transaction ended. */
static int verify(struct run *r, int applied)
{
    struct worker *w = r->w;
    struct sc_db_err e = {0};
    const char *ids[SC_ITEM_LIMIT];
    int k = 0;
    for (int i = 0; i < r->n; i++)
        if (r->items[i].d == D_APPLIED)
            ids[k++] = r->items[i].ev.ev.id;
    int guard_gone = 0;
    if (savepoint(r, "RELEASE SAVEPOINT", GUARD, &e)) {
        if (e.cls != SC_DBERR_SAVEPOINT_GONE)
            return ended(r, TXN_OUTAGE, -1, &e);
        guard_gone = 1;
    }
    long found = -1;
    if (w->io->count_claims(w, ids, k, &found, &e)) {
        if (sc_session_gone(&e))
            return ended(r, TXN_OUTAGE, -1, &e);
        /* No proof either way: roll back, the ladder retries. */
        sc_log(SC_LOG_WARN, &r->items[0].lf, "could not verify the claims before COMMIT: error "
               "%u: %s; rolling back and retrying", e.code, e.msg);
        r->end.cause = e;
        return rollback(r, TXN_ROLLED_BACK, -1);
    }
    if (found < k) {
        sc_log(SC_LOG_ERROR, &r->items[0].lf,
               "%d of %d claims are gone before COMMIT: handler %s ignored an error that rolled "
               "the transaction back; rolling back and retrying", k - (int)found, applied,
               w->c->plugin.h->name);
        for (int i = 0; i < r->n; i++)
            if (r->items[i].d == D_APPLIED)
                snprintf(r->items[i].why, sizeof r->items[i].why,
                         "claim vanished before COMMIT (the handler ignored an error that rolled "
                         "the transaction back)");
        r->end.cause = (struct sc_db_err){.code = 0, .cls = SC_DBERR_SAVEPOINT_GONE};
        return rollback(r, TXN_ROLLED_BACK, -1);
    }
    if (!guard_gone)
        return 0;
    /* The claims are there but the transaction is not the one they went
     * into: a handler committed and went on. Which effects went with that
     * COMMIT cannot be told: neither redeliver (a second effect) nor ack (a
     * lost one): to the DLQ for a person to look at. */
    for (int i = 0; i < r->n; i++) {
        struct item *it = &r->items[i];
        if (it->d != D_APPLIED)
            continue;
        snprintf(it->why, sizeof it->why,
                 "handler %s committed inside the batch's transaction and went on: contract "
                 "violation; claims may be committed without their effects",
                 w->c->plugin.h->name);
        sc_log(SC_LOG_ERROR, &it->lf, "%s", it->why);
        it->d = D_DEAD;
    }
    struct sc_db_err rb = {0};
    w->io->rollback(w, &rb);
    return ended(r, TXN_BROKEN, -1, NULL);
}

/* Ends the transaction: COMMIT when something was applied, else a ROLLBACK
 * that releases the duplicates' locks. */
static void finish(struct run *r, int applied)
{
    struct worker *w = r->w;
    struct sc_db_err e = {0};
    if (!applied) {
        rollback(r, TXN_EMPTY, -1);
        return;
    }
    if (verify(r, applied))
        return;
    SC_FAULT("consumer.before_commit");
    w->io->keep_alive(w);
    for (int i = 0; i < r->n; i++)
        r->items[i].committing = r->items[i].d == D_APPLIED;
    int64_t t0 = sc_now_us();
    int failed = w->io->commit(w, &e);
    sc_hist_observe(&w->c->m.commit_seconds, (double)(sc_now_us() - t0) / 1e6);
    if (failed) {
        for (int i = 0; i < r->n; i++) {
            if (!r->items[i].committing)
                continue;
            sc_item_error_fields(&r->items[i], &e);
            snprintf(r->items[i].why, sizeof r->items[i].why, "%s", e.msg);
        }
        ended(r, TXN_UNKNOWN, -1, &e);
        return;
    }
    for (int i = 0; i < r->n; i++)
        if (r->items[i].committing) {
            r->items[i].committing = 0;
            r->items[i].committed = 1;
        }
    SC_FAULT("consumer.after_commit");
    ended(r, TXN_COMMITTED, -1, NULL);
}

/* A handler ended the transaction inside the fast path: a COMMIT there also
 * committed the claims of the deliveries whose handler had not run yet,
 * without their effects. Take those claims back so their redelivery applies
 * them; when that fails they are dead-lettered (never acked without effect). */
static void release_unhandled_claims(struct run *r)
{
    struct worker *w = r->w;
    struct sc_db_err e = {0};
    const char *ids[SC_ITEM_LIMIT];
    int k = open_ids(r, ids);
    if (k && (w->io->unclaim_many(w, ids, k, &e) || w->io->commit(w, &e))) {
        sc_log(SC_LOG_ERROR, &r->items[0].lf, "could not take back %d claims after a handler's "
               "COMMIT: error %u: %s; those deliveries are dead-lettered", k, e.code, e.msg);
        for (int i = 0; i < r->n; i++)
            if (r->items[i].parsed && r->items[i].d == D_OPEN) {
                snprintf(r->items[i].why, sizeof r->items[i].why, "claim committed by another "
                         "delivery's handler and could not be taken back: error %u", e.code);
                r->items[i].d = D_DEAD;
            }
    }
}

/* handle_batch for every open delivery at once (one round trip for the
 * sample handler). Returns 1 when the transaction ended, 0 when the batch
 * takes the per-delivery path (rolled back). */
static int fast_batch_handler(struct run *r)
{
    struct worker *w = r->w;
    struct sc_db_err e = {0};
    const struct sc_event *evs[SC_ITEM_LIMIT];
    sc_handler_status st[SC_ITEM_LIMIT];
    int idx[SC_ITEM_LIMIT], k = 0;
    for (int i = 0; i < r->n; i++)
        if (r->items[i].parsed && r->items[i].d == D_OPEN) {
            idx[k] = i;
            evs[k++] = &r->items[i].ev.ev;
        }
    w->io->keep_alive(w);
    int64_t t0 = sc_now_us();
    memset(w->reasons, 0, (size_t)k * SC_REASON_LEN);
    int rc = w->io->handle_batch(w, evs, (size_t)k, st, w->reasons, SC_REASON_LEN);
    sc_hist_observe(&w->c->m.handler_seconds, (double)(sc_now_us() - t0) / 1e6);
    w->io->last_error(w, &e);
    if (rc != 0) {
        if (sc_session_gone(&e))
            return ended(r, TXN_OUTAGE, -1, &e);
        if (e.cls == SC_DBERR_DEADLOCK)
            return ended(r, TXN_ROLLED_BACK, -1, &e);
    }
    if (!w->io->in_transaction(w)) {
        /* What it committed (claims, some effects?) cannot be told apart:
         * neither redeliver (a second effect) nor ack (a lost one): every
         * delivery of the batch goes to the DLQ for a person to look at. */
        w->io->rollback(w, &e);
        for (int j = 0; j < k; j++) {
            struct item *it = &r->items[idx[j]];
            snprintf(it->why, sizeof it->why,
                     "handler %s ended the transaction in handle_batch: contract violation; the "
                     "batch's claims may be committed without their effects",
                     w->c->plugin.h->name);
            sc_log(SC_LOG_ERROR, &it->lf, "%s", it->why);
            it->d = D_DEAD;
        }
        return ended(r, TXN_BROKEN, idx[0], NULL);
    }
    if (rc != 0) {
        if (w->io->rollback(w, &e))
            return ended(r, TXN_OUTAGE, -1, &e);
        return 0;
    }
    const char *refused[SC_ITEM_LIMIT];
    int n_refused = 0, applied = 0;
    for (int j = 0; j < k; j++) {
        struct item *it = &r->items[idx[j]];
        if (st[j] == SC_HANDLER_OK) {
            it->d = D_APPLIED;
            applied++;
            continue;
        }
        decide_refused(it, st[j], w->reasons + (size_t)j * SC_REASON_LEN, NULL);
        refused[n_refused++] = it->ev.ev.id;
    }
    if (n_refused && w->io->unclaim_many(w, refused, n_refused, &e)) {
        if (sc_session_gone(&e) || e.cls == SC_DBERR_DEADLOCK)
            return ended(r, after_error(&e), -1, &e);
        if (w->io->rollback(w, &e))
            return ended(r, TXN_OUTAGE, -1, &e);
        reopen_applied(r);
        return 0;
    }
    finish(r, applied);
    return 1;
}

/* The fast path. Returns 1 when the transaction ended, 0 when the batch
 * must take the per-delivery path instead (nothing of it stands): the claim
 * failed (a duplicate among them, or any other error: nothing was
 * inserted), or a handler refused one (that one is decided, the transaction
 * rolled back, the others reopened). */
static int run_fast(struct run *r)
{
    struct worker *w = r->w;
    struct sc_db_err e = {0};
    const char *ids[SC_ITEM_LIMIT];
    int k = open_ids(r, ids);
    if (w->io->claim_many(w, ids, k, &e)) {
        if (e.cls == SC_DBERR_DEADLOCK || sc_session_gone(&e))
            return ended(r, after_error(&e), -1, &e);
        return 0; /* the statement undid itself; per delivery now */
    }
    for (int i = 0; i < r->n; i++)
        if (r->items[i].parsed && r->items[i].d == D_OPEN)
            r->items[i].ran = 1;
    if (savepoint(r, "SAVEPOINT", GUARD, &e))
        return ended(r, after_error(&e), -1, &e);
    SC_FAULT("consumer.after_insert");
    if (w->io->has_batch(w))
        return fast_batch_handler(r);
    int applied = 0;
    for (int i = 0; i < r->n; i++) {
        struct item *it = &r->items[i];
        if (!it->parsed || it->d != D_OPEN)
            continue;
        if (call_handler(r, i)) {
            if (r->end.t == TXN_BROKEN)
                release_unhandled_claims(r);
            return 1;
        }
        if (it->d == D_APPLIED) {
            applied++;
            continue;
        }
        /* Undo the whole batch; the others run again on the per-delivery
         * path, this one is not called again. */
        if (w->io->rollback(w, &e))
            return ended(r, TXN_OUTAGE, i, &e);
        reopen_applied(r);
        return 0;
    }
    finish(r, applied);
    return 1;
}

/* One savepoint per delivery; the first is also the guard. */
static void run_per_delivery(struct run *r)
{
    struct worker *w = r->w;
    int applied = 0, first = 1;
    for (int i = 0; i < r->n; i++) {
        struct item *it = &r->items[i];
        struct sc_db_err e = {0};
        if (!it->parsed || it->d != D_OPEN)
            continue;
        const char *sp = first ? GUARD : ITEM_SP;
        first = 0;
        if (savepoint(r, "SAVEPOINT", sp, &e)) {
            ended(r, after_error(&e), i, &e);
            return;
        }
        it->ran = 1;
        if (w->io->claim(w, it->ev.ev.id, &e)) {
            sc_item_error_fields(it, &e);
            if (e.cls == SC_DBERR_DUPLICATE) {
                it->d = D_DUPLICATE; /* the failed statement undid itself */
                continue;
            }
            if (e.cls == SC_DBERR_DEADLOCK || sc_session_gone(&e)) {
                ended(r, after_error(&e), i, &e);
                return;
            }
            /* With tenants, the claim's own lock wait is the tenant's
             * database locked (LOCK TABLES, a backup's read lock, DDL), not
             * the delivery's fault: the tenant counts as down, its
             * deliveries wait in hand and spend no attempt, the other
             * tenants go on. With one database the ladder retries it. */
            if (e.cls == SC_DBERR_LOCK_WAIT && w->tenant) {
                ended(r, TXN_OUTAGE, i, &e);
                return;
            }
            /* Any other error, 1062 on another key included, is a failure.
             * Logged here, where the error is known: the outcome line comes
             * later and not on every path. */
            sc_describe_db_error(it->why, sizeof it->why, "claim (INSERT consumed_event)", &e);
            sc_log(SC_LOG_WARN, &it->lf, "%s", it->why);
            it->d = D_RETRY;
            if (undo(r, sp, i))
                return;
            continue;
        }
        SC_FAULT("consumer.after_insert");
        if (call_handler(r, i))
            return;
        if (it->d == D_APPLIED) {
            applied++;
            continue;
        }
        if (undo(r, sp, i))
            return;
    }
    finish(r, applied);
}

struct txn_end sc_txn_run(struct worker *w, struct item *items, int n)
{
    struct run r = {.w = w, .items = items, .n = n, .end = {.t = TXN_EMPTY, .culprit = -1}};
    int open = 0;
    for (int i = 0; i < n; i++)
        open += items[i].parsed && items[i].d == D_OPEN;
    w->last_db_use_ms = sc_now_ms();
    if (open == 0)
        return r.end;
    if (open > 1 && !w->hold_one_by_one && run_fast(&r))
        return r.end;
    run_per_delivery(&r);
    return r.end;
}

const char *sc_txn_name(enum txn t)
{
    static const char *const names[] = {
        [TXN_COMMITTED] = "committed", [TXN_EMPTY] = "empty",   [TXN_ROLLED_BACK] = "rolled back",
        [TXN_OUTAGE] = "outage",       [TXN_UNKNOWN] = "unknown", [TXN_BROKEN] = "broken",
    };
    return names[t];
}
