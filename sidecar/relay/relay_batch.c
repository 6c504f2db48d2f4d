#include "relay_batch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "log.h"
#include "relay_conn.h"
#include "relay_message.h"

const char *sc_relay_row_state_name(enum sc_relay_row_state s)
{
    static const char *const names[SC_ROW_STATES] = {
        "claimed", "invalid", "refused", "sent", "resend", "acked", "hold", "published", "failed",
        "lease_lost", "nacked", "returned", "unconfirmed", "unsent", "left", "held"};
    return (unsigned)s < SC_ROW_STATES ? names[s] : "?";
}

/* The state machine of one row; anything else is a bug in the core. */
static int allowed(enum sc_relay_row_state from, enum sc_relay_row_state to)
{
    switch (from) {
    case SC_ROW_CLAIMED:
        return to == SC_ROW_INVALID || to == SC_ROW_REFUSED || to == SC_ROW_SENT || to == SC_ROW_UNSENT ||
               to == SC_ROW_HOLD;
    case SC_ROW_REFUSED:
        return to == SC_ROW_INVALID || to == SC_ROW_UNSENT;
    case SC_ROW_INVALID:
        return to == SC_ROW_FAILED || to == SC_ROW_LEASE_LOST || to == SC_ROW_LEFT;
    case SC_ROW_SENT: /* INVALID: the broker closed the channel over it alone */
        return to == SC_ROW_ACKED || to == SC_ROW_NACKED || to == SC_ROW_RETURNED ||
               to == SC_ROW_UNCONFIRMED || to == SC_ROW_RESEND || to == SC_ROW_INVALID;
    case SC_ROW_RESEND: /* UNCONFIRMED: not sent again, and it may have reached a queue */
        return to == SC_ROW_SENT || to == SC_ROW_REFUSED || to == SC_ROW_UNCONFIRMED || to == SC_ROW_HOLD;
    case SC_ROW_ACKED:
        return to == SC_ROW_PUBLISHED || to == SC_ROW_LEASE_LOST || to == SC_ROW_LEFT;
    case SC_ROW_HOLD:
        return to == SC_ROW_HELD || to == SC_ROW_LEFT;
    default:
        return 0;
    }
}

/* The one place a row's state changes: checks the transition, then counts
 * and logs what entering the state means. detail: the confirm's result for
 * SC_ROW_UNCONFIRMED. */
static void row_to(struct sc_relay_core *c, struct sc_relay_row *r, enum sc_relay_row_state to,
                   const char *detail)
{
    if (!allowed(r->state, to)) {
        c->bad_transitions++;
        sc_error("relay: row %s cannot go from %s to %s (a bug); left to its lease", r->event_id,
                 sc_relay_row_state_name(r->state), sc_relay_row_state_name(to));
        return;
    }
    enum sc_relay_row_state from = r->state;
    r->state = to;
    struct sc_relay_trace tc;
    sc_relay_trace_of(r, &tc, 0);
    struct sc_log_fields lf = {.event_id = r->event_id, .outcome = sc_relay_row_state_name(to),
                               .trace_id = tc.trace_id};
    switch (to) {
    case SC_ROW_INVALID: /* to be FAILED: what follows in its aggregate is held */
        /* (not REFUSED: a publish refused by a lost connection is left
         * unsent; its batch-mates behind it are held by refused_before, and
         * the batch after it is not sent: binlog_core.c's stale) */
        if (c->ops->hold)
            c->ops->hold(c->io, r);
        return;
    case SC_ROW_PUBLISHED:
        atomic_fetch_add(&c->m->published, 1);
        if (sc_log_enabled(SC_LOG_DEBUG))
            sc_log(SC_LOG_DEBUG, &lf, "published");
        break;
    case SC_ROW_FAILED: {
        static const char *const what[] = {
            [SC_FAIL_RULE] = "is not a valid CloudEvent",
            [SC_FAIL_TOO_LARGE] = "is too large to publish",
            [SC_FAIL_CLIENT] = "was refused by the broker client",
            [SC_FAIL_BROKER] = "was refused by the broker",
        };
        const char *w = (unsigned)r->cause < sizeof what / sizeof *what ? what[r->cause] : "?";
        atomic_fetch_add(&c->m->invalid, 1);
        lf.outcome = "invalid";
        if (c->p.per_aggregate) /* the claim holds the aggregate behind it: say so */
            sc_log(SC_LOG_ERROR, &lf,
                   "outbox row %s, marked FAILED and not published; every other unpublished "
                   "event of aggregate %s/%s is held until it is repaired: %s",
                   w, r->aggregate_type, r->aggregate_id, r->why);
        else
            sc_log(SC_LOG_ERROR, &lf, "outbox row %s, marked FAILED and not published: %s", w, r->why);
        break;
    }
    case SC_ROW_LEASE_LOST:
        atomic_fetch_add(&c->m->lease_lost, 1);
        sc_log(SC_LOG_WARN, &lf, "lease lost before marking %s: another worker owns the row now; "
               "left as it is", from == SC_ROW_ACKED ? "PUBLISHED" : "FAILED");
        break;
    case SC_ROW_NACKED:
        atomic_fetch_add(&c->m->nacked, 1);
        sc_log(SC_LOG_WARN, &lf, "nacked by the broker; retried after the lease");
        break;
    case SC_ROW_RETURNED:
        atomic_fetch_add(&c->m->returned, 1);
        sc_log(SC_LOG_WARN, &lf,
               "unroutable: no queue is bound to exchange %s for routing key %s; the row stays "
               "PUBLISHING and is retried after its lease", c->p.exchange, r->event_type);
        break;
    case SC_ROW_UNCONFIRMED:
        atomic_fetch_add(&c->m->unconfirmed, 1);
        sc_log(SC_LOG_WARN, &lf, "%s; retried after the lease", detail ? detail : "not confirmed");
        break;
    default:
        return;
    }
    if (to != SC_ROW_FAILED)
        sc_relay_span(r, &tc, c->p.exchange, lf.outcome, to != SC_ROW_PUBLISHED && to != SC_ROW_LEASE_LOST);
}

