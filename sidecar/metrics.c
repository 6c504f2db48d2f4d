#include "metrics.h"
#include "metrics_out.h"

#include "io/db_durability.h"
#include "otel.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const double sc_seconds_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                    0.25,   0.5,   1,      2.5,   5,    10};
const int sc_seconds_n = sizeof sc_seconds_bounds / sizeof *sc_seconds_bounds;
const double sc_batch_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000};
const int sc_batch_n = sizeof sc_batch_bounds / sizeof *sc_batch_bounds;

/* What the process runs, as many as the config has: the tables grow (a
 * fixed size dropped consumers past the 64th and endpoints past the 256th
 * from /metrics and /readyz without a word). Written at start and on
 * connect, read per scrape: one mutex each. */
static struct sc_consumer_metrics **consumers;
static size_t n_consumers, cap_consumers;
static struct sc_relay_metrics *relay;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

/* Grows *arr (elements of size) to hold n + 1. Returns 0, or -1 when out of
 * memory (the array is unchanged). */
static int grow(void **arr, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return 0;
    size_t want = *cap ? *cap * 2 : 16;
    void *p = realloc(*arr, want * size);
    if (!p)
        return -1;
    *arr = p;
    *cap = want;
    return 0;
}

/* Which node each connection is on. Slots are keyed by (thread, server,
 * name): a worker's database connection is named after the thread, whose
 * name is the first AMQP connection name it opened (known by the time
 * anyone scrapes). Written only on connect, so one mutex is enough. */
struct endpoint_slot {
    pthread_t thread;
    char server[8];
    char name[160];      /* "" for a database connection: the thread's name */
    char endpoint[160];
    int node;
};
static struct endpoint_slot *endpoints;
static size_t n_endpoints, cap_endpoints;
struct thread_name {
    pthread_t thread;
    char name[160];
};
static struct thread_name *thread_names;
static size_t n_thread_names, cap_thread_names;
static pthread_mutex_t endpoints_lock = PTHREAD_MUTEX_INITIALIZER;

void sc_metrics_endpoint(const char *name, const char *server, int node, const char *endpoint)
{
    pthread_t self = pthread_self();
    pthread_mutex_lock(&endpoints_lock);
    if (name) {
        size_t t = 0;
        while (t < n_thread_names && !pthread_equal(thread_names[t].thread, self))
            t++;
        if (t == n_thread_names &&
            grow((void **)&thread_names, &cap_thread_names, n_thread_names, sizeof *thread_names) == 0) {
            thread_names[t].thread = self;
            snprintf(thread_names[t].name, sizeof thread_names[t].name, "%s", name);
            n_thread_names++;
        }
    }
    size_t i = 0;
    while (i < n_endpoints &&
           !(pthread_equal(endpoints[i].thread, self) && strcmp(endpoints[i].server, server) == 0 &&
             strcmp(endpoints[i].name, name ? name : "") == 0))
        i++;
    if (i < n_endpoints ||
        grow((void **)&endpoints, &cap_endpoints, n_endpoints, sizeof *endpoints) == 0) {
        if (i == n_endpoints)
            n_endpoints++;
        struct endpoint_slot *e = &endpoints[i];
        e->thread = self;
        snprintf(e->server, sizeof e->server, "%s", server);
        snprintf(e->name, sizeof e->name, "%s", name ? name : "");
        snprintf(e->endpoint, sizeof e->endpoint, "%s", endpoint);
        e->node = node;
    }
    pthread_mutex_unlock(&endpoints_lock);
}

/* The durability finding of each database node checked, kept by node: the
 * one place the gauge is set. */
struct durability_slot {
    int node;
    char endpoint[160];
    unsigned unsafe;
};
static struct durability_slot *durability;
static size_t n_durability, cap_durability;
static atomic_ullong durability_refused[SC_DUR_COUNT];
static pthread_mutex_t durability_lock = PTHREAD_MUTEX_INITIALIZER;

