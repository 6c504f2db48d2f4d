/* The consume loop of a consumer with tenants: each delivery's tenant is
 * read before it joins a batch, the deliveries in hand are grouped by
 * tenant, and each group runs as a batch of its own in that tenant's
 * database (batch.c, unchanged: same claims, savepoints, COMMIT and
 * settling). A group whose database cannot be used is parked in hand for
 * its tenant's backoff, while the other groups go on; what stays down past
 * db_outage_hold_ms, or does not fit the park, goes back to the broker
 * through a delay queue (tenant_pool.h). */
#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consume/batch_io.h"
#include "consume/order_tenants.h"
#include "consume/republish.h"
#include "consume/tenant_batch.h"
#include "consume/tenant_key.h"
#include "consume/tenant_pool.h"
#include "consume/worker.h"
#include "envelope/sidecar_headers.h"
#include "lifecycle.h"
#include "log.h"

#define RECEIVE_POLL_MS 200
#define NO_TENANT (-1)

/* The batch being gathered: the deliveries in w->dls and, by slot, what
 * the loop knows of each. */
struct gathered {
    int n, cap;         /* cap: prefetch (or batch_max when larger) */
    int *session;       /* the tenant's session entry, or NO_TENANT */
    int64_t *since_ms;  /* parked since (0: fresh) */
    int *kept;          /* parked again: its envelope moved, not destroyed */
    char (*why)[256];   /* a refused delivery's reason (d->refused points here) */
    char (*named)[SC_TENANT_MAX + 1]; /* a delivery dead-lettered without a database: the
                                         tenant its dead letter names, "" when unknown */
    struct delivery *tmp;
    int *order, *rank, *sess, *refused;
    int64_t *since;
};

static int gathered_init(struct gathered *g, int cap)
{
    memset(g, 0, sizeof *g);
    g->cap = cap;
    size_t n = (size_t)cap + 2; /* + 2: a count per group, groups <= cap + 1 */
    g->rank = calloc(n, sizeof *g->rank);
    g->sess = calloc(n, sizeof *g->sess);
    g->refused = calloc(n, sizeof *g->refused);
    g->since = calloc(n, sizeof *g->since);
    if (!g->rank || !g->sess || !g->refused || !g->since)
        return -1;
    g->session = calloc(n, sizeof *g->session);
    g->since_ms = calloc(n, sizeof *g->since_ms);
    g->kept = calloc(n, sizeof *g->kept);
    g->why = calloc(n, sizeof *g->why);
    g->named = calloc(n, sizeof *g->named);
    g->tmp = calloc(n, sizeof *g->tmp);
    g->order = calloc(n, sizeof *g->order);
    return g->session && g->since_ms && g->kept && g->why && g->named && g->tmp && g->order
               ? 0 : -1;
}

static void gathered_free(struct gathered *g)
{
    free(g->session);
    free(g->since_ms);
    free(g->kept);
    free(g->why);
    free(g->named);
    free(g->tmp);
    free(g->order);
    free(g->rank);
    free(g->sess);
    free(g->refused);
    free(g->since);
}

/* The delay before a tenant's returned delivery comes back: the consumer's
 * retry delay of the tenant's failures so far. */
static int return_delay(const struct worker *w, int i)
{
    const struct sc_consumer_config *k = w->c->k;
    unsigned f = i >= 0 ? w->tenant->sessions[i].failures : 1;
    size_t step = f > 0 ? f - 1 : 0;
    if (step >= k->n_retry_delays)
        step = k->n_retry_delays - 1;
    return k->retry_delays_ms[step];
}

/* Hands env back to the broker through the delay queue, its attempt count
 * as it came (an outage of its tenant's database is no attempt), and acks
 * it once the copy is confirmed. Returns 0, or -1 (the session is reset:
 * the broker returns it). */
static int give_back(struct worker *w, amqp_envelope_t *env, int i, const char *why)
{
    const struct sc_consumer_config *k = w->c->k;
    struct sc_log_fields lf = {.consumer = k->name, .delivery_tag = env->delivery_tag};
    int64_t attempt = sc_amqp_header_int(sc_delivery_headers(env), SC_H_ATTEMPTS, 1);
    if (attempt < 1 || attempt > 1000000)
        attempt = 1;
    int delay = return_delay(w, i);
    if (sc_republish_retry(&w->out, k, env, NULL, (int)attempt - 1, delay, why, &lf))
        return -1;
    sc_tenant_settled(w, env->delivery_tag);
    if (sc_amqp_ack(&w->in, env->delivery_tag, 0))
        return -1;
    atomic_fetch_add(&w->c->m.tenant_returned, 1);
    sc_log(SC_LOG_INFO, &lf, "tenant %s: %s; returned through the %d ms delay queue, attempt "
           "count unchanged", i >= 0 ? w->tenant->sessions[i].name : "?", why, delay);
    return 0;
}