/* Every per-row and per-batch field a batch uses starts here, after its
 * claim filled the rows' columns. */
void sc_relay_batch_begin(struct sc_relay_core *c, struct sc_relay_batch *b, int n,
                          int64_t claim_started)
{
    b->n = n;
    b->n_msgs = b->n_wave = 0;
    b->refused = 0;
    b->probing = 0;
    b->alive_after = 0;
    b->lease_end = claim_started + c->p.lease_ms;
    b->sent_at = claim_started;
    for (int i = 0; i < n; i++) {
        struct sc_relay_row *r = &b->rows[i];
        r->state = SC_ROW_CLAIMED;
        r->cause = SC_FAIL_RULE;
        r->why[0] = 0;
        r->body = NULL;
        memset(&r->props, 0, sizeof r->props);
    }
}

void sc_relay_batch_end(struct sc_relay_batch *b, int n)
{
    for (int i = 0; i < n; i++)
        sc_relay_row_clear(&b->rows[i]);
    b->n = b->n_msgs = b->n_wave = b->refused = 0;
}

/* Marks one row FAILED (r->cause says why), still only under this relay's
 * lease. */
static void fail_row(struct sc_relay_core *c, struct sc_relay_row *r)
{
    if (!c->ops->db_is_open(c->io)) {
        row_to(c, r, SC_ROW_LEFT, NULL);
        return;
    }
    for (int attempt = 0;; attempt++) {
        struct sc_db_err e = {0};
        sc_relay_keep_alive(c);
        int rc = c->ops->mark_failed(c->io, r, &e);
        if (rc >= 0) {
            row_to(c, r, rc ? SC_ROW_FAILED : SC_ROW_LEASE_LOST, NULL);
            return;
        }
        if (attempt == 0 && sc_relay_rerun_in_place(c, &e))
            continue;
        sc_relay_db_failed(c, "marking an invalid row FAILED", &e);
        row_to(c, r, SC_ROW_LEFT, NULL); /* checked again after its lease */
        sc_relay_db_lost(c);
        return;
    }
}

/* Settles the rows basic.publish refused: the rows' own fault (FAILED with
 * the reason) when the connection proved alive afterwards, else they were
 * never sent. */
static void settle_refused(struct sc_relay_core *c, struct sc_relay_batch *b, int connection_alive)
{
    for (int i = 0; i < b->n && b->refused > 0; i++) {
        struct sc_relay_row *r = &b->rows[i];
        if (r->state != SC_ROW_REFUSED)
            continue;
        b->refused--;
        row_to(c, r, connection_alive ? SC_ROW_INVALID : SC_ROW_UNSENT, NULL);
        if (connection_alive)
            fail_row(c, r);
    }
}