long sc_metrics_durability(int node, const char *endpoint, unsigned unsafe)
{
    long previous = -1;
    pthread_mutex_lock(&durability_lock);
    size_t i = 0;
    while (i < n_durability && durability[i].node != node)
        i++;
    if (i < n_durability)
        previous = (long)durability[i].unsafe;
    if (i < n_durability ||
        grow((void **)&durability, &cap_durability, n_durability, sizeof *durability) == 0) {
        if (i == n_durability)
            n_durability++;
        durability[i].node = node;
        snprintf(durability[i].endpoint, sizeof durability[i].endpoint, "%s", endpoint);
        durability[i].unsafe = unsafe;
    }
    pthread_mutex_unlock(&durability_lock);
    return previous;
}

void sc_metrics_durability_refused(unsigned unsafe)
{
    for (int k = 0; k < SC_DUR_COUNT; k++)
        if (unsafe & (1u << k))
            atomic_fetch_add(&durability_refused[k], 1);
}

void sc_hist_init(struct sc_hist *h, const double *bounds, int n)
{
    memset(h, 0, sizeof *h);
    h->bounds = bounds;
    h->n = n < SC_HIST_MAX_BUCKETS ? n : SC_HIST_MAX_BUCKETS;
}

void sc_hist_observe(struct sc_hist *h, double v)
{
    int i = 0;
    while (i < h->n && v > h->bounds[i])
        i++;
    if (i < h->n)
        atomic_fetch_add(&h->buckets[i], 1); /* cumulated when rendered */
    atomic_fetch_add(&h->count, 1);
    atomic_fetch_add(&h->sum_micro, (unsigned long long)(v * 1e6 + 0.5));
}

void sc_consumer_metrics_init(struct sc_consumer_metrics *m, const char *name, int workers)
{
    memset(m, 0, sizeof *m);
    m->name = name;
    m->workers = workers;
    sc_hist_init(&m->batch_size, sc_batch_bounds, sc_batch_n);
    sc_hist_init(&m->receive_to_commit, sc_seconds_bounds, sc_seconds_n);
    sc_hist_init(&m->handler_seconds, sc_seconds_bounds, sc_seconds_n);
    sc_hist_init(&m->commit_seconds, sc_seconds_bounds, sc_seconds_n);
    sc_tenant_series_init(&m->waiting, 0);
}

void sc_relay_metrics_init(struct sc_relay_metrics *m, const char *worker_id)
{
    memset(m, 0, sizeof *m);
    m->worker_id = worker_id;
    sc_hist_init(&m->confirm_seconds, sc_seconds_bounds, sc_seconds_n);
    sc_hist_init(&m->batch_size, sc_batch_bounds, sc_batch_n);
    atomic_store(&m->pending, -1);
    atomic_store(&m->oldest_pending_age_ms, -1);
    atomic_store(&m->binlog_lag_ms, -1);
    atomic_store(&m->binlog_lag_bytes, -1);
    atomic_store(&m->held_aggregates, -1);
    atomic_store(&m->tenants, -1);
    sc_tenant_series_init(&m->backlog, 0);
}

int sc_metrics_register_consumer(struct sc_consumer_metrics *m)
{
    pthread_mutex_lock(&registry_lock);
    int rc = grow((void **)&consumers, &cap_consumers, n_consumers, sizeof *consumers);
    if (rc == 0)
        consumers[n_consumers++] = m;
    pthread_mutex_unlock(&registry_lock);
    return rc;
}

void sc_metrics_register_relay(struct sc_relay_metrics *m)
{
    pthread_mutex_lock(&registry_lock);
    relay = m;
    pthread_mutex_unlock(&registry_lock);
}

void sc_metrics_reset(void)
{
    pthread_mutex_lock(&registry_lock);
    free(consumers);
    consumers = NULL;
    n_consumers = cap_consumers = 0;
    relay = NULL;
    pthread_mutex_unlock(&registry_lock);
    pthread_mutex_lock(&endpoints_lock);
    free(endpoints);
    free(thread_names);
    endpoints = NULL;
    thread_names = NULL;
    n_endpoints = cap_endpoints = n_thread_names = cap_thread_names = 0;
    pthread_mutex_unlock(&endpoints_lock);
    pthread_mutex_lock(&durability_lock);
    free(durability);
    durability = NULL;
    n_durability = cap_durability = 0;
    for (int k = 0; k < SC_DUR_COUNT; k++)
        atomic_store(&durability_refused[k], 0);
    pthread_mutex_unlock(&durability_lock);
}

