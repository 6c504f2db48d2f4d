/* An ordered consumer's loop: what arrives goes into the worker's in-hand
 * set (consume/order.h) in arrival order; each batch takes what may run now
 * (one event per key, the oldest of its key, its retry delay over), and what
 * the batch kept (retries in place, events without an outcome) stays in hand
 * for a later batch. Nothing is nacked: everything in hand returns to the
 * broker only when the session ends, in queue order. */
#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>

#include "consume/held.h"
#include "consume/order.h"
#include "consume/worker.h"
#include "lifecycle.h"
#include "log.h"

#define RECEIVE_POLL_MS 200
#define DB_IDLE_PING_MS 30000

static void drop_envelope(amqp_envelope_t *env)
{
    amqp_destroy_envelope(env);
}

/* Takes what the broker has for the worker into the set: waits up to
 * timeout_ms for the first delivery, then takes what is already waiting, up
 * to batch_max, each classified (and passed to take when given: it returns
 * 1 when it disposed of the delivery, -1 when the session must end).
 * Returns 0, or -1 when the session must end (closed, or a consumer
 * cancelled: the reset declares the queues again). */
int sc_order_gather(struct worker *w, struct sc_order *o, int timeout_ms,
                    int (*take)(struct worker *, struct sc_order_slot *, void *), void *arg)
{
    const struct sc_consumer_config *k = w->c->k;
    struct sc_log_fields lf = {.consumer = k->name};
    char err[512] = "";
    for (int got = 0; got < k->batch_max; got++) {
        struct sc_order_slot *s = sc_order_add(o);
        if (!s) {
            /* The prefetch is in hand: the broker sends nothing more until
             * one is settled. */
            sc_worker_keep_alive(w);
            if (timeout_ms > 0 && got == 0)
                sc_sleep_ms(timeout_ms);
            return 0;
        }
        enum sc_amqp_recv r = sc_amqp_receive(&w->in, &s->env, got ? 0 : timeout_ms, err,
                                              sizeof err);
        if (r != SC_AMQP_RECV_MESSAGE) {
            o->n--;
            if (r == SC_AMQP_RECV_TIMEOUT)
                return 0;
            sc_log(SC_LOG_WARN, &lf, "%s: %s", r == SC_AMQP_RECV_CANCELLED
                   ? "consumer cancelled, declaring the queues again" : "broker connection lost",
                   err);
            return -1;
        }
        s->received_us = sc_now_us();
        w->last_delivery_ms = sc_now_ms();
        sc_order_classify(k, s);
        int rc = take ? take(w, s, arg) : 0;
        if (rc < 0)
            return -1;
        if (rc > 0) {
            amqp_destroy_envelope(&s->env);
            o->n--;
        }
    }
    return 0;
}

/* eventversion per key: an applied event whose version is not its key's
 * last + 1 is logged and counted (it was applied all the same: the
 * arrival order is what the consumer keeps; the version tells whether the
 * producer's order agreed). */
void sc_order_check_versions(struct worker *w, struct sc_order *o, const int *idx, int n)
{
    for (int j = 0; j < n; j++) {
        const struct delivery *d = &w->dls[j];
        const struct sc_order_slot *s = &o->slots[idx[j]];
        if (d->kept || d->n_items != 1 || s->kind != SC_ORDER_KEYED)
            continue;
        struct item *it = &d->items[0];
        if (it->d != D_APPLIED || !it->parsed || !it->ev.ev.has_eventversion)
            continue;
        int64_t last, v = it->ev.ev.eventversion;
        int rc = sc_order_version(o, s->hash, v, &last);
        if (rc == 0)
            continue;
        atomic_fetch_add(&w->c->m.version_breaks[rc < 0], 1);
        sc_log(SC_LOG_WARN, &it->lf, "eventversion %lld of key '%.100s' applied after %lld: %s "
               "(applied in arrival order, counted in sidecar_consumer_version_breaks_total)",
               (long long)v, s->key, (long long)last, rc > 0 ? "a gap" : "a regression");
    }
}

long sc_consume_ordered(struct worker *w)
{
    const struct sc_consumer_config *k = w->c->k;
    struct sc_log_fields lf = {.consumer = k->name};
    struct sc_order o;
    /* The broker hands out at most prefetch unacked deliveries per queue. */
    int *idx = malloc((size_t)k->batch_max * sizeof *idx);
    if (!idx || sc_order_init(&o, k->prefetch * sc_worker_queues(w))) {
        free(idx);
        sc_log(SC_LOG_ERROR, &lf, "out of memory");
        return 0;
    }
    o.queue_cap = k->prefetch;
    long handled = 0;
    int64_t last_service_ms = sc_now_ms(), next_due = INT64_MAX;
    while (!sc_stop_requested()) {
        if (sc_worker_service_publisher(w, &last_service_ms))
            break;
        int64_t now = sc_now_ms();
        int n = sc_order_pick(&o, now, k->batch_max, idx, &next_due);
        int64_t wait = n ? 0 : next_due == INT64_MAX ? RECEIVE_POLL_MS : next_due - now;
        if (wait > RECEIVE_POLL_MS)
            wait = RECEIVE_POLL_MS;
        if (sc_order_gather(w, &o, (int)wait, NULL, NULL))
            break;
        n = sc_order_pick(&o, sc_now_ms(), k->batch_max, idx, &next_due);
        if (n == 0) {
            if (sc_worker_check_queues(w, 0))
                break; /* closing the channel returns everything in hand */
            if (o.n == 0 && sc_now_ms() - w->last_db_use_ms > DB_IDLE_PING_MS) {
                w->last_db_use_ms = sc_now_ms();
                if (mysql_ping(w->db.conn)) {
                    sc_log(SC_LOG_WARN, &lf, "database connection lost while idle: %s",
                           mysql_error(w->db.conn));
                    if (sc_worker_reconnect_db(w, sc_now_ms()))
                        break;
                }
            }
            continue;
        }
        sc_order_batch(&o, idx, n, w->dls);
        struct sc_db_err he = {0};
        if (sc_held_mode(k) && sc_held_check(w, w->dls, n, &he)) {
            /* Nothing runs before the holds are known. */
            sc_log(SC_LOG_WARN, &lf, "reading the held keys failed (error %u: %s)", he.code,
                   he.msg);
            if (sc_worker_reconnect_db(w, sc_now_ms()))
                break;
            continue;
        }
        if (sc_held_mode(k) && (n = sc_held_wait(k, &o, idx, w->dls, n, sc_now_ms())) == 0)
            continue; /* all of them wait in hand for their keys' replays */
        enum next next = sc_consume_batch(w, w->dls, n);
        if (next != NEXT_RESET) /* given back: nothing of it was settled here */
            sc_order_check_versions(w, &o, idx, n);
        sc_batch_release(w);
        handled += n;
        if (next == NEXT_RESET)
            break; /* closing the channel returns everything in hand */
        sc_order_after(&o, idx, w->dls, n, sc_now_ms(), drop_envelope);
        if (next == NEXT_DB_LOST && sc_worker_reconnect_db(w, sc_now_ms()))
            break;
    }
    for (int i = 0; i < o.n; i++)
        amqp_destroy_envelope(&o.slots[i].env);
    sc_order_free(&o);
    free(idx);
    return handled;
}