/* 1 when the row's message is still to go out in this round. */
static int to_send(const struct sc_relay_row *r)
{
    return r->state == SC_ROW_CLAIMED || r->state == SC_ROW_RESEND;
}

/* A row still to send whose aggregate is held behind a FAILED row (the
 * binlog source's batches hold several events of one aggregate) is held,
 * never sent: when its batch is built, one held before it (the batch
 * before it, or an earlier row of its own); once sent, one of its own
 * batch refused before it. Returns 1 when it was. */
static int refused_before(const struct sc_relay_batch *b, int i)
{
    const struct sc_relay_row *r = &b->rows[i];
    for (int j = 0; j < i; j++) {
        const struct sc_relay_row *p = &b->rows[j];
        enum sc_relay_row_state st = p->state;
        if ((st == SC_ROW_INVALID || st == SC_ROW_REFUSED || st == SC_ROW_FAILED || st == SC_ROW_HOLD) &&
            p->aggregate_type && r->aggregate_type && strcmp(p->aggregate_type, r->aggregate_type) == 0 &&
            strcmp(p->aggregate_id, r->aggregate_id) == 0)
            return 1;
    }
    return 0;
}

static int hold_if_held(struct sc_relay_core *c, struct sc_relay_batch *b, int i, int building)
{
    struct sc_relay_row *r = &b->rows[i];
    if (!c->p.per_aggregate || !c->ops->held || !to_send(r) ||
        !(building ? c->ops->held(c->io, r) : refused_before(b, i)))
        return 0;
    row_to(c, r, SC_ROW_HOLD, NULL);
    return 1;
}

/* Puts the next wave on b->wave: the messages still to send, in order, up
 * to the next one that goes alone (larger than SC_RELAY_LONE_BYTES, or one
 * sent again while probing), or that one alone. Returns its size. */
static int next_wave(struct sc_relay_core *c, struct sc_relay_batch *b)
{
    b->n_wave = 0;
    for (int k = 0; k < b->n_msgs; k++) {
        struct sc_relay_row *r = &b->rows[b->msg_row[k]];
        if (!to_send(r) || hold_if_held(c, b, b->msg_row[k], 0))
            continue;
        int lone = b->msgs[k].body.len > SC_RELAY_LONE_BYTES || (b->probing && r->state == SC_ROW_RESEND);
        if (lone && b->n_wave > 0)
            break;
        b->wave[b->n_wave] = b->msgs[k];
        b->wave_msg[b->n_wave++] = k;
        if (lone)
            break;
    }
    return b->n_wave;
}

/* What is still to send stays unsent this round: never sent, it waits for
 * its lease; sent once before its channel closed, it may be in a queue. */
static void leave_rest(struct sc_relay_core *c, struct sc_relay_batch *b, const char *why)
{
    int left = 0;
    for (int k = 0; k < b->n_msgs; k++) {
        struct sc_relay_row *r = &b->rows[b->msg_row[k]];
        if (!to_send(r))
            continue;
        left++;
        row_to(c, r, r->state == SC_ROW_RESEND ? SC_ROW_UNCONFIRMED : SC_ROW_UNSENT,
               "not confirmed: the broker closed the channel, and it was not sent again");
    }
    if (left > 0 && why)
        sc_warn("relay: %d messages of a batch of %d were not sent (%s); left to their lease", left,
                b->n, why);
}

/* Sends the wave on b->wave. A message basic.publish refuses (nothing of it
 * went out) is taken out and the rest sent after it, so one row never holds
 * back its batch-mates; when the connection fails, the rest of the batch
 * stays unsent. Leaves b->wave[0..n_wave) = the messages sent. */
