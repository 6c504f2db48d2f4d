/* Settling a batch with the broker: copies to a delay queue or the DLQ
 * (confirmed before the original is acked), acks, nacks, and the outcome
 * line and counter of every delivery. */
#include <stdio.h>
#include <string.h>

#include "consume/batch_core.h"
#include "lifecycle.h"
#include "otel.h"
#include "consume/held.h"
#include "consume/order.h"
#include "consume/republish.h"

/* A retry at max_attempts: dead instead, the reason saying so. */
static void exhausted(const struct sc_consumer_config *k, struct item *it)
{
    char prefix[64];
    int plen = snprintf(prefix, sizeof prefix, "attempts exhausted (%d of %d): ", it->attempt,
                        k->max_attempts);
    size_t keep = sizeof it->why - (size_t)plen - 1;
    memmove(it->why + plen, it->why, keep);
    it->why[sizeof it->why - 1] = 0;
    memcpy(it->why, prefix, (size_t)plen);
    it->d = D_DEAD;
}

/* The delay before attempt + 1. */
static int retry_delay(const struct sc_consumer_config *k, int attempt)
{
    size_t step = (size_t)(attempt - 1) < k->n_retry_delays ? (size_t)(attempt - 1)
                                                             : k->n_retry_delays - 1;
    return k->retry_delays_ms[step];
}

/* Publishes a copy to the delay queue of its attempt, or to the DLQ once
 * attempts are exhausted (then it->d becomes D_DEAD). */
static int publish_retry(struct worker *w, struct item *it)
{
    const struct sc_consumer_config *k = w->c->k;
    if (it->attempt >= k->max_attempts) {
        exhausted(k, it);
        return w->io->publish_dead(w, it, it->why);
    }
    int delay = retry_delay(k, it->attempt);
    int rc = w->io->publish_retry(w, it, delay, it->why);
    if (rc == 0)
        snprintf(it->why + strlen(it->why), sizeof it->why - strlen(it->why),
                 " (retry in %d ms)", delay);
    return rc;
}

static void log_outcome(struct worker *w, struct item *it, int64_t committed_us)
{
    atomic_ullong *out = w->c->m.outcomes;
    switch (it->d) {
    case D_APPLIED:
        atomic_fetch_add(&out[SC_OUT_APPLIED], 1);
        sc_hist_observe(&w->c->m.receive_to_commit, (double)(committed_us - it->dl->received_us) / 1e6);
        it->lf.outcome = "applied";
        it->lf.duration_us = (uint64_t)(committed_us - it->dl->received_us);
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
        if (it->dl->kept)
            sc_log(SC_LOG_WARN, &it->lf, "will retry in place in %d ms (attempt %d of %d), its "
                   "key waiting behind it: %s", it->dl->again_ms, it->attempt + 1,
                   w->c->k->max_attempts, it->why);
        else
            sc_log(SC_LOG_WARN, &it->lf, "will retry (attempt %d of %d): %s", it->attempt + 1,
                   w->c->k->max_attempts, it->why);
        break;
    case D_DEAD:
        if (it->dl->behind_replay[0]) {
            it->lf.outcome = "held";
            sc_log(SC_LOG_INFO, &it->lf, "%s, whose replay is in flight: sent to the end of %s "
                   "behind the replayed events (it runs after them)", it->why,
                   w->c->k->queue);
            return;
        }
        /* One outcome per event: a malformed one is counted as malformed, not
         * as a dead letter too (its log line still says where it went). */
        atomic_fetch_add(&out[it->malformed ? SC_OUT_MALFORMED : SC_OUT_DEAD_LETTERED], 1);
        it->lf.outcome = "dead_lettered";
        sc_log(SC_LOG_WARN, &it->lf, "dead-lettered to %s: %s", w->c->k->dead_letter_queue,
               it->why);
        break;
    default:
        return;
    }
    if (it->parsed && sc_otel_enabled())
        sc_otel_consumer_span(&it->ev, w->c->k->queue, w->c->k->name, it->lf.outcome,
                              it->d == D_DEAD, it->dl->received_us,
                              it->d == D_APPLIED ? committed_us : sc_now_us());
}

