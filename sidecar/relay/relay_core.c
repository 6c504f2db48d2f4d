#include "relay_core.h"

#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "log.h"
#include "relay_batch.h"
#include "relay_conn.h"

/* One round of the relay, one phase per step:
 *
 *   COLLECT  wait for the confirms of batch k, when k is in flight
 *   SEND     build and send k+1 (rows breaking a rule: FAILED); k+1 is in flight
 *   COMMIT   open what is closed; ONE transaction: mark k's acked rows
 *            PUBLISHED (conditional on the lease), then claim k+2 (its lease
 *            starts now), then COMMIT
 *   WAIT     the round's wait, only when it holds nothing: idle poll or backoff
 *
 * The broker works on k+1 while the database commits the round, and the
 * round costs one durable commit, not two: the relay's rate is bound by the
 * slower of one commit and one confirm wait. Sending k+1 before k is marked
 * is safe: k+1 was claimed while k was PUBLISHING, so under per-aggregate
 * ordering it holds no successor of k's events, and a lost mark only leaves
 * k's rows PUBLISHING for their lease to end. The claim of k+2 runs after
 * k's marks in the same transaction and sees them (a transaction sees its
 * own writes), so a successor of an event of k can be in k+2; it is sent
 * only once that COMMIT returned, i.e. once its predecessor is durably
 * PUBLISHED. When the COMMIT fails or its answer is lost, the claimed rows
 * are never sent (round_outcome).
 *
 * A batch's lease spans two confirm waits, the one before it is sent (of
 * the batch before it) and its own, and between them one round's
 * transaction; no wait of the WAIT phase (that runs only when the relay
 * holds nothing). config.c refuses a relay.lease_ms that is not greater
 * than two relay.confirm_timeout_ms. A step returns only how long to wait
 * before the next one; what happened to each row is its state
 * (relay_batch.c). */

/* A buffer no batch holds: three, for the batch collected (being marked),
 * the one in flight and the one being claimed. */
static struct sc_relay_batch *free_buffer(struct sc_relay_core *c)
{
    for (int k = 0; k < 3; k++) {
        struct sc_relay_batch *b = &c->buf[k];
        if (b != c->inflight && b != c->claimed && b != c->collected)
            return b;
    }
    return NULL; /* not reached: at most two are held at a commit */
}

static void phase_collect(struct sc_relay_core *c)
{
    c->phase = SC_RELAY_SEND;
    if (!c->inflight)
        return;
    sc_relay_batch_collect(c, c->inflight);
    c->collected = c->inflight;
    c->inflight = NULL;
}

static void phase_send(struct sc_relay_core *c)
{
    c->phase = SC_RELAY_COMMIT;
    struct sc_relay_batch *b = c->claimed;
    if (!b)
        return;
    c->claimed = NULL;
    sc_relay_batch_send(c, b);
    if (b->n_msgs > 0)
        c->inflight = b;
    else
        sc_relay_batch_end(b, b->n);
}

/* The one place the round's transaction gets its class. rc: what
 * mark_and_claim returned. A rerun happens once, at once; what fails again
 * is rolled back like any failure. */
static enum sc_relay_round round_outcome(struct sc_relay_core *c, int rc, int at_commit,
                                         const struct sc_db_err *e, int attempt)
{
    if (rc >= 0)
        return SC_ROUND_DONE;
    int lock = e->cls == SC_DBERR_DEADLOCK || e->cls == SC_DBERR_LOCK_WAIT;
    if (lock && sc_relay_rerun_in_place(c, e)) /* rolled back on this connection */
        return attempt == 0 ? SC_ROUND_RERUN : SC_ROUND_ROLLED_BACK;
    /* A deadlock at COMMIT (a Galera certification conflict) is rolled
     * back too, but its ROLLBACK failed here: nothing is known. */
    return at_commit ? SC_ROUND_UNKNOWN : SC_ROUND_NOT_DONE;
}

static void round_failed(struct sc_relay_core *c, enum sc_relay_round r, int n_acked, int claiming,
                         const struct sc_db_err *e)
{
    if (claiming)
        atomic_fetch_add(&c->m->claim_failed, 1);
    static const char *const what[2][2][2] = {
        /* [claiming][n_acked > 0][unknown] */
        {{"the round's transaction", "the round's COMMIT (outcome unknown)"},
         {"marking PUBLISHED", "marking PUBLISHED, at COMMIT (outcome unknown),"}},
        {{"claim", "claim, at COMMIT (outcome unknown),"},
         {"claim with the marks", "claim with the marks, at COMMIT (outcome unknown),"}}};
    sc_relay_db_failed(c, what[claiming != 0][n_acked > 0][r == SC_ROUND_UNKNOWN], e);
    if (n_acked)
        sc_warn("relay: %d confirmed rows %s PUBLISHED (%s): error %u: %s", n_acked,
                r == SC_ROUND_UNKNOWN ? "may or may not be marked" : "are not marked",
                "if not, they stay PUBLISHING until the lease expires and are published again", e->code,
                e->msg);
    if (r != SC_ROUND_ROLLED_BACK)
        sc_relay_db_lost(c); /* closing rolls back; a new connection may reach the new primary */
    c->round_wait = c->ops->backoff_ms(c->io, c->db_fails);
}

static void claimed_none(struct sc_relay_core *c)
{
    if (c->inflight)
        return; /* its confirms pace the next round */
    c->idle = 1;
    c->round_wait = c->poll;
    c->poll = c->poll * 2 > c->p.poll_ms ? c->p.poll_ms : c->poll * 2;
}

/* The round ends: its wait, when it has one and holds nothing in flight
 * (a batch in flight's confirm wait is the next round's pace), else the
 * next round. */