/* Keeps the delivery of slot j in hand for its down tenant, or (no room,
 * or parked too long) gives it back. Returns 0, or -1 (reset). */
static int park(struct worker *w, struct gathered *g, int j)
{
    struct sc_tenant_worker *t = w->tenant;
    struct delivery *d = &w->dls[j];
    int64_t now = sc_now_ms(), since = g->since_ms[j] ? g->since_ms[j] : now;
    int hold_ms = w->c->k->db_outage_hold_ms;
    if (now - since >= hold_ms || t->n_parked >= t->park_cap) {
        if (give_back(w, &d->env, g->session[j], now - since >= hold_ms
                          ? "its database could not be used for db_outage_hold_ms"
                          : "its database cannot be used and the deliveries in hand fill half "
                            "the prefetch"))
            return -1;
        return 0; /* acked: destroyed with the batch */
    }
    t->parked[t->n_parked++] = (struct sc_parked){.env = d->env, .received_us = d->received_us,
                                                  .since_ms = since, .session = g->session[j]};
    g->kept[j] = 1;
    return 0;
}

/* A slot made ready for a delivery: every field of the batch's fresh. */
static void slot_clear(struct gathered *g, struct delivery *d, int j)
{
    memset(d, 0, sizeof *d);
    g->session[j] = NO_TENANT;
    g->since_ms[j] = 0;
    g->kept[j] = 0;
    g->why[j][0] = 0;
    g->named[j][0] = 0;
}

/* Takes the parked deliveries whose tenant may be tried again into the
 * batch, and gives back those parked past db_outage_hold_ms. Returns 0, or
 * -1 (reset). */
static int take_parked(struct worker *w, struct gathered *g, int64_t now)
{
    struct sc_tenant_worker *t = w->tenant;
    int hold_ms = w->c->k->db_outage_hold_ms;
    for (int j = 0; j < t->n_parked;) {
        struct sc_parked *p = &t->parked[j];
        int expired = now - p->since_ms >= hold_ms;
        int due = !sc_tenant_down(w, p->session, now);
        if (!expired && (!due || g->n >= g->cap)) {
            j++;
            continue;
        }
        if (expired) {
            if (give_back(w, &p->env, p->session, "its database could not be used for "
                          "db_outage_hold_ms"))
                return -1;
            amqp_destroy_envelope(&p->env);
        } else {
            struct delivery *d = &w->dls[g->n];
            slot_clear(g, d, g->n);
            d->env = p->env;
            d->received_us = p->received_us;
            g->session[g->n] = p->session;
            g->since_ms[g->n] = p->since_ms;
            g->n++;
        }
        t->parked[j] = t->parked[--t->n_parked];
    }
    return 0;
}

/* Reads the tenant of fresh slot j. */
static void classify(struct worker *w, struct gathered *g, int j)
{
    struct delivery *d = &w->dls[j];
    char name[SC_TENANT_MAX + 1];
    enum sc_tenant_kind kind = sc_tenant_read(&w->c->cfg->tenants, &w->tenant->names, w->c->k,
                                              &d->env, name, g->why[j], sizeof g->why[j]);
    if (kind == SC_TENANT_REFUSED)
        d->refused = g->why[j];
    else if (kind == SC_TENANT_FOUND && (g->session[j] = sc_tenant_session_of(w, name)) < 0) {
        snprintf(g->why[j], sizeof g->why[j], "out of memory for tenant %s", name);
        d->refused = g->why[j]; /* never dropped: the DLQ keeps it */
    }
    if (kind != SC_TENANT_REFUSED && g->session[j] == NO_TENANT)
        snprintf(g->named[j], sizeof g->named[j], "%s", name); /* malformed: "" unless read */
}

/* Sorts the batch's slots by tenant, the order within each kept (arrival
 * order per tenant); deliveries without a tenant first, then each tenant
 * in the order it was first seen. */