/* A delivery returned without an outcome: it never ran to the end, or its
 * COMMIT's outcome is unknown (logged as such already: batch.c). */
static void log_returned(struct item *it)
{
    if (it->committing)
        return;
    it->lf.outcome = "returned";
    sc_log(SC_LOG_INFO, &it->lf, "returned to the queue without an outcome (%s)",
           it->ran ? "its transaction did not finish" : "it did not run");
}

/* An event's copy is confirmed, or it needs none. */
static int settled(const struct item *it)
{
    return it->d == D_APPLIED || it->d == D_DUPLICATE || it->republished;
}

/* A delivery comes back as a whole when one of its events has no outcome:
 * the redelivery settles those, and meets the claims of the others. */
static int returned(const struct delivery *d)
{
    for (int i = 0; i < d->n_items; i++)
        if (d->items[i].d == D_REQUEUE)
            return 1;
    return 0;
}

static int all_settled(const struct delivery *d)
{
    for (int i = 0; i < d->n_items; i++)
        if (!settled(&d->items[i]))
            return 0;
    return 1;
}

/* An ordered consumer's batch (every delivery one event, possibly not
 * consecutive on the channel: each is acked alone). A retry below
 * max_attempts and an event without an outcome stay in hand (kept), to run
 * again in place: no delay queue, no nack, so nothing of the key can
 * overtake them. */
static enum next settle_ordered(struct worker *w, struct delivery *dls, int n,
                                int64_t committed_us)
{
    const struct sc_consumer_config *k = w->c->k;
    int failed = 0, copies_ok = 1, hold = sc_held_mode(k), db_failed = 0;
    for (int j = 0; j < n; j++) {
        struct delivery *d = &dls[j];
        d->kept = d->again_ms = d->spent = 0;
        for (int i = 0; i < d->n_items; i++) {
            struct item *it = &d->items[i];
            if (it->d == D_RETRY && it->attempt >= k->max_attempts)
                exhausted(k, it);
            if (it->d == D_RETRY) {
                d->kept = d->spent = 1;
                if (d->again_ms < retry_delay(k, it->attempt))
                    d->again_ms = retry_delay(k, it->attempt);
            } else if (it->d == D_REQUEUE) {
                d->kept = 1;
            }
        }
        if (d->kept) {
            for (int i = 0; i < d->n_items; i++) {
                struct item *it = &d->items[i];
                if (it->d == D_RETRY || it->d == D_APPLIED)
                    log_outcome(w, it, committed_us);
                else if (it->d == D_REQUEUE && !it->committing) {
                    it->lf.outcome = "returned";
                    sc_log(SC_LOG_INFO, &it->lf, "no outcome (%s): kept in hand, runs again",
                           it->ran ? "its transaction did not finish" : "it did not run");
                }
            }
            continue;
        }
        for (int i = 0; i < d->n_items && copies_ok; i++) {
            struct item *it = &d->items[i];
            if (it->d != D_DEAD)
                continue;
            w->io->keep_alive(w);
            struct sc_db_err e = {0};
            /* The hold stands before its dead letter is acked: every later
             * event of the key, here or in another instance, is held. */
            char current[37] = "";
            if (hold && d->key &&
                w->io->held_hold(w, d->key, d->event_id,
                                 d->replay_token && !d->refused ? d->replay_token : "",
                                 &it->hold_seq, current, &e)) {
                sc_log(SC_LOG_WARN, &it->lf, "could not record that key '%.100s' is held (error "
                       "%u: %s): kept in hand, runs again on a new session", d->key, e.code,
                       e.msg);
                d->kept = 1;
                db_failed = 1;
                d->again_ms = 1000;
                break;
            }
            /* Held while a replay of its key is in flight: it goes behind the
             * replay's copies, as one of them, so a key that keeps receiving
             * events is freed all the same. A copy that came round before
             * the one it waits for (the replay still publishing) goes round
             * again, a bounded number of times. */
            if (hold && d->key && d->refused && current[0] &&
                sc_amqp_header_int(sc_delivery_headers(&d->env), SC_H_REPLAY_ROUND, 0) <
                    SC_REPLAY_ROUNDS)
                snprintf(d->behind_replay, sizeof d->behind_replay, "%s", current);
            if (w->io->publish_dead(w, it, it->why) != 0)
                copies_ok = 0; /* left unacked: the reset returns it and what follows */
            else
                it->republished = 1;
        }
        if (d->kept || !copies_ok || !all_settled(d))
            continue;
        failed |= w->io->ack(w, d->env.delivery_tag, 0) != 0;
        for (int i = 0; i < d->n_items; i++)
            log_outcome(w, &d->items[i], committed_us);
        /* A replayed copy applied: the key is free once none of its held
         * events is left unconsumed (nothing to write: that is the rule). */
        if (hold && d->replay_token && d->replay_token[0] && d->key && d->n_items == 1 &&
            d->items[0].d != D_DEAD)
            sc_held_after_replayed(w, d, &d->items[0].lf);
    }
    return failed || !copies_ok ? NEXT_RESET : db_failed ? NEXT_DB_LOST : NEXT_CONTINUE;
}

