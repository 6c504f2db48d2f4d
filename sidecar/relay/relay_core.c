#include "relay_core.h"

#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "log.h"
#include "relay_batch.h"
#include "relay_conn.h"

/* One round of the relay, one phase per step:
 *
 *   CLAIM    open what is closed; claim batch k+1 (its lease starts now)
 *   COLLECT  wait for the confirms of batch k, when k is in flight, and send
 *            the rest of k in waves (relay_core.h) within the same wait
 *   SEND     build k+1 (rows breaking a rule or too large: FAILED) and send
 *            its first wave; k+1 is in flight
 *   MARK     mark k's acked rows PUBLISHED and its refused rows FAILED
 *   WAIT     the round's wait, if it has one: idle poll or backoff
 *
 * The broker works on k+1 while the database marks k and claims k+2: the
 * relay's rate is bound by the slower of the two, not by their sum. Sending
 * k+1 before k is marked is safe: k+1 was claimed before k's mark, so under
 * per-aggregate ordering it holds no successor of k's events, and a lost
 * mark only leaves k's rows PUBLISHING for their lease to end. So batch
 * k+1's lease spans k's confirm wait and its own, two confirm_timeout_ms
 * (config.c refuses a lease that short), and no wait of the WAIT phase. A step returns only how long to wait before the next one;
 * what happened to each row is its state (relay_batch.c). */

static struct sc_relay_batch *free_buffer(struct sc_relay_core *c)
{
    return c->inflight == &c->buf[0] ? &c->buf[1] : &c->buf[0];
}

static void claim_failed(struct sc_relay_core *c, struct sc_relay_batch *b, const struct sc_db_err *e)
{
    /* Errors that only show when the statement runs (1290 read only after a
     * failover, 1406, a revoked grant) would otherwise turn into a tight
     * reconnect loop: back off on every repeat. */
    sc_relay_batch_end(b, c->p.batch);
    atomic_fetch_add(&c->m->claim_failed, 1);
    sc_relay_db_failed(c, "claim", e);
    int rerun = sc_relay_rerun_in_place(c, e);
    if (!rerun)
        sc_relay_db_lost(c); /* a new connection may reach the new primary */
    /* none before the first rerun of a deadlock: simply run again */
    c->round_wait = rerun && c->db_fails <= 1 ? 0 : c->ops->backoff_ms(c->io, c->db_fails);
}

static void phase_claim(struct sc_relay_core *c)
{
    c->round_wait = 0;
    c->idle = 0;
    c->phase = c->inflight ? SC_RELAY_COLLECT : SC_RELAY_SEND;
    if (c->stopping)
        return;
    sc_relay_keep_alive(c);
    if (!sc_relay_connect_both(c))
        return;
    struct sc_relay_batch *b = free_buffer(c);
    struct sc_db_err e = {0};
    int64_t started = sc_relay_now(c);
    int n = c->ops->claim(c->io, b->rows, c->p.batch, &e);
    if (n < 0) {
        claim_failed(c, b, &e);
        return;
    }
    sc_relay_db_healthy(c);
    if (n == 0 && c->p.per_aggregate && c->inflight) {
        /* The successors of the batch in flight become claimable once it
         * is marked, in this round: claim again right after, no idle wait
         * (one aggregate's events would otherwise go one per poll). */
        return;
    }
    if (n == 0) {
        c->idle = 1;
        c->round_wait = c->p.claim_waits ? 0 : c->ops->idle_wait_ms ? c->ops->idle_wait_ms(c->io) : c->poll;
        c->poll = c->poll * 2 > c->p.poll_ms ? c->p.poll_ms : c->poll * 2;
        return;
    }
    c->poll = SC_RELAY_POLL_MIN_MS;
    if (c->ops->claim_started)
        started = c->ops->claim_started(c->io);
    sc_relay_batch_begin(c, b, n, started);
    c->claimed = b;
    SC_FAULT("relay.after_claim");
}

static void phase_collect(struct sc_relay_core *c)
{
    c->phase = SC_RELAY_SEND;
    sc_relay_batch_collect(c, c->inflight);
    c->collected = c->inflight;
    c->inflight = NULL;
}

/* The round ends: its wait, if it has one, else the next claim. */
static void end_round(struct sc_relay_core *c)
{
    c->phase = SC_RELAY_CLAIM;
    if (c->round_wait > 0 && !c->stopping) {
        c->wait_until = sc_relay_now(c) + c->round_wait;
        c->phase = SC_RELAY_WAIT;
    }
}

/* A batch's rows are settled: the source hears of it, then it is freed. */
static void batch_over(struct sc_relay_core *c, struct sc_relay_batch *b)
{
    if (c->ops->batch_done)
        c->ops->batch_done(c->io, b);
    sc_relay_batch_end(b, b->n);
}

static void phase_send(struct sc_relay_core *c)
{
    struct sc_relay_batch *b = c->claimed;
    if (b) {
        c->claimed = NULL;
        sc_relay_batch_send(c, b);
        if (b->n_wave > 0) /* its first wave is on the channel */
            c->inflight = b;
        else
            batch_over(c, b);
    }
    if (c->collected)
        c->phase = SC_RELAY_MARK;
    else
        end_round(c);
}

static void phase_mark(struct sc_relay_core *c)
{
    struct sc_relay_batch *b = c->collected;
    int n_acked = sc_relay_batch_mark(c, b);
    sc_hist_observe(&c->m->batch_size, b->n_msgs);
    atomic_fetch_add(&c->m->batches, 1);
    sc_debug("relay: batch of %d claimed, %d confirmed and marked", b->n, n_acked);
    batch_over(c, b);
    c->collected = NULL;
    end_round(c);
}

/* Waits in pieces of half a heartbeat, servicing the broker connection in
 * between: an idle or backing-off relay keeps it (and reads what arrives). */
static int phase_wait(struct sc_relay_core *c)
{
    int64_t left = c->wait_until - sc_relay_now(c);
    if (left <= 0 || c->stopping) {
        c->phase = SC_RELAY_CLAIM;
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
    case SC_RELAY_CLAIM:
        phase_claim(c);
        return 0;
    case SC_RELAY_COLLECT:
        phase_collect(c);
        return 0;
    case SC_RELAY_MARK:
        phase_mark(c);
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
    c->phase = SC_RELAY_CLAIM;
    for (int k = 0; k < 2; k++) {
        struct sc_relay_batch *b = &c->buf[k];
        b->rows = calloc((size_t)p->batch, sizeof *b->rows);
        b->msgs = calloc((size_t)p->batch, sizeof *b->msgs);
        b->msg_row = calloc((size_t)p->batch, sizeof *b->msg_row);
        b->wave = calloc((size_t)p->batch, sizeof *b->wave);
        b->wave_msg = calloc((size_t)p->batch, sizeof *b->wave_msg);
        if (!b->rows || !b->msgs || !b->msg_row || !b->wave || !b->wave_msg) {
            sc_relay_core_free(c);
            return -1;
        }
    }
    return 0;
}

void sc_relay_core_free(struct sc_relay_core *c)
{
    for (int k = 0; k < 2; k++) {
        struct sc_relay_batch *b = &c->buf[k];
        if (b->rows)
            sc_relay_batch_end(b, c->p.batch);
        free(b->rows);
        free(b->msgs);
        free(b->msg_row);
        free(b->wave);
        free(b->wave_msg);
        b->rows = NULL;
        b->msgs = NULL;
        b->msg_row = NULL;
        b->wave = NULL;
        b->wave_msg = NULL;
    }
}