static void publish_wave(struct sc_relay_core *c, struct sc_relay_batch *b)
{
    int start = 0;
    c->last_beat = sc_relay_now(c);
    while (start < b->n_wave) {
        char err[512] = "";
        if (!c->ops->amqp_is_open(c->io))
            break;
        if (c->ops->publish(c->io, b->wave + start, (size_t)(b->n_wave - start), err, sizeof err) == 0) {
            start = b->n_wave;
            break;
        }
        int k = start;
        while (k < b->n_wave && b->wave[k].result != SC_PUB_FAILED)
            k++;
        if (k == b->n_wave) { /* no message names the failure: the connection's */
            sc_warn("relay: publishing failed, the batch is left to its lease: %s", err);
            sc_relay_amqp_lost(c);
            break;
        }
        struct sc_relay_row *r = &b->rows[b->msg_row[b->wave_msg[k]]];
        /* err is bounded to what fits beside the prefix (gcc -O0 warns otherwise) */
        snprintf(r->why, sizeof r->why, "the broker client refused the message: %.200s", err);
        r->cause = SC_FAIL_CLIENT;
        row_to(c, r, SC_ROW_REFUSED, NULL);
        b->refused++;
        /* the refused one and what its aggregate has after it leave the wave */
        int out = k;
        for (int j = k + 1; j < b->n_wave; j++) {
            if (hold_if_held(c, b, b->msg_row[b->wave_msg[j]], 0))
                continue;
            b->wave[out] = b->wave[j];
            b->wave_msg[out++] = b->wave_msg[j];
        }
        b->n_wave = out;
        start = k;
    }
    int lost = start < b->n_wave;
    b->n_wave = start;
    for (int j = 0; j < b->n_wave; j++)
        row_to(c, &b->rows[b->msg_row[b->wave_msg[j]]], SC_ROW_SENT, NULL);
    if (lost)
        leave_rest(c, b, NULL);
}

/* Sends waves until one is on the channel or nothing is left to send. */
static void send_waves(struct sc_relay_core *c, struct sc_relay_batch *b)
{
    while (next_wave(c, b) > 0) {
        publish_wave(c, b);
        if (b->n_wave > 0)
            return;
    }
}

/* Builds the claimed rows' messages, marks the invalid rows FAILED and
 * sends the first wave without waiting for its confirms. */
void sc_relay_batch_send(struct sc_relay_core *c, struct sc_relay_batch *b)
{
    b->n_msgs = b->n_wave = 0;
    if (sc_relay_now(c) >= b->lease_end) {
        /* Held past its lease (the process stalled): another relay may own
         * the rows now, and a copy sent without the lease is a repeat. */
        sc_warn("relay: a batch of %d was held %lld ms past its lease before it could be sent; "
                "left to the lease", b->n, (long long)(sc_relay_now(c) - b->lease_end));
        for (int i = 0; i < b->n; i++)
            row_to(c, &b->rows[i], SC_ROW_UNSENT, NULL);
        return;
    }
    if (c->ops->stale && c->ops->stale(c->io, b)) {
        /* Read again from the checkpoint anyway: sent now, its rows could
         * go out ahead of an earlier one left unconfirmed. */
        sc_debug("relay: a batch of %d claimed before the stream went back is not sent; it is read again",
                 b->n);
        for (int i = 0; i < b->n; i++)
            row_to(c, &b->rows[i], SC_ROW_UNSENT, NULL);
        return;
    }
    for (int i = 0; i < b->n; i++) {
        struct sc_relay_row *r = &b->rows[i];
        if (hold_if_held(c, b, i, 1))
            continue;
        enum sc_relay_build build = sc_relay_message_build(r, &c->p, &b->msgs[b->n_msgs], r->why,
                                                           sizeof r->why);
        switch (build) {
        case SC_RELAY_BUILT:
            b->msg_row[b->n_msgs++] = i;
            break;
        case SC_RELAY_INVALID:
        case SC_RELAY_TOO_LARGE:
            r->cause = build == SC_RELAY_TOO_LARGE ? SC_FAIL_TOO_LARGE : SC_FAIL_RULE;
            row_to(c, r, SC_ROW_INVALID, NULL);
            fail_row(c, r);
            break;
        default:
            sc_warn("relay: out of memory building the message of %s; left to its lease", r->event_id);
            row_to(c, r, SC_ROW_UNSENT, NULL);
            break;
        }
    }
    b->sent_at = sc_relay_now(c);
    if (!c->ops->amqp_is_open(c->io))
        leave_rest(c, b, NULL);
    send_waves(c, b);
    if (b->n_wave == 0 && b->refused > 0) {
        /* Nothing in flight to prove the connection: ask it directly. */
        char err[512] = "";
        int alive = c->ops->amqp_is_open(c->io) && c->ops->service(c->io, err, sizeof err) == 0;
        if (!alive && c->ops->amqp_is_open(c->io))
            sc_relay_amqp_lost(c);
        settle_refused(c, b, alive);
    }
}