/* Republishes what goes to a delay queue or the DLQ — a batch member as a
 * structured copy of that member alone — then acks each delivery whose
 * events are all settled. With every delivery of the batch settled one
 * basic.ack with `multiple` covers them all (earlier batches are all
 * settled already). A delivery that comes back as a whole gets no copies:
 * its redelivery makes them. */
enum next sc_settle(struct worker *w, struct delivery *dls, int n, int64_t committed_us)
{
    if (w->c->k->ordering.present)
        return settle_ordered(w, dls, n, committed_us);
    int copies_ok = 1, requeue = 0;
    for (int j = 0; j < n; j++) {
        struct delivery *d = &dls[j];
        if (returned(d)) {
            requeue = 1;
            continue;
        }
        for (int i = 0; i < d->n_items && copies_ok; i++) {
            struct item *it = &d->items[i];
            if (it->d != D_RETRY && it->d != D_DEAD)
                continue;
            w->io->keep_alive(w);
            int rc = it->d == D_RETRY ? publish_retry(w, it) : w->io->publish_dead(w, it, it->why);
            if (rc != 0)
                copies_ok = 0; /* this one and the rest stay unacked */
            else
                it->republished = 1;
        }
    }
    if (copies_ok && !requeue && !w->ack_each) {
        if (w->io->ack(w, dls[n - 1].env.delivery_tag, n > 1)) {
            /* An empty batch-mode message has no event to name. */
            struct sc_log_fields none = {.consumer = w->c->k->name,
                                         .delivery_tag = dls[n - 1].env.delivery_tag};
            sc_log(SC_LOG_WARN, dls[n - 1].n_items ? &dls[n - 1].items[0].lf : &none,
                   "ack could not be sent; the broker will redeliver");
            return NEXT_RESET;
        }
        for (int j = 0; j < n; j++)
            for (int i = 0; i < dls[j].n_items; i++)
                log_outcome(w, &dls[j].items[i], committed_us);
        return NEXT_CONTINUE;
    }
    /* Mixed batch: ack one by one what is settled, return the rest; a
     * delivery with a copy not confirmed is left to the reset. */
    int failed = 0;
    for (int j = 0; j < n; j++) {
        struct delivery *d = &dls[j];
        int ack = all_settled(d), back = !ack && returned(d);
        if (ack)
            failed |= w->io->ack(w, d->env.delivery_tag, 0) != 0;
        else if (back)
            failed |= w->io->nack(w, d->env.delivery_tag, 0) != 0;
        for (int i = 0; i < d->n_items; i++) {
            struct item *it = &d->items[i];
            /* An applied event's effect is committed whatever becomes of
             * its delivery: its redelivery is a duplicate. */
            if (ack || it->d == D_APPLIED)
                log_outcome(w, it, committed_us);
            else if (back)
                log_returned(it);
        }
    }
    return failed || !copies_ok ? NEXT_RESET : NEXT_CONTINUE;
}