static void hist(struct sc_metrics_out *o, const char *name, const char *labels, const struct sc_hist *h)
{
    unsigned long long cum = 0;
    for (int i = 0; i < h->n; i++) {
        cum += atomic_load(&h->buckets[i]);
        sc_metrics_emit(o, "%s_bucket{%s,le=\"%g\"} %llu\n", name, labels, h->bounds[i], cum);
    }
    unsigned long long count = atomic_load(&h->count);
    sc_metrics_emit(o, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, labels, count);
    sc_metrics_emit(o, "%s_sum{%s} %.6f\n", name, labels, (double)atomic_load(&h->sum_micro) / 1e6);
    sc_metrics_emit(o, "%s_count{%s} %llu\n", name, labels, count);
}

static const char *const outcome_names[SC_OUT_COUNT] = {"applied", "duplicate", "retried",
                                                        "dead_lettered", "unknown", "malformed"};

char *sc_metrics_render(void)
{
    struct sc_metrics_out o = {malloc(8192), 0, 8192};
    if (!o.p)
        return NULL;
    o.p[0] = 0;
    pthread_mutex_lock(&registry_lock);
    int n = (int)n_consumers;
    char e[300], lab[400];
    if (n > 0) {
        sc_metrics_emit(&o, "# HELP sidecar_messages_total Deliveries handled, by outcome.\n"
                 "# TYPE sidecar_messages_total counter\n");
        for (int i = 0; i < n; i++)
            for (int k = 0; k < SC_OUT_COUNT; k++)
                sc_metrics_emit(&o, "sidecar_messages_total{consumer=\"%s\",outcome=\"%s\"} %llu\n",
                     sc_metrics_esc(consumers[i]->name, e, sizeof e), outcome_names[k],
                     atomic_load(&consumers[i]->outcomes[k]));
        static const struct {
            const char *name, *help;
            size_t off;
        } hs[] = {
            {"sidecar_batch_size", "Deliveries per transaction.",
             offsetof(struct sc_consumer_metrics, batch_size)},
            {"sidecar_receive_to_commit_seconds", "From receiving a delivery to its COMMIT.",
             offsetof(struct sc_consumer_metrics, receive_to_commit)},
            {"sidecar_handler_seconds", "Time in the handler per call.",
             offsetof(struct sc_consumer_metrics, handler_seconds)},
            {"sidecar_commit_seconds", "Time of COMMIT.",
             offsetof(struct sc_consumer_metrics, commit_seconds)},
        };
        for (size_t j = 0; j < sizeof hs / sizeof *hs; j++) {
            sc_metrics_emit(&o, "# HELP %s %s\n# TYPE %s histogram\n", hs[j].name, hs[j].help, hs[j].name);
            for (int i = 0; i < n; i++) {
                snprintf(lab, sizeof lab, "consumer=\"%s\"", sc_metrics_esc(consumers[i]->name, e, sizeof e));
                hist(&o, hs[j].name, lab, (const struct sc_hist *)((const char *)consumers[i] + hs[j].off));
            }
        }
        sc_metrics_emit(&o, "# HELP sidecar_workers Worker threads configured.\n# TYPE sidecar_workers gauge\n");
        for (int i = 0; i < n; i++)
            sc_metrics_emit(&o, "sidecar_workers{consumer=\"%s\"} %d\n", sc_metrics_esc(consumers[i]->name, e, sizeof e),
                 consumers[i]->workers);
        sc_metrics_emit(&o, "# HELP sidecar_connected Workers connected, by server.\n# TYPE sidecar_connected gauge\n");
        for (int i = 0; i < n; i++) {
            sc_metrics_esc(consumers[i]->name, e, sizeof e);
            sc_metrics_emit(&o, "sidecar_connected{consumer=\"%s\",server=\"mysql\"} %d\n", e,
                 atomic_load(&consumers[i]->db_connected));
            sc_metrics_emit(&o, "sidecar_connected{consumer=\"%s\",server=\"amqp\"} %d\n", e,
                 atomic_load(&consumers[i]->amqp_connected));
        }
        sc_metrics_emit(&o, "# HELP sidecar_consuming Workers consuming.\n# TYPE sidecar_consuming gauge\n");
        for (int i = 0; i < n; i++)
            sc_metrics_emit(&o, "sidecar_consuming{consumer=\"%s\"} %d\n", sc_metrics_esc(consumers[i]->name, e, sizeof e),
                 atomic_load(&consumers[i]->consuming));
        sc_metrics_emit(&o, "# HELP sidecar_consumer_cancelled_total Consumers the broker cancelled (queue "
                 "deleted), each declared and consuming again.\n"
                 "# TYPE sidecar_consumer_cancelled_total counter\n");
        for (int i = 0; i < n; i++)
            sc_metrics_emit(&o, "sidecar_consumer_cancelled_total{consumer=\"%s\"} %llu\n",
                 sc_metrics_esc(consumers[i]->name, e, sizeof e), atomic_load(&consumers[i]->cancelled));
        sc_metrics_emit(&o, "# HELP sidecar_consumer_queue_lost_total Times a worker's own check found its "
                 "queue gone, or not consumed by it, with no cancel from the broker; the session "
                 "was made again, which declares the queue and consumes again.\n"
                 "# TYPE sidecar_consumer_queue_lost_total counter\n");
        for (int i = 0; i < n; i++)
            sc_metrics_emit(&o, "sidecar_consumer_queue_lost_total{consumer=\"%s\"} %llu\n",
                 sc_metrics_esc(consumers[i]->name, e, sizeof e), atomic_load(&consumers[i]->queue_lost));
        sc_metrics_render_consumer_tenants(&o, consumers, n);
        sc_metrics_emit(&o, "# HELP sidecar_consumer_version_breaks_total Ordered consumers: events applied "
                 "whose eventversion was not their key's last applied + 1 (gap: higher, "
                 "regression: not higher).\n"
                 "# TYPE sidecar_consumer_version_breaks_total counter\n");
        for (int i = 0; i < n; i++)
            for (int g = 0; g < 2; g++)
                sc_metrics_emit(&o, "sidecar_consumer_version_breaks_total{consumer=\"%s\",kind=\"%s\"} "
                     "%llu\n", sc_metrics_esc(consumers[i]->name, e, sizeof e), g ? "regression" : "gap",
                     atomic_load(&consumers[i]->version_breaks[g]));
    }
    if (relay) {
        struct sc_relay_metrics *r = relay;
        snprintf(lab, sizeof lab, "worker=\"%s\"", sc_metrics_esc(r->worker_id, e, sizeof e));
        const struct {
            const char *name, *help;
            atomic_ullong *v;
        } counters[] = {
            {"sidecar_relay_published_total", "Events confirmed by the broker and marked PUBLISHED.", &r->published},
            {"sidecar_relay_lease_lost_total", "Confirmed events whose lease another worker held at marking.", &r->lease_lost},
            {"sidecar_relay_returned_total", "Unroutable events (basic.return).", &r->returned},
            {"sidecar_relay_nacked_total", "Events nacked by the broker.", &r->nacked},
            {"sidecar_relay_unconfirmed_total", "Events without a confirm in time.", &r->unconfirmed},
            {"sidecar_relay_claim_failed_total", "Claim transactions that failed (retried with backoff).", &r->claim_failed},
            {"sidecar_relay_invalid_total", "Outbox rows refused as invalid CloudEvents and marked FAILED.", &r->invalid},
            {"sidecar_relay_claims_total", "Claim transactions run (with tenants: one per tenant database claimed from).", &r->claims},
        };
        for (size_t k = 0; k < sizeof counters / sizeof *counters; k++)
            sc_metrics_emit(&o, "# HELP %s %s\n# TYPE %s counter\n%s{%s} %llu\n", counters[k].name,
                 counters[k].help, counters[k].name, counters[k].name, lab,
                 atomic_load(counters[k].v));
        sc_metrics_emit(&o, "# HELP sidecar_relay_confirm_seconds From publishing a batch to its last confirm.\n"
                 "# TYPE sidecar_relay_confirm_seconds histogram\n");
        hist(&o, "sidecar_relay_confirm_seconds", lab, &r->confirm_seconds);
        sc_metrics_emit(&o, "# HELP sidecar_relay_batch_size Rows per claim.\n# TYPE sidecar_relay_batch_size histogram\n");
        hist(&o, "sidecar_relay_batch_size", lab, &r->batch_size);
        long long pending = atomic_load(&r->pending), age = atomic_load(&r->oldest_pending_age_ms);
        if (pending >= 0) {
            sc_metrics_emit(&o, "# HELP sidecar_relay_pending Outbox rows not yet PUBLISHED (cached, refreshed every few seconds).\n"
                     "# TYPE sidecar_relay_pending gauge\nsidecar_relay_pending{%s} %lld\n", lab, pending);
            sc_metrics_emit(&o, "# HELP sidecar_relay_oldest_pending_age_seconds Age of the oldest row not yet PUBLISHED.\n"
                     "# TYPE sidecar_relay_oldest_pending_age_seconds gauge\n"
                     "sidecar_relay_oldest_pending_age_seconds{%s} %.3f\n", lab, age > 0 ? (double)age / 1000 : 0.0);
        }
        long long lag_ms = atomic_load(&r->binlog_lag_ms), lag_bytes = atomic_load(&r->binlog_lag_bytes);
        if (lag_bytes >= 0) {
            sc_metrics_emit(&o, "# HELP sidecar_relay_binlog_lag_seconds relay.source binlog: commit time of the "
                     "checkpoint behind now, 0 when it is at the server's end.\n"
                     "# TYPE sidecar_relay_binlog_lag_seconds gauge\n"
                     "sidecar_relay_binlog_lag_seconds{%s} %.3f\n", lab, lag_ms > 0 ? (double)lag_ms / 1000 : 0.0);
            sc_metrics_emit(&o, "# HELP sidecar_relay_binlog_lag_bytes relay.source binlog: bytes of binary log "
                     "between the checkpoint and the server's end.\n"
                     "# TYPE sidecar_relay_binlog_lag_bytes gauge\nsidecar_relay_binlog_lag_bytes{%s} %lld\n",
                 lab, lag_bytes);
        }
        long long held = atomic_load(&r->held_aggregates);
        if (held >= 0)
            sc_metrics_emit(&o, "# HELP sidecar_relay_held_aggregates Aggregates with a FAILED row: relay.ordering "
                     "per_aggregate publishes none of their other events until it is repaired.\n"
                     "# TYPE sidecar_relay_held_aggregates gauge\nsidecar_relay_held_aggregates{%s} %lld\n",
                 lab, held);
        sc_metrics_render_relay_tenants(&o, r, lab);
        sc_metrics_emit(&o, "# HELP sidecar_relay_connected Connected to the server.\n# TYPE sidecar_relay_connected gauge\n"
                 "sidecar_relay_connected{%s,server=\"mysql\"} %d\nsidecar_relay_connected{%s,server=\"amqp\"} %d\n",
             lab, atomic_load(&r->db_connected), lab, atomic_load(&r->amqp_connected));
    }
    pthread_mutex_unlock(&registry_lock);
    unsigned long long exported, dropped, failed;
    if (sc_otel_counters(&exported, &dropped, &failed))
        sc_metrics_emit(&o, "# HELP sidecar_otel_spans_exported_total Spans the collector took (HTTP 2xx).\n"
                 "# TYPE sidecar_otel_spans_exported_total counter\nsidecar_otel_spans_exported_total %llu\n"
                 "# HELP sidecar_otel_spans_dropped_total Spans dropped: the queue was full or the "
                 "collector did not take them.\n# TYPE sidecar_otel_spans_dropped_total counter\n"
                 "sidecar_otel_spans_dropped_total %llu\n"
                 "# HELP sidecar_otel_export_failures_total Export requests that failed.\n"
                 "# TYPE sidecar_otel_export_failures_total counter\n"
                 "sidecar_otel_export_failures_total %llu\n", exported, dropped, failed);
    pthread_mutex_lock(&endpoints_lock);
    if (n_endpoints > 0)
        sc_metrics_emit(&o, "# HELP sidecar_endpoint Which cluster node each connection was last opened to "
                 "(node = index in the configured URL list).\n# TYPE sidecar_endpoint gauge\n");
    for (size_t i = 0; i < n_endpoints; i++) {
        const struct endpoint_slot *ep = &endpoints[i];
        const char *worker = ep->name;
        char fallback[32], ee[200];
        if (!worker[0]) {
            snprintf(fallback, sizeof fallback, "thread %zu", i);
            worker = fallback;
            for (size_t t = 0; t < n_thread_names; t++)
                if (pthread_equal(thread_names[t].thread, ep->thread))
                    worker = thread_names[t].name;
        }
        sc_metrics_emit(&o, "sidecar_endpoint{worker=\"%s\",server=\"%s\",node=\"%d\",endpoint=\"%s\"} 1\n",
             sc_metrics_esc(worker, e, sizeof e), ep->server, ep->node, sc_metrics_esc(ep->endpoint, ee, sizeof ee));
    }
    pthread_mutex_unlock(&endpoints_lock);
    pthread_mutex_lock(&durability_lock);
    if (n_durability > 0) {
        sc_metrics_emit(&o, "# HELP sidecar_unsafe_durability 1 for each setting the last check of a database "
                 "node found not durable (a COMMIT it acknowledged can be lost in a crash), 0 once "
                 "it is durable.\n# TYPE sidecar_unsafe_durability gauge\n");
        for (size_t i = 0; i < n_durability; i++)
            for (int k = 0; k < SC_DUR_COUNT; k++)
                sc_metrics_emit(&o, "sidecar_unsafe_durability{setting=\"%s\",node=\"%d\",endpoint=\"%s\"} %d\n",
                     sc_dur_setting_names[k], durability[i].node,
                     sc_metrics_esc(durability[i].endpoint, e, sizeof e), (int)((durability[i].unsafe >> k) & 1u));
        sc_metrics_emit(&o, "# HELP sidecar_durability_refused_total Database sessions refused because their "
                 "node was not durable (mysql.allow_unsafe_durability false).\n"
                 "# TYPE sidecar_durability_refused_total counter\n");
        for (int k = 0; k < SC_DUR_COUNT; k++)
            sc_metrics_emit(&o, "sidecar_durability_refused_total{setting=\"%s\"} %llu\n", sc_dur_setting_names[k],
                 atomic_load(&durability_refused[k]));
    }
    pthread_mutex_unlock(&durability_lock);
    return o.p;
}

int sc_metrics_ready(char *why, size_t why_len)
{
    int ready = 1;
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < n_consumers && ready; i++) {
        struct sc_consumer_metrics *m = consumers[i];
        if (atomic_load(&m->consuming) < m->workers) {
            snprintf(why, why_len, "consumer %s: %d of %d workers consuming (mysql %d, amqp %d)",
                     m->name, atomic_load(&m->consuming), m->workers,
                     atomic_load(&m->db_connected), atomic_load(&m->amqp_connected));
            ready = 0;
        }
    }
    if (ready && relay && (!atomic_load(&relay->db_connected) || !atomic_load(&relay->amqp_connected))) {
        snprintf(why, why_len, "relay %s: mysql %s, amqp %s", relay->worker_id,
                 atomic_load(&relay->db_connected) ? "connected" : "down",
                 atomic_load(&relay->amqp_connected) ? "connected" : "down");
        ready = 0;
    }
    if (ready && n_consumers == 0 && !relay) {
        snprintf(why, why_len, "nothing running");
        ready = 0;
    }
    pthread_mutex_unlock(&registry_lock);
    if (ready)
        snprintf(why, why_len, "ready");
    return ready;
}
