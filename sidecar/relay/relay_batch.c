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
        "claimed", "invalid", "refused", "sent", "acked", "published", "failed",
        "lease_lost", "nacked", "returned", "unconfirmed", "unsent", "left"};
    return (unsigned)s < SC_ROW_STATES ? names[s] : "?";
}

/* The state machine of one row; anything else is a bug in the core. */
static int allowed(enum sc_relay_row_state from, enum sc_relay_row_state to)
{
    switch (from) {
    case SC_ROW_CLAIMED:
        return to == SC_ROW_INVALID || to == SC_ROW_REFUSED || to == SC_ROW_SENT || to == SC_ROW_UNSENT;
    case SC_ROW_REFUSED:
        return to == SC_ROW_INVALID || to == SC_ROW_UNSENT;
    case SC_ROW_INVALID:
        return to == SC_ROW_FAILED || to == SC_ROW_LEASE_LOST || to == SC_ROW_LEFT;
    case SC_ROW_SENT:
        return to == SC_ROW_ACKED || to == SC_ROW_NACKED || to == SC_ROW_RETURNED ||
               to == SC_ROW_UNCONFIRMED;
    case SC_ROW_ACKED:
        return to == SC_ROW_PUBLISHED || to == SC_ROW_LEASE_LOST || to == SC_ROW_LEFT;
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
    case SC_ROW_PUBLISHED:
        atomic_fetch_add(&c->m->published, 1);
        if (sc_log_enabled(SC_LOG_DEBUG))
            sc_log(SC_LOG_DEBUG, &lf, "published");
        break;
    case SC_ROW_FAILED:
        atomic_fetch_add(&c->m->invalid, 1);
        lf.outcome = "invalid";
        if (c->p.per_aggregate) /* the claim holds the aggregate behind it: say so */
            sc_log(SC_LOG_ERROR, &lf,
                   "outbox row is not a valid CloudEvent, marked FAILED and not published; every "
                   "other unpublished event of aggregate %s/%s is held until it is repaired: %s",
                   r->aggregate_type, r->aggregate_id, r->why);
        else
            sc_log(SC_LOG_ERROR, &lf,
                   "outbox row is not a valid CloudEvent, marked FAILED and not published: %s", r->why);
        break;
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
    b->n_msgs = 0;
    b->refused = 0;
    b->alive_after = 0;
    b->lease_end = claim_started + c->p.lease_ms;
    b->sent_at = claim_started;
    for (int i = 0; i < n; i++) {
        struct sc_relay_row *r = &b->rows[i];
        r->state = SC_ROW_CLAIMED;
        r->why[0] = 0;
        r->body = NULL;
        memset(&r->props, 0, sizeof r->props);
    }
}

void sc_relay_batch_end(struct sc_relay_batch *b, int n)
{
    for (int i = 0; i < n; i++)
        sc_relay_row_clear(&b->rows[i]);
    b->n = b->n_msgs = b->refused = 0;
}

/* Marks one row FAILED (it breaks a rule, or the broker client refused it),
 * still only under this relay's lease. */
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

/* Sends the built messages msgs[0..n_msgs). A message basic.publish refuses
 * (nothing of it went out) is taken out and the rest sent after it, so one
 * row never holds back its batch-mates; when the connection fails, the rest
 * stay unsent. Leaves msgs[0..n_msgs) = the messages sent. */
static void publish_built(struct sc_relay_core *c, struct sc_relay_batch *b)
{
    int start = 0;
    b->sent_at = sc_relay_now(c);
    c->last_beat = b->sent_at;
    while (start < b->n_msgs) {
        char err[512] = "";
        if (!c->ops->amqp_is_open(c->io))
            break;
        if (c->ops->publish(c->io, b->msgs + start, (size_t)(b->n_msgs - start), err, sizeof err) == 0) {
            start = b->n_msgs;
            break;
        }
        int k = start;
        while (k < b->n_msgs && b->msgs[k].result != SC_PUB_FAILED)
            k++;
        if (k == b->n_msgs) { /* no message names the failure: the connection's */
            sc_warn("relay: publishing failed, the batch is left to its lease: %s", err);
            sc_relay_amqp_lost(c);
            break;
        }
        struct sc_relay_row *r = &b->rows[b->msg_row[k]];
        /* err is bounded to what fits beside the prefix (gcc -O0 warns otherwise) */
        snprintf(r->why, sizeof r->why, "the broker client refused the message: %.200s", err);
        row_to(c, r, SC_ROW_REFUSED, NULL);
        b->refused++;
        memmove(b->msgs + k, b->msgs + k + 1, (size_t)(b->n_msgs - k - 1) * sizeof *b->msgs);
        memmove(b->msg_row + k, b->msg_row + k + 1, (size_t)(b->n_msgs - k - 1) * sizeof *b->msg_row);
        b->n_msgs--;
        start = k;
    }
    for (int k = start; k < b->n_msgs; k++) /* never went out */
        row_to(c, &b->rows[b->msg_row[k]], SC_ROW_UNSENT, NULL);
    b->n_msgs = start;
    for (int k = 0; k < b->n_msgs; k++)
        row_to(c, &b->rows[b->msg_row[k]], SC_ROW_SENT, NULL);
}

/* Builds the claimed rows' messages, marks the invalid rows FAILED and
 * sends the rest without waiting for their confirms. */
void sc_relay_batch_send(struct sc_relay_core *c, struct sc_relay_batch *b)
{
    b->n_msgs = 0;
    if (sc_relay_now(c) >= b->lease_end) {
        /* Held past its lease (the process stalled): another relay may own
         * the rows now, and a copy sent without the lease is a repeat. */
        sc_warn("relay: a batch of %d was held %lld ms past its lease before it could be sent; "
                "left to the lease", b->n, (long long)(sc_relay_now(c) - b->lease_end));
        for (int i = 0; i < b->n; i++)
            row_to(c, &b->rows[i], SC_ROW_UNSENT, NULL);
        return;
    }
    for (int i = 0; i < b->n; i++) {
        struct sc_relay_row *r = &b->rows[i];
        switch (sc_relay_message_build(r, &c->p, &b->msgs[b->n_msgs], r->why, sizeof r->why)) {
        case SC_RELAY_BUILT:
            b->msg_row[b->n_msgs++] = i;
            break;
        case SC_RELAY_INVALID:
            row_to(c, r, SC_ROW_INVALID, NULL);
            fail_row(c, r);
            break;
        default:
            sc_warn("relay: out of memory building the message of %s; left to its lease", r->event_id);
            row_to(c, r, SC_ROW_UNSENT, NULL);
            break;
        }
    }
    publish_built(c, b);
    if (b->n_msgs == 0 && b->refused > 0) {
        /* Nothing in flight to prove the connection: ask it directly. */
        char err[512] = "";
        int alive = c->ops->amqp_is_open(c->io) && c->ops->service(c->io, err, sizeof err) == 0;
        if (!alive && c->ops->amqp_is_open(c->io))
            sc_relay_amqp_lost(c);
        settle_refused(c, b, alive);
    }
}

void sc_relay_batch_collect(struct sc_relay_core *c, struct sc_relay_batch *b)
{
    int rc = -1;
    if (c->ops->amqp_is_open(c->io)) {
        char err[512] = "";
        rc = c->ops->collect(c->io, b->msgs, (size_t)b->n_msgs, c->p.confirm_timeout_ms, err, sizeof err);
        sc_hist_observe(&c->m->confirm_seconds, (double)(sc_relay_now(c) - b->sent_at) / 1000.0);
        if (rc < 0) {
            sc_warn("relay: publishing failed, the batch is left to its lease: %s", err);
            sc_relay_amqp_lost(c);
        }
    }
    for (int k = 0; k < b->n_msgs; k++) {
        struct sc_relay_row *r = &b->rows[b->msg_row[k]];
        enum sc_publish_result res = b->msgs[k].result;
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
        default: /* timeout, failed, or never collected */
            row_to(c, r, SC_ROW_UNCONFIRMED,
                   sc_publish_result_name(res == SC_PUB_PENDING ? SC_PUB_FAILED : res));
            break;
        }
    }
    b->alive_after = rc >= 0;
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

int sc_relay_batch_mark(struct sc_relay_core *c, struct sc_relay_batch *b)
{
    settle_refused(c, b, b->alive_after);
    return mark_acked(c, b);
}
