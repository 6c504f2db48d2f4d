/* The batch's state of its deliveries and their events, set in one place:
 * for every batch each delivery is read once (its attempt, the bound on its
 * size, its envelope: the only call of the envelope parser) and becomes one
 * event, or one per member of a batch-mode message, each with every field
 * fresh. A held batch keeps what was decided before any transaction. */
#include <stdio.h>
#include <string.h>

#include "consume/batch_core.h"
#include "consume/republish.h"

/* A batch holds at most batch_max - 1 deliveries and one batch-mode message. */
_Static_assert(SC_MESSAGE_BATCH_MAX == SC_BATCH_LIMIT, "a batch message is bounded like a batch");
_Static_assert(SC_BATCH_LIMIT - 1 + SC_MESSAGE_BATCH_MAX <= SC_ITEM_LIMIT,
               "the transaction's arrays hold every event of the largest batch");

int sc_batch_ends_gathering(const struct worker *w, const amqp_envelope_t *env)
{
    return !sc_envelope_opts_for(w->c->k).plain && sc_message_is_batch(&env->message.properties);
}

/* The next event of the batch, for delivery d, every field fresh. */
static struct item *item_add(struct worker *w, struct delivery *d, int member)
{
    struct item *it = &w->items[w->n_items++];
    if (it->parsed)
        sc_event_free(&it->ev);
    memset(it, 0, sizeof *it);
    it->dl = d;
    it->member = member;
    it->body_len = d->env.message.body.len;
    it->attempt = d->attempt;
    it->d = D_OPEN;
    it->lf.consumer = w->c->k->name;
    it->lf.delivery_tag = d->env.delivery_tag;
    it->lf.attempt = d->attempt;
    it->lf.batch_member = member + 1;
    d->n_items++;
    return it;
}

/* Decided before any transaction: to the DLQ with why. */
static void dead_before(struct item *it, int sticky)
{
    it->d = D_DEAD;
    it->sticky = sticky;
}

/* The id an event had before it became a UUIDv5, named for the logs. */
static void id_fields(const struct sc_parsed_event *e, struct sc_log_fields *lf)
{
    if (!e->id_from[0])
        return;
    if (e->id_of_source)
        lf->ce_id = e->id_from;
    else
        lf->message_id = e->id_from;
}

static void malformed(struct worker *w, struct item *it, const char *reason)
{
    dead_before(it, 1);
    if (it->ev.log_id[0])
        it->lf.event_id = it->ev.log_id; /* readable even when malformed */
    id_fields(&it->ev, &it->lf);
    snprintf(it->why, sizeof it->why, "malformed: %s", reason);
    it->malformed = 1; /* counted once, when its dead letter is settled */
    it->lf.outcome = "malformed";
    sc_log(SC_LOG_WARN, &it->lf, "%s", it->why);
    it->lf.outcome = NULL;
}

/* The attempt a delivery is at (x-sidecar-attempts, or on a quorum queue the
 * broker's count when that is higher); *delivery_count is the broker's count
 * (-1 when absent). Anyone can write the headers: clamped before any
 * arithmetic. x-delivery-count is the broker's only on a quorum queue's
 * redelivery, where it replaces what the publisher wrote; a classic queue,
 * and a quorum queue's first delivery, hand a published one on as it is
 * (RabbitMQ 3.10 to a consumer), which would dead-letter a good message
 * unrun. */
static int attempt_of(const amqp_envelope_t *env, int quorum, int64_t *delivery_count)
{
    const amqp_table_t *h = sc_delivery_headers(env);
    int64_t attempt = sc_amqp_header_int(h, SC_H_ATTEMPTS, 1);
    int64_t count = quorum && env->redelivered ? sc_amqp_header_int(h, "x-delivery-count", -1) : -1;
    if (count > SC_MAX_ATTEMPTS_SEEN)
        count = SC_MAX_ATTEMPTS_SEEN;
    if (count >= 0 && count + 1 > attempt)
        attempt = count + 1;
    if (attempt > SC_MAX_ATTEMPTS_SEEN)
        attempt = SC_MAX_ATTEMPTS_SEEN;
    if (attempt < 1)
        attempt = 1;
    *delivery_count = count;
    return (int)attempt;
}

/* A parsed event of a delivery the broker handed out max_attempts times
 * without an outcome (a crash mid-message, most likely): dead-lettered
 * before it can take the process down again, unless its claim shows an
 * earlier COMMIT applied it (probe_over_limit in batch.c). */
static void over_limit(const struct sc_consumer_config *k, struct item *it, int64_t count)
{
    snprintf(it->why, sizeof it->why,
             "delivered %lld%s times (x-delivery-count), more than max_attempts %d without an "
             "outcome: dead-lettered without running the handler",
             (long long)count + 1, count == SC_MAX_ATTEMPTS_SEEN ? " or more" : "",
             k->max_attempts);
    dead_before(it, 2); /* its claim is probed */
}