static void end_round(struct sc_relay_core *c)
{
    c->phase = SC_RELAY_COLLECT;
    if (c->round_wait > 0 && !c->stopping && !c->inflight && !c->claimed) {
        c->wait_until = sc_relay_now(c) + c->round_wait;
        c->phase = SC_RELAY_WAIT;
    }
}

static void phase_commit(struct sc_relay_core *c)
{
    struct sc_relay_batch *done = c->collected;
    struct sc_relay_row *acked[SC_BATCH_LIMIT];
    unsigned char marked[SC_BATCH_LIMIT];
    int n_acked = 0;
    c->round_wait = 0;
    c->idle = 0;
    if (done) {
        sc_relay_batch_settle(c, done);
        n_acked = sc_relay_batch_acked(done, acked);
        if (n_acked)
            SC_FAULT("relay.after_confirm");
    }
    int claiming = !c->stopping && sc_relay_connect_both(c);
    struct sc_relay_batch *b = claiming ? free_buffer(c) : NULL;
    if (n_acked && !c->ops->db_is_open(c->io)) {
        sc_warn("relay: %d confirmed rows cannot be marked PUBLISHED (no database connection); "
                "they are published again after their lease", n_acked);
        sc_relay_batch_marked(c, acked, n_acked, marked, SC_ROUND_NOT_DONE);
        n_acked = 0;
    }
    if (b || n_acked) {
        enum sc_relay_round r;
        struct sc_db_err e;
        int n, at_commit;
        int64_t started = sc_relay_now(c);
        for (int attempt = 0;; attempt++) {
            memset(&e, 0, sizeof e);
            at_commit = 0;
            sc_relay_keep_alive(c);
            started = sc_relay_now(c);
            n = c->ops->mark_and_claim(c->io, acked, n_acked, marked, b ? b->rows : NULL,
                                       b ? c->p.batch : 0, &at_commit, &e);
            if ((r = round_outcome(c, n, at_commit, &e, attempt)) != SC_ROUND_RERUN)
                break;
        }
        c->last_round = r;
        sc_relay_batch_marked(c, acked, n_acked, marked, r);
        if (r != SC_ROUND_DONE) {
            if (b) /* the claim did not happen (or is unknown): its rows are never sent */
                sc_relay_batch_end(b, c->p.batch);
            round_failed(c, r, n_acked, b != NULL, &e);
        } else {
            sc_relay_db_healthy(c);
            if (b && n > 0) {
                c->poll = SC_RELAY_POLL_MIN_MS;
                sc_relay_batch_begin(c, b, n, started);
                c->claimed = b;
                SC_FAULT("relay.after_claim");
            } else if (b) {
                claimed_none(c);
            }
        }
    }
    if (done) {
        sc_hist_observe(&c->m->batch_size, done->n_msgs);
        atomic_fetch_add(&c->m->batches, 1);
        sc_debug("relay: batch of %d claimed, %d confirmed", done->n, n_acked);
        sc_relay_batch_end(done, done->n);
        c->collected = NULL;
    }
    end_round(c);
}

/* Waits in pieces of half a heartbeat, servicing the broker connection in
 * between: an idle or backing-off relay keeps it (and reads what arrives). */
static int phase_wait(struct sc_relay_core *c)
{
    int64_t left = c->wait_until - sc_relay_now(c);
    if (left <= 0 || c->stopping) {
        c->phase = SC_RELAY_COLLECT;
        return 0;
    }
    if (c->ops->amqp_is_open(c->io)) {
        char err[512] = "";
        if (c->ops->service(c->io, err, sizeof err)) {
            sc_warn("relay: broker connection lost: %s", err);
            sc_relay_amqp_lost(c);
        } else {
            sc_relay_keep_alive(c);
        }
    }
    int piece = c->p.heartbeat_ms > 0 ? c->p.heartbeat_ms / 2 : (int)left;
    return left < piece ? (int)left : (piece > 0 ? piece : 1);
}

int sc_relay_step(struct sc_relay_core *c)
{
    switch (c->phase) {
    case SC_RELAY_COLLECT:
        phase_collect(c);
        return 0;
    case SC_RELAY_COMMIT:
        phase_commit(c);
        return 0;
    case SC_RELAY_SEND:
        phase_send(c);
        return 0;
    case SC_RELAY_WAIT:
    default:
        return phase_wait(c);
    }
}

int sc_relay_holds_nothing(const struct sc_relay_core *c)
{
    return !c->inflight && !c->claimed && !c->collected;
}

int sc_relay_core_init(struct sc_relay_core *c, const struct sc_relay_params *p,
                       const struct sc_relay_ops *ops, void *io, struct sc_relay_metrics *m)
{
    memset(c, 0, sizeof *c);
    c->p = *p;
    c->ops = ops;
    c->io = io;
    c->m = m;
    c->poll = SC_RELAY_POLL_MIN_MS;
    c->phase = SC_RELAY_COLLECT;
    for (int k = 0; k < 3; k++) {
        struct sc_relay_batch *b = &c->buf[k];
        b->rows = calloc((size_t)p->batch, sizeof *b->rows);
        b->msgs = calloc((size_t)p->batch, sizeof *b->msgs);
        b->msg_row = calloc((size_t)p->batch, sizeof *b->msg_row);
        if (!b->rows || !b->msgs || !b->msg_row) {
            sc_relay_core_free(c);
            return -1;
        }
    }
    return 0;
}

void sc_relay_core_free(struct sc_relay_core *c)
{
    for (int k = 0; k < 3; k++) {
        struct sc_relay_batch *b = &c->buf[k];
        if (b->rows)
            sc_relay_batch_end(b, c->p.batch);
        free(b->rows);
        free(b->msgs);
        free(b->msg_row);
        b->rows = NULL;
        b->msgs = NULL;
        b->msg_row = NULL;
    }
}