static void group(struct worker *w, struct gathered *g)
{
    int n = g->n;
    int *rank = g->rank, *sess = g->sess, *refused = g->refused;
    int64_t *since = g->since;
    /* rank: a dense group number (0: no tenant, then tenants in the order
     * first seen); a counting sort keeps arrival order within a group and
     * costs O(n), whatever the mix of tenants. */
    struct sc_tenant_worker *t = w->tenant;
    int groups = 1;
    for (int j = 0; j < n; j++) {
        if (g->session[j] == NO_TENANT) {
            rank[j] = 0;
            continue;
        }
        struct sc_tenant_session *s = &t->sessions[g->session[j]];
        if (s->group_round != t->group_round) {
            s->group_round = t->group_round;
            s->group_mark = groups++;
        }
        rank[j] = s->group_mark;
    }
    if (++t->group_round == 0)
        t->group_round = 1; /* 0 is a new session's */
    int *start = refused; /* reused as the count per group, then the next free place */
    memset(start, 0, (size_t)(groups + 1) * sizeof *start);
    for (int j = 0; j < n; j++)
        start[rank[j] + 1]++;
    for (int r = 1; r <= groups; r++)
        start[r] += start[r - 1];
    for (int j = 0; j < n; j++)
        g->order[start[rank[j]]++] = j;
    char (*why)[256] = malloc((size_t)n * sizeof *why);
    char (*named)[SC_TENANT_MAX + 1] = malloc((size_t)n * sizeof *named);
    for (int x = 0; x < n; x++) {
        int j = g->order[x];
        g->tmp[x] = w->dls[j];
        sess[x] = g->session[j];
        since[x] = g->since_ms[j];
        refused[x] = w->dls[j].refused != NULL;
        if (why)
            memcpy(why[x], g->why[j], sizeof why[x]);
        if (named)
            memcpy(named[x], g->named[j], sizeof named[x]);
    }
    for (int x = 0; x < n; x++) {
        w->dls[x] = g->tmp[x];
        g->session[x] = sess[x];
        g->since_ms[x] = since[x];
        g->kept[x] = 0;
        if (why)
            memcpy(g->why[x], why[x], sizeof why[x]);
        if (named)
            memcpy(g->named[x], named[x], sizeof named[x]);
        else
            g->named[x][0] = 0; /* out of memory: no tenant named, never the wrong one */
        /* The reasons moved with their deliveries. */
        w->dls[x].refused = refused[x] ? g->why[x] : NULL;
    }
    free(why);
    free(named);
}

/* Runs the group of slots [a, b) of tenant session i (or none). Returns
 * the loop's next step; parked slots are marked kept. */
static enum next run_group(struct worker *w, struct gathered *g, int a, int b)
{
    int i = g->session[a], n = b - a;
    struct delivery *dls = &w->dls[a];
    if (i == NO_TENANT) {
        /* Refused, malformed or too large: dead-lettered, no database,
         * the dead letter naming the tenant when it could be read. */
        for (int j = 0; j < n; j++)
            dls[j].tenant = g->named[a + j][0] ? g->named[a + j] : NULL;
        memset(&w->db, 0, sizeof w->db);
        w->db_urls = NULL;
        return sc_batch_process(w, dls, n);
    }
    for (int j = 0; j < n; j++)
        dls[j].tenant = w->tenant->sessions[i].name;
    struct sc_db_err e = {0};
    int64_t now = sc_now_ms();
    int opened = sc_tenant_down(w, i, now) ? -1 : sc_tenant_enter(w, i, &e);
    enum next next = NEXT_DB_HOLD;
    if (opened >= 0) {
        next = sc_tenant_batch(w, dls, n, opened);
        sc_tenant_batch_leave(w, i, next);
    }
    if (next != NEXT_DB_HOLD)
        return next == NEXT_RESET ? NEXT_RESET : NEXT_CONTINUE;
    /* Nothing of the group is settled and every delivery is in hand. */
    for (int j = a; j < b; j++)
        if (park(w, g, j))
            return NEXT_RESET;
    return NEXT_CONTINUE;
}

int sc_tenant_in_hand(const struct sc_consumer_config *k)
{
    return k->prefetch > k->batch_max ? k->prefetch : k->batch_max;
}

static int total_workers(const struct sc_config *cfg)
{
    int n = 0;
    for (size_t i = 0; i < cfg->n_consumers; i++)
        n += cfg->consumers[i].workers;
    return n;
}

/* Receives into the batch after what was taken from the park: waits up to
 * wait_ms for the first, then takes what is already waiting. Returns -1
 * when the session must end. */
static int receive(struct worker *w, struct gathered *g, int wait_ms, int *cancelled, char *cancel,
                   size_t cancel_len)
{
    const struct sc_consumer_config *k = w->c->k;
    struct sc_log_fields lf = {.consumer = k->name};
    char err[512] = "";
    size_t bytes = 0;
    for (int j = 0; j < g->n; j++)
        bytes += w->dls[j].env.message.body.len;
    while (g->n < g->cap && bytes < (size_t)k->max_message_bytes &&
           !(g->n > 0 && sc_batch_ends_gathering(w, &w->dls[g->n - 1].env))) {
        struct delivery *d = &w->dls[g->n];
        slot_clear(g, d, g->n);
        enum sc_amqp_recv r = sc_amqp_receive(&w->in, &d->env, g->n ? 0 : wait_ms, err,
                                              sizeof err);
        if (r == SC_AMQP_RECV_CLOSED) {
            sc_log(SC_LOG_WARN, &lf, "broker connection lost: %s", err);
            return -1;
        }
        if (r == SC_AMQP_RECV_CANCELLED) {
            *cancelled = 1;
            snprintf(cancel, cancel_len, "%s", err);
            return 0;
        }
        if (r == SC_AMQP_RECV_TIMEOUT)
            return 0;
        d->received_us = sc_now_us();
        w->last_delivery_ms = sc_now_ms();
        bytes += d->env.message.body.len;
        classify(w, g, g->n);
        g->n++;
    }
    return 0;
}