static void delivery_begin(struct worker *w, struct delivery *d)
{
    const struct sc_consumer_config *k = w->c->k;
    int64_t count;
    d->attempt = attempt_of(&d->env, strcmp(k->queue_type, "quorum") == 0, &count);
    if (d->in_place > 0) {
        /* Retries in place count on top of what the broker said. */
        long long a = (long long)d->attempt + d->in_place;
        d->attempt = a > SC_MAX_ATTEMPTS_SEEN ? SC_MAX_ATTEMPTS_SEEN : (int)a;
    }
    d->mode = SC_MODE_STRUCTURED;
    d->items = &w->items[w->n_items];
    d->n_items = 0;
    d->kept = d->again_ms = d->spent = 0;
    if (d->refused) {
        /* Never run: an ordered consumer cannot tell where it belongs. */
        struct item *it = item_add(w, d, -1);
        dead_before(it, 1);
        snprintf(it->why, sizeof it->why, "%s", d->refused);
        it->lf.event_id = d->event_id; /* a held key's event: its id, as its key was read */
        sc_log(SC_LOG_WARN, &it->lf, "%s", it->why);
        return;
    }
    size_t len = d->env.message.body.len;
    if (k->max_message_bytes > 0 && len > (size_t)k->max_message_bytes) {
        /* Never parsed (a parse would copy it again): the DLQ keeps it. */
        struct item *it = item_add(w, d, -1);
        dead_before(it, 1);
        snprintf(it->why, sizeof it->why, "message of %zu bytes is larger than max_message_bytes "
                 "%d", len, k->max_message_bytes);
        sc_log(SC_LOG_WARN, &it->lf, "%s", it->why);
        return;
    }
    const struct sc_message m = {.props = &d->env.message.properties, .body = d->env.message.body,
                                 .exchange = d->env.exchange, .routing_key = d->env.routing_key};
    const struct sc_envelope_opts o = sc_envelope_opts_for(k);
    struct sc_message_events evs;
    char reason[512];
    if (sc_message_open(&m, &o, &evs, reason, sizeof reason)) {
        malformed(w, item_add(w, d, -1), reason);
        sc_message_events_free(&evs);
        return;
    }
    d->mode = evs.mode;
    if (evs.n == 0) {
        /* An empty batch: acked once the batch settles, nothing to run. */
        struct sc_log_fields lf = {.consumer = k->name, .delivery_tag = d->env.delivery_tag,
                                   .attempt = d->attempt, .outcome = "empty"};
        sc_log(SC_LOG_INFO, &lf, "a batch-mode message with no events ([]): nothing to do, "
               "acked with its batch");
    }
    if (w->n_items + evs.n > w->items_cap) {
        /* The loop ends a batch at a batch-mode message, so its members
         * always fit: this is a bug, and the delivery goes back. */
        struct item *it = item_add(w, d, -1);
        it->d = D_REQUEUE;
        it->sticky = 1;
        sc_log(SC_LOG_ERROR, &it->lf, "no room for the %d events of this delivery in the batch: "
               "returned", evs.n);
        sc_message_events_free(&evs);
        return;
    }
    for (int i = 0; i < evs.n; i++) {
        struct item *it = item_add(w, d, evs.mode == SC_MODE_BATCH ? i : -1);
        if (evs.mode == SC_MODE_BATCH) {
            it->body_off = evs.spans[i][0];
            it->body_len = evs.spans[i][1] - evs.spans[i][0];
        }
        if (sc_message_event(&m, &o, &evs, i, &it->ev, reason, sizeof reason)) {
            malformed(w, it, reason);
            continue;
        }
        it->parsed = 1;
        it->lf.event_id = it->ev.ev.id;
        id_fields(&it->ev, &it->lf);
        it->lf.trace_id = it->ev.trace_id;
        it->lf.span_id = it->ev.span_id;
        it->lf.parent_span_id = it->ev.parent_span_id;
        if (it->ev.trace_ignored[0])
            sc_log(SC_LOG_WARN, &it->lf, "%s; the event is handled without it", it->ev.trace_ignored);
        if (count >= k->max_attempts) {
            over_limit(k, it, count);
            continue;
        }
        if (sc_log_enabled(SC_LOG_DEBUG)) {
            it->lf.redelivered = d->env.redelivered;
            sc_log(SC_LOG_DEBUG, &it->lf, "received");
            it->lf.redelivered = 0;
        }
    }
    sc_message_events_free(&evs);
}

/* The same batch again on a new session (after NEXT_DB_HOLD): what was
 * decided before any transaction stays; the rest is open again. */
static void item_again(struct item *it)
{
    /* Committed in a transaction of its own (the ladder's one by one)
     * before a later one was lost: applied, it is settled as such. */
    if (it->committed && it->d == D_APPLIED)
        return;
    it->ran = it->committing = it->committed = it->republished = 0;
    if (it->sticky)
        return;
    it->d = D_OPEN;
    it->why[0] = 0;
    it->lf.error_code = 0;
    it->lf.sqlstate = NULL;
}

int sc_batch_begin(struct worker *w, struct delivery *dls, int n)
{
    int over = 0;
    if (w->holding) {
        for (int i = 0; i < w->n_items; i++)
            item_again(&w->items[i]);
    } else {
        sc_batch_release(w);
        for (int i = 0; i < n; i++)
            delivery_begin(w, &dls[i]);
    }
    for (int i = 0; i < w->n_items; i++)
        over += w->items[i].sticky == 2;
    return over;
}

void sc_batch_release(struct worker *w)
{
    for (int i = 0; i < w->n_items; i++) {
        if (w->items[i].parsed)
            sc_event_free(&w->items[i].ev);
        w->items[i].parsed = 0;
    }
    w->n_items = 0;
}