enum wave_end {
    WAVE_CONFIRMED, /* every confirm is in */
    WAVE_TIMED_OUT, /* confirm_timeout_ms passed first */
    WAVE_REFUSED,   /* the broker closed the channel over a message; the connection lives */
    WAVE_LOST,      /* the connection failed (and is closed) */
};

/* Waits up to timeout_ms for the confirms of the wave on the channel and
 * moves each of its rows on. A channel close that blames a message when
 * only one is unconfirmed is that message's: INVALID with the broker's
 * reason. With several unconfirmed, any of them may be the one: each is
 * sent again, alone, until the broker names it (the others may have
 * reached a queue: those are repeats). */
static enum wave_end collect_wave(struct sc_relay_core *c, struct sc_relay_batch *b, int timeout_ms)
{
    char err[512] = "connection closed";
    enum sc_amqp_error_class cls = SC_AMQPERR_CONNECTION;
    int rc = -1;
    if (c->ops->amqp_is_open(c->io))
        rc = c->ops->collect(c->io, b->wave, (size_t)b->n_wave, timeout_ms, &cls, err, sizeof err);
    enum wave_end end = rc >= 0 ? WAVE_CONFIRMED : cls == SC_AMQPERR_REFUSED ? WAVE_REFUSED : WAVE_LOST;
    int in_doubt = 0;
    for (int j = 0; j < b->n_wave && rc < 0; j++)
        in_doubt += b->wave[j].result == SC_PUB_PENDING || b->wave[j].result == SC_PUB_FAILED;
    if (end == WAVE_LOST && c->ops->amqp_is_open(c->io)) {
        sc_warn("relay: publishing failed, the batch is left to its lease: %s", err);
        sc_relay_amqp_lost(c);
    }
    if (end == WAVE_REFUSED && in_doubt > 1) {
        sc_warn("relay: the broker closed the channel over one of %d unconfirmed messages (%s); "
                "each is sent again alone to find it", in_doubt, err);
        b->probing = 1;
    }
    for (int j = 0; j < b->n_wave; j++) {
        struct sc_relay_row *r = &b->rows[b->msg_row[b->wave_msg[j]]];
        enum sc_publish_result res = b->wave[j].result;
        switch (res) {
        case SC_PUB_ACKED:
            row_to(c, r, SC_ROW_ACKED, NULL);
            break;
        case SC_PUB_NACKED:
            row_to(c, r, SC_ROW_NACKED, NULL);
            break;
        case SC_PUB_RETURNED:
            row_to(c, r, SC_ROW_RETURNED, NULL);
            break;
        case SC_PUB_TIMEOUT:
            end = WAVE_TIMED_OUT;
            row_to(c, r, SC_ROW_UNCONFIRMED, sc_publish_result_name(res));
            break;
        default: /* failed, or never collected */
            if (end == WAVE_REFUSED && in_doubt == 1) {
                snprintf(r->why, sizeof r->why, "%.240s", err);
                r->cause = SC_FAIL_BROKER;
                row_to(c, r, SC_ROW_INVALID, NULL);
                b->probing = 0; /* found: what follows it was dropped unrouted */
            } else if (end == WAVE_REFUSED) {
                row_to(c, r, SC_ROW_RESEND, NULL);
            } else {
                row_to(c, r, SC_ROW_UNCONFIRMED, sc_publish_result_name(SC_PUB_FAILED));
            }
            break;
        }
    }
    b->n_wave = 0;
    return end;
}

/* Collects the confirms of the wave in flight and sends the batch's next
 * waves, all within one confirm_timeout_ms: the lease was sized for one
 * confirm wait per batch. After a refusal the channel is opened again and
 * the rest goes out on it in this round. */
