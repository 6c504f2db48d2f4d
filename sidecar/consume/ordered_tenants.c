/* The loop of an ordered consumer with tenants: ordered.c's in-hand set,
 * each delivery's tenant read as it arrives, each batch the ready slots of
 * one tenant run in that tenant's database (its held keys there too), a
 * down tenant's slots blocked in hand and sent round past the bounds
 * (order_tenants.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "consume/held.h"
#include "consume/order_tenants.h"
#include "consume/republish.h"
#include "consume/tenant_key.h"
#include "consume/tenant_pool.h"
#include "consume/worker.h"
#include "envelope/sidecar_headers.h"
#include "lifecycle.h"
#include "log.h"

#define RECEIVE_POLL_MS 200
#define PUBLISHER_SERVICE_MS 1000

static void drop_envelope(amqp_envelope_t *env)
{
    amqp_destroy_envelope(env);
}

static int tenant_down(void *ctx, const char *tenant)
{
    struct worker *w = ctx;
    int i = sc_tenant_session_of(w, tenant);
    return i >= 0 && sc_tenant_down(w, i, sc_now_ms());
}

/* Sends slot s round through the delay queue, its attempts as they are,
 * and acks it once the copy is confirmed. Returns 0, or -1 (reset: the
 * broker returns it). */
static int go_round(struct worker *w, struct sc_order_slot *s, const char *why)
{
    const struct sc_consumer_config *k = w->c->k;
    struct sc_log_fields lf = {.consumer = k->name, .delivery_tag = s->env.delivery_tag,
                               .event_id = s->id[0] ? s->id : NULL};
    int i = sc_tenant_session_of(w, s->tenant);
    if (i < 0)
        return -1;
    int64_t attempt = sc_amqp_header_int(sc_delivery_headers(&s->env), SC_H_ATTEMPTS, 1);
    if (attempt < 1 || attempt > 1000000)
        attempt = 1;
    int delay = k->retry_delays_ms[0];
    if (sc_republish_round(&w->out, k, &s->env, (int)attempt - 1 + s->in_place, delay, why,
                           SC_H_TENANT_RETURN, w->tenant->return_mark, &lf) ||
        sc_amqp_ack(&w->in, s->env.delivery_tag, 0))
        return -1;
    w->tenant->sessions[i].returned_out++;
    atomic_fetch_add(&w->c->m.tenant_returned, 1);
    sc_log(SC_LOG_INFO, &lf, "tenant %s: %s; sent round through the %d ms delay queue, its key's "
           "later events behind it", s->tenant, why, delay);
    return 0;
}

/* Every slot of slot at's tenant goes round, oldest first. */
static int tenant_round(struct worker *w, struct sc_order *o, int at, int64_t now)
{
    char tenant[SC_TENANT_MAX + 1];
    snprintf(tenant, sizeof tenant, "%s", o->slots[at].tenant);
    const char *why = now - o->slots[at].blocked_since_ms >= w->c->k->db_outage_hold_ms
                          ? "its database could not be used for db_outage_hold_ms"
                          : "its database cannot be used and its deliveries in hand fill half "
                            "the prefetch";
    for (int i = 0; i < o->n;) {
        struct sc_order_slot *s = &o->slots[i];
        if (strcmp(s->tenant, tenant) != 0) {
            i++;
            continue;
        }
        if (go_round(w, s, why))
            return -1;
        amqp_destroy_envelope(&s->env);
        sc_order_remove(o, i);
    }
    return 0;
}

/* Reads fresh slot s's tenant. Returns 1 when it went round at once
 * (behind its tenant's copies), 0 when it stays, -1 (reset). */