/* The deliveries of a fresh tenant that is down join the park at once:
 * no session is tried for them before the tenant's backoff passes. */
long sc_consume_tenants(struct worker *w)
{
    const struct sc_consumer_config *k = w->c->k;
    struct sc_log_fields lf = {.consumer = k->name};
    struct gathered g = {0};
    long handled = 0;
    if (k->ordering.present) {
        /* Its sessions and copies out outlive the broker session. */
        if (!w->tenant && sc_tenant_worker_init(w, total_workers(w->c->cfg))) {
            sc_log(SC_LOG_ERROR, &lf, "tenants: out of memory");
            return 0;
        }
        return sc_consume_ordered_tenants(w);
    }
    if ((!w->tenant && sc_tenant_worker_init(w, total_workers(w->c->cfg))) ||
        gathered_init(&g, sc_tenant_in_hand(k))) {
        sc_log(SC_LOG_ERROR, &lf, "tenants: out of memory");
        gathered_free(&g);
        return 0;
    }
    int64_t last_service_ms = sc_now_ms();
    while (!sc_stop_requested()) {
        char cancel[512] = "";
        int cancelled = 0;
        int64_t now = sc_now_ms();
        if (sc_worker_service_publisher(w, &last_service_ms))
            break;
        sc_tenant_sweep(w, now);
        sc_tenant_gauges(w, 0, NULL);
        g.n = 0;
        if (take_parked(w, &g, now))
            break;
        int64_t next_retry = sc_tenant_next_retry_ms(w) - now;
        int wait_ms = next_retry < RECEIVE_POLL_MS ? (int)(next_retry > 0 ? next_retry : 0)
                                                   : RECEIVE_POLL_MS;
        if (receive(w, &g, wait_ms, &cancelled, cancel, sizeof cancel))
            break;
        if (g.n == 0) {
            if (cancelled) {
                sc_log(SC_LOG_WARN, &lf, "%s: consuming again with a new session", cancel);
                break;
            }
            if (sc_worker_check_queues(w, 0))
                break;
            continue;
        }
        group(w, &g);
        enum next next = NEXT_CONTINUE;
        for (int a = 0; a < g.n && next == NEXT_CONTINUE;) {
            /* One tenant's run of deliveries, batch_max at a time: the
             * deliveries in hand are the whole prefetch, so a tenant's
             * batch takes all of its own that are waiting. */
            int b = a + 1;
            while (b < g.n && b - a < k->batch_max && g.session[b] == g.session[a])
                b++;
            /* A round opens sessions (a connect may take connect_timeout_s):
             * heartbeats between groups too. */
            sc_worker_keep_alive(w);
            if (g.session[a] != NO_TENANT && sc_tenant_down(w, g.session[a], sc_now_ms())) {
                for (int j = a; j < b && next == NEXT_CONTINUE; j++)
                    if (park(w, &g, j))
                        next = NEXT_RESET;
            } else {
                next = run_group(w, &g, a, b);
            }
            sc_batch_release(w);
            a = b;
        }
        if (sc_tenant_ack_flush(w)) {
            sc_log(SC_LOG_WARN, &lf, "acks could not be sent; the broker will redeliver");
            next = NEXT_RESET;
        }
        for (int j = 0; j < g.n; j++)
            if (!g.kept[j])
                amqp_destroy_envelope(&w->dls[j].env);
        handled += g.n;
        /* A round of the whole prefetch can take seconds: the worker was
         * busy, not starved (sc_worker_check_queues reads silence as a
         * consumer gone from the queue). */
        w->last_delivery_ms = sc_now_ms();
        w->waiting_checks = 0; /* it received since the last check */
        if (next == NEXT_RESET)
            break;
        if (cancelled) {
            sc_log(SC_LOG_WARN, &lf, "%s: consuming again with a new session", cancel);
            break;
        }
    }
    memset(&w->db, 0, sizeof w->db); /* every session is the pool's */
    if (w->tenant)
        (void)sc_tenant_ack_flush(w); /* what was committed: repeats otherwise */
    sc_tenant_worker_free(w);
    gathered_free(&g);
    return handled;
}
