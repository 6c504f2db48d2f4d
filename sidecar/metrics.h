/* In-process metrics: counters, gauges and histograms updated with atomics
 * by the workers, rendered in the Prometheus text format by the HTTP server. */
#ifndef SC_METRICS_H
#define SC_METRICS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#define SC_HIST_MAX_BUCKETS 16

struct sc_hist {
    const double *bounds;   /* upper bounds, ascending; +Inf is implied */
    int n;
    atomic_ullong buckets[SC_HIST_MAX_BUCKETS];
    atomic_ullong count;
    atomic_ullong sum_micro; /* sum of observations x 1e6 */
};

extern const double sc_seconds_bounds[];
extern const int sc_seconds_n;
extern const double sc_batch_bounds[];
extern const int sc_batch_n;

void sc_hist_init(struct sc_hist *h, const double *bounds, int n);
void sc_hist_observe(struct sc_hist *h, double value);

/* A value per tenant, of which /metrics shows only the top_n largest:
 * the label's cardinality stays bounded whatever the number of tenants,
 * and a tenant that leaves the top is gone from the next scrape. */
struct sc_tenant_value {
    char name[49];              /* SC_TENANT_MAX + 1 */
    long long v, age_ms;        /* the value ranked by; the relay's oldest row's age */
};
struct sc_tenant_series {
    pthread_mutex_t lock;
    struct sc_tenant_value *v;  /* only nonzero values kept */
    size_t n, cap;
    int top_n;                  /* tenants.metrics_top */
};

void sc_tenant_series_init(struct sc_tenant_series *s, int top_n);
void sc_tenant_series_free(struct sc_tenant_series *s);
/* Adds delta to name's value (a tenant at 0 is forgotten). */
void sc_tenant_series_add(struct sc_tenant_series *s, const char *name, long long delta);
/* Replaces every value by vals[0..n) (zeros are left out). */
void sc_tenant_series_set(struct sc_tenant_series *s, const struct sc_tenant_value *vals, size_t n);
/* Copies the top_n largest, largest first (ties by name), into out (room
 * for top_n). Returns how many. */
size_t sc_tenant_series_top(struct sc_tenant_series *s, struct sc_tenant_value *out);

enum sc_outcome {
    SC_OUT_APPLIED, SC_OUT_DUPLICATE, SC_OUT_RETRIED, SC_OUT_DEAD_LETTERED, SC_OUT_UNKNOWN,
    SC_OUT_MALFORMED, SC_OUT_COUNT
};

struct sc_consumer_metrics {
    const char *name;
    atomic_ullong outcomes[SC_OUT_COUNT];
    struct sc_hist batch_size, receive_to_commit, handler_seconds, commit_seconds;
    int workers;
    atomic_int db_connected, amqp_connected, consuming; /* workers in that state */
    atomic_ullong cancelled; /* consumers the broker cancelled (their queue was deleted) */
    atomic_ullong queue_lost; /* a worker's queue found gone or unconsumed, with no cancel */
    /* ordered consumers: an applied eventversion that was not the key's
     * last + 1 (0: a gap, 1: a regression or repeat) */
    atomic_ullong version_breaks[2];
    /* tenants (set: exported): totals over every tenant, no tenant label, so
     * the series stay as many whatever the number of tenants */
    int tenants;
    atomic_int tenant_sessions;  /* tenant database sessions open */
    atomic_int tenants_down;     /* tenants whose database cannot be used now */
    atomic_int tenant_waiting;   /* deliveries waiting in hand for such a tenant */
    atomic_ullong tenant_returned; /* deliveries given back through a delay queue instead */
    struct sc_tenant_series waiting; /* tenant_waiting by tenant, the top shown */
};

struct sc_relay_metrics {
    const char *worker_id;
    atomic_ullong published, lease_lost, returned, nacked, unconfirmed, batches;
    atomic_ullong claim_failed, invalid; /* failed claim transactions; rows refused as invalid */
    struct sc_hist confirm_seconds, batch_size;
    atomic_llong pending, oldest_pending_age_ms; /* -1 until first measured */
    atomic_llong held_aggregates; /* per_aggregate: aggregates a FAILED row holds; -1 otherwise */
    atomic_llong binlog_lag_ms, binlog_lag_bytes; /* relay.source binlog: checkpoint behind the
                                                      server's end; -1 otherwise */
    atomic_int db_connected, amqp_connected;
    atomic_ullong claims;        /* claim transactions run (one per tenant claimed from) */
    atomic_int tenants;          /* tenants.list's size; -1 without tenants */
    atomic_int tenant_sessions;  /* tenant database sessions open */
    atomic_int tenants_down;     /* tenants whose database cannot be used now */
    struct sc_tenant_series backlog; /* pending by tenant, the top shown */
};

/* The process registers what it runs, any number of consumers; the HTTP
 * server reads it. Registering returns 0, or -1 when out of memory. */
int sc_metrics_register_consumer(struct sc_consumer_metrics *m);
void sc_metrics_register_relay(struct sc_relay_metrics *m);
/* Forgets everything registered (tests). */
void sc_metrics_reset(void);
void sc_consumer_metrics_init(struct sc_consumer_metrics *m, const char *name, int workers);
void sc_relay_metrics_init(struct sc_relay_metrics *m, const char *worker_id);

/* Records which cluster node a connection is on: server is "mysql" or
 * "amqp", node the index in the configured URL list, endpoint its host:port.
 * An AMQP connection is named by its connection name (which also names the
 * calling thread); a database connection (name NULL) by its thread's name.
 * Shown as sidecar_endpoint{worker,server,node,endpoint} 1. */
void sc_metrics_endpoint(const char *name, const char *server, int node, const char *endpoint);

/* Records what the last durability check of database node `node`
 * (endpoint its host:port) found: one bit per setting (sc_dur_setting,
 * io/db_durability.h) that is not durable. Shown as
 * sidecar_unsafe_durability{setting,node,endpoint} 0 or 1. Returns the
 * previous finding of that node, or -1 when it had none. */
long sc_metrics_durability(int node, const char *endpoint, unsigned unsafe);

/* Counts a session refused for the settings in unsafe:
 * sidecar_durability_refused_total{setting}. */
void sc_metrics_durability_refused(unsigned unsafe);

/* Renders every registered metric. Returns a malloc'd string. */
char *sc_metrics_render(void);

/* 1 when every registered consumer worker is connected to both servers and
 * consuming, and the relay (if any) is connected to both; why gets a reason
 * otherwise. */
int sc_metrics_ready(char *why, size_t why_len);

#endif