static int classify(struct worker *w, struct sc_order_slot *s)
{
    const struct sc_consumer_config *k = w->c->k;
    char name[SC_TENANT_MAX + 1], why[256];
    sc_order_classify(k, s);
    enum sc_tenant_kind kind = sc_tenant_read(&w->c->cfg->tenants, &w->tenant->names, k,
                                              &s->env, name, why, sizeof why);
    int i = kind == SC_TENANT_FOUND ? sc_tenant_session_of(w, name) : -1;
    if (kind == SC_TENANT_FOUND && i < 0)
        snprintf(why, sizeof why, "out of memory for tenant %s", name);
    if (i < 0) {
        if (kind != SC_TENANT_OPEN) { /* dead-lettered unrun with the reason, no database */
            s->kind = SC_ORDER_UNKEYED;
            snprintf(s->why, sizeof s->why, "%s", why);
            s->hash = 0;
        }
        return 0;
    }
    sc_order_set_tenant(s, name);
    amqp_bytes_t m = sc_amqp_header_bytes(sc_delivery_headers(&s->env), SC_H_TENANT_RETURN);
    int copy = m.len == strlen(w->tenant->return_mark) &&
               memcmp(m.bytes, w->tenant->return_mark, m.len) == 0;
    if (!sc_order_follows(&w->tenant->sessions[i].returned_out, copy))
        return 0;
    return go_round(w, s, "its tenant's earlier deliveries went round") ? -1 : 1;
}