void sc_relay_batch_collect(struct sc_relay_core *c, struct sc_relay_batch *b)
{
    int64_t deadline = sc_relay_now(c) + c->p.confirm_timeout_ms;
    enum wave_end end = WAVE_LOST;
    while (b->n_wave > 0) {
        int64_t left = deadline - sc_relay_now(c);
        end = collect_wave(c, b, left > 0 ? (int)left : 0);
        if (end == WAVE_REFUSED) {
            char err[512] = "";
            if (c->ops->reopen(c->io, err, sizeof err)) {
                sc_warn("relay: the broker closed the channel, and opening it again failed: %s", err);
                sc_relay_amqp_lost(c);
                end = WAVE_LOST;
            }
        }
        if (end == WAVE_CONFIRMED && sc_relay_now(c) >= deadline)
            end = WAVE_TIMED_OUT; /* a wave sent now could not be confirmed in time */
        if (end == WAVE_LOST || end == WAVE_TIMED_OUT)
            break;
        send_waves(c, b);
    }
    sc_hist_observe(&c->m->confirm_seconds, (double)(sc_relay_now(c) - b->sent_at) / 1000.0);
    leave_rest(c, b, end == WAVE_TIMED_OUT ? "confirm_timeout_ms passed first" : NULL);
    b->alive_after = end != WAVE_LOST;
}

/* Marks the acked rows PUBLISHED where this relay still holds their lease. */
static int mark_acked(struct sc_relay_core *c, struct sc_relay_batch *b)
{
    struct sc_relay_row *acked[SC_BATCH_LIMIT];
    unsigned char marked[SC_BATCH_LIMIT];
    int n = 0;
    for (int i = 0; i < b->n; i++)
        if (b->rows[i].state == SC_ROW_ACKED)
            acked[n++] = &b->rows[i];
    if (n == 0)
        return 0;
    SC_FAULT("relay.after_confirm");
    if (!c->ops->db_is_open(c->io)) {
        if (c->p.checkpointed)
            sc_warn("relay: the checkpoint past %d confirmed rows cannot be stored (no database "
                    "connection); they are published again from the last checkpoint", n);
        else
            sc_warn("relay: %d confirmed rows cannot be marked PUBLISHED (no database connection); "
                    "they are published again after their lease", n);
        for (int i = 0; i < n; i++)
            row_to(c, acked[i], SC_ROW_LEFT, NULL);
        return n;
    }
    for (int attempt = 0;; attempt++) {
        struct sc_db_err e = {0};
        sc_relay_keep_alive(c);
        if (c->ops->mark_published(c->io, acked, n, marked, &e) == 0) {
            for (int i = 0; i < n; i++)
                row_to(c, acked[i], marked[i] ? SC_ROW_PUBLISHED : SC_ROW_LEASE_LOST, NULL);
            return n;
        }
        if (attempt == 0 && sc_relay_rerun_in_place(c, &e))
            continue;
        sc_warn("relay: marking %d rows PUBLISHED failed (they stay PUBLISHING until the lease "
                "expires and are published again): error %u: %s", n, e.code, e.msg);
        for (int i = 0; i < n; i++)
            row_to(c, acked[i], SC_ROW_LEFT, NULL);
        sc_relay_db_lost(c);
        return n;
    }
}

/* Marks the rows of held aggregates held: one statement for the batch. */
static void mark_hold(struct sc_relay_core *c, struct sc_relay_batch *b)
{
    struct sc_relay_row *hold[SC_BATCH_LIMIT];
    int n = 0;
    for (int i = 0; i < b->n; i++)
        if (b->rows[i].state == SC_ROW_HOLD)
            hold[n++] = &b->rows[i];
    if (n == 0)
        return;
    for (int attempt = 0; c->ops->db_is_open(c->io); attempt++) {
        struct sc_db_err e = {0};
        sc_relay_keep_alive(c);
        if (c->ops->mark_held(c->io, hold, n, &e) == 0) {
            for (int i = 0; i < n; i++)
                row_to(c, hold[i], SC_ROW_HELD, NULL);
            return;
        }
        if (attempt == 0 && sc_relay_rerun_in_place(c, &e))
            continue;
        sc_relay_db_failed(c, "marking rows held", &e);
        sc_relay_db_lost(c);
        break;
    }
    for (int i = 0; i < n; i++) /* read again after the checkpoint, and held then */
        row_to(c, hold[i], SC_ROW_LEFT, NULL);
}

int sc_relay_batch_mark(struct sc_relay_core *c, struct sc_relay_batch *b)
{
    settle_refused(c, b, b->alive_after);
    for (int i = 0; i < b->n; i++) /* the broker refused it: its channel close said so */
        if (b->rows[i].state == SC_ROW_INVALID)
            fail_row(c, &b->rows[i]);
    mark_hold(c, b);
    return mark_acked(c, b);
}