/* ordered.c's gather, each delivery's tenant read. */
static int gather(struct worker *w, struct sc_order *o, int timeout_ms)
{
    const struct sc_consumer_config *k = w->c->k;
    struct sc_log_fields lf = {.consumer = k->name};
    char err[512] = "";
    for (int got = 0; got < k->batch_max; got++) {
        struct sc_order_slot *s = sc_order_add(o);
        if (!s) {
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
        int rc = classify(w, s);
        if (rc < 0)
            return -1;
        if (rc > 0) {
            amqp_destroy_envelope(&s->env);
            o->n--;
        }
    }
    return 0;
}

/* Runs the picked slots idx[0..n) of one tenant (or none) as one batch in
 * its database. Returns the loop's next step; a batch its database could
 * not take stays in hand, its tenant down. */
static enum next run_tenant(struct worker *w, struct sc_order *o, int *idx, int *n_io)
{
    const struct sc_consumer_config *k = w->c->k;
    struct sc_log_fields lf = {.consumer = k->name};
    int n = *n_io;
    const char *tenant = o->slots[idx[0]].tenant;
    sc_order_batch(o, idx, n, w->dls);
    if (!tenant[0]) {
        /* Refused, malformed or too large: dead-lettered, no database. */
        memset(&w->db, 0, sizeof w->db);
        w->db_urls = NULL;
        return sc_batch_process(w, w->dls, n);
    }
    int i = sc_tenant_session_of(w, tenant);
    struct sc_db_err e = {0};
    int opened = i < 0 ? -1 : sc_tenant_enter(w, i, &e);
    enum next next = NEXT_DB_HOLD;
    if (opened >= 0) {
        if (sc_held_mode(k) && sc_held_check(w, w->dls, n, &e)) {
            sc_log(SC_LOG_WARN, &lf, "tenant %s: reading the held keys failed (error %u: %s)",
                   tenant, e.code, e.msg);
            w->hold_cause = e;
        } else if (sc_held_mode(k) && (n = sc_held_wait(k, o, idx, w->dls, n, sc_now_ms())) == 0) {
            next = NEXT_CONTINUE; /* all of them wait in hand for their keys' replays */
        } else {
            next = sc_batch_process(w, w->dls, n);
            if (next == NEXT_DB_HOLD && opened == 0 && sc_worker_db_open(w, &e) == 0) {
                /* A session kept open may have idled out: one fresh one
                 * before the tenant counts as down. */
                w->holding = 1;
                next = sc_batch_process(w, w->dls, n);
                w->holding = 0;
            } else if (next == NEXT_DB_HOLD && opened == 0) {
                w->hold_cause = e;
            }
            w->hold_one_by_one = 0;
            w->hold_culprit[0] = 0;
            if (next != NEXT_DB_HOLD)
                sc_order_check_versions(w, o, idx, n);
        }
        struct sc_db_err lost = w->hold_cause;
        if (next == NEXT_DB_LOST)
            lost = (struct sc_db_err){.code = 2013, .cls = SC_DBERR_CONNECTION,
                                      .msg = "session ended after a COMMIT without outcome or a "
                                             "handler contract violation"};
        if (next == NEXT_RESET) {
            sc_db_close(&w->db);
            memset(&w->db, 0, sizeof w->db);
        } else {
            sc_tenant_leave(w, i, next != NEXT_CONTINUE, &lost);
        }
    }
    *n_io = n;
    if (next == NEXT_DB_HOLD)
        for (int j = 0; j < n; j++) {
            /* Nothing of it was committed: in hand, not an attempt. */
            w->dls[j].kept = 1;
            w->dls[j].spent = 0;
            w->dls[j].again_ms = 0;
        }
    return next == NEXT_RESET ? NEXT_RESET : NEXT_CONTINUE;
}

long sc_consume_ordered_tenants(struct worker *w)
{
    const struct sc_consumer_config *k = w->c->k;
    struct sc_log_fields lf = {.consumer = k->name};
    struct sc_order o;
    int *idx = malloc((size_t)k->batch_max * sizeof *idx);
    if (!idx || sc_order_init(&o, k->prefetch * sc_worker_queues(w))) {
        free(idx);
        sc_log(SC_LOG_ERROR, &lf, "out of memory");
        return 0;
    }
    o.queue_cap = k->prefetch;
    if (!w->tenant->return_mark[0])
        snprintf(w->tenant->return_mark, sizeof w->tenant->return_mark, "%ld-%d-%lld",
                 (long)getpid(), w->index, (long long)sc_now_us());
    /* Blocked slots take room in the prefetch: half of it at most, the
     * other tenants have the rest. */
    int block_cap = k->prefetch / 2;
    long handled = 0;
    int64_t last_service_ms = sc_now_ms(), next_due = INT64_MAX;
    char err[512];
    while (!sc_stop_requested()) {
        int64_t now = sc_now_ms();
        if (now - last_service_ms > PUBLISHER_SERVICE_MS) {
            last_service_ms = now;
            if (sc_amqp_service(&w->out, err, sizeof err)) {
                sc_log(SC_LOG_WARN, &lf, "publisher connection lost: %s", err);
                break;
            }
        }
        sc_tenant_sweep(w, now);
        sc_tenant_gauges(w, 0);
        sc_order_block(&o, tenant_down, w, now);
        int n = sc_order_pick(&o, now, k->batch_max, idx, &next_due);
        int64_t retry = sc_tenant_next_retry_ms(w);
        if (retry < next_due)
            next_due = retry;
        int64_t wait = n ? 0 : next_due == INT64_MAX ? RECEIVE_POLL_MS : next_due - now;
        if (wait > RECEIVE_POLL_MS)
            wait = RECEIVE_POLL_MS;
        if (wait < 0)
            wait = 0;
        if (gather(w, &o, (int)wait))
            break;
        now = sc_now_ms();
        sc_order_block(&o, tenant_down, w, now);
        int at, failed = 0;
        while (!failed && (at = sc_order_return_due(&o, now, k->db_outage_hold_ms, block_cap)) >= 0)
            failed = tenant_round(w, &o, at, now);
        if (failed)
            break;
        n = sc_order_one_tenant(&o, idx, sc_order_pick(&o, now, k->batch_max, idx, &next_due));
        if (n == 0) {
            if (sc_worker_check_queues(w, 0))
                break;
            continue;
        }
        sc_worker_keep_alive(w);
        enum next next = run_tenant(w, &o, idx, &n);
        sc_batch_release(w);
        handled += n;
        if (sc_tenant_ack_flush(w)) {
            sc_log(SC_LOG_WARN, &lf, "acks could not be sent; the broker will redeliver");
            next = NEXT_RESET;
        }
        if (next == NEXT_RESET)
            break; /* closing the channel returns everything in hand */
        sc_order_after(&o, idx, w->dls, n, sc_now_ms(), drop_envelope);
    }
    memset(&w->db, 0, sizeof w->db); /* every session is the pool's */
    (void)sc_tenant_ack_flush(w);
    for (int i = 0; i < o.n; i++)
        amqp_destroy_envelope(&o.slots[i].env);
    sc_order_free(&o);
    free(idx);
    if (sc_stop_requested())
        sc_tenant_worker_free(w);
    return handled;
}
