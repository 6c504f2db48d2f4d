/* Per-tenant series with bounded cardinality, and the tenant blocks of
 * /metrics: totals over every tenant, and a series per tenant only for the
 * tenants.metrics_top largest. */
#include "metrics_out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sc_tenant_series_init(struct sc_tenant_series *s, int top_n)
{
    pthread_mutex_init(&s->lock, NULL);
    s->v = NULL;
    s->n = s->cap = 0;
    s->top_n = top_n;
}

void sc_tenant_series_free(struct sc_tenant_series *s)
{
    pthread_mutex_lock(&s->lock);
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
    pthread_mutex_unlock(&s->lock);
}

/* Room for want values. Returns 0, or -1 (out of memory: unchanged). */
static int reserve(struct sc_tenant_series *s, size_t want)
{
    if (want <= s->cap)
        return 0;
    size_t cap = s->cap ? s->cap : 16;
    while (cap < want)
        cap *= 2;
    struct sc_tenant_value *v = realloc(s->v, cap * sizeof *v);
    if (!v)
        return -1;
    s->v = v;
    s->cap = cap;
    return 0;
}

void sc_tenant_series_add(struct sc_tenant_series *s, const char *name, long long delta)
{
    if (delta == 0)
        return;
    pthread_mutex_lock(&s->lock);
    size_t i = 0;
    while (i < s->n && strcmp(s->v[i].name, name) != 0)
        i++;
    if (i == s->n) {
        if (reserve(s, s->n + 1) == 0) {
            memset(&s->v[i], 0, sizeof s->v[i]);
            snprintf(s->v[i].name, sizeof s->v[i].name, "%s", name);
            s->n++;
        } else {
            i = (size_t)-1; /* out of memory: the series misses it, the total does not */
        }
    }
    if (i != (size_t)-1 && (s->v[i].v += delta) == 0)
        s->v[i] = s->v[--s->n];
    pthread_mutex_unlock(&s->lock);
}

void sc_tenant_series_set(struct sc_tenant_series *s, const struct sc_tenant_value *vals, size_t n)
{
    pthread_mutex_lock(&s->lock);
    s->n = 0;
    if (reserve(s, n) == 0)
        for (size_t i = 0; i < n; i++)
            if (vals[i].v > 0)
                s->v[s->n++] = vals[i];
    pthread_mutex_unlock(&s->lock);
}

static int larger_first(const void *a, const void *b)
{
    const struct sc_tenant_value *x = a, *y = b;
    if (x->v != y->v)
        return x->v > y->v ? -1 : 1;
    return strcmp(x->name, y->name);
}

size_t sc_tenant_series_top(struct sc_tenant_series *s, struct sc_tenant_value *out)
{
    pthread_mutex_lock(&s->lock);
    size_t top = s->top_n > 0 ? (size_t)s->top_n : 0, k = 0;
    /* A partial selection: top is small beside the tenants. */
    for (size_t i = 0; i < s->n; i++) {
        if (k < top) {
            out[k++] = s->v[i];
        } else if (top > 0 && larger_first(&s->v[i], &out[k - 1]) < 0) {
            out[k - 1] = s->v[i];
        } else {
            continue;
        }
        for (size_t j = k - 1; j > 0 && larger_first(&out[j], &out[j - 1]) < 0; j--) {
            struct sc_tenant_value t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return k;
}

/* The top of s into a buffer of its own (NULL with *k 0 when empty or out
 * of memory). */
static struct sc_tenant_value *top_of(struct sc_tenant_series *s, size_t *k)
{
    *k = 0;
    if (s->top_n <= 0)
        return NULL;
    struct sc_tenant_value *v = malloc((size_t)s->top_n * sizeof *v);
    if (v)
        *k = sc_tenant_series_top(s, v);
    return v;
}

void sc_metrics_render_consumer_tenants(struct sc_metrics_out *o,
                                        struct sc_consumer_metrics *const *cs, int n)
{
    static const struct {
        const char *name, *type, *help;
    } tm[] = {
        {"sidecar_tenant_sessions", "gauge", "Tenant database sessions open."},
        {"sidecar_tenants_down", "gauge", "Tenants whose database cannot be used now."},
        {"sidecar_tenant_waiting", "gauge", "Deliveries waiting in hand for a tenant whose "
         "database cannot be used."},
        {"sidecar_tenant_returned_total", "counter", "Deliveries of such tenants given back "
         "through a delay queue (waited db_outage_hold_ms, or no room in hand)."},
    };
    int any = 0;
    for (int i = 0; i < n; i++)
        any |= cs[i]->tenants;
    if (!any)
        return;
    char e[300], te[120];
    for (size_t t = 0; t < sizeof tm / sizeof *tm; t++) {
        sc_metrics_emit(o, "# HELP %s %s\n# TYPE %s %s\n", tm[t].name, tm[t].help, tm[t].name,
                        tm[t].type);
        for (int i = 0; i < n; i++) {
            struct sc_consumer_metrics *c = cs[i];
            if (!c->tenants)
                continue;
            unsigned long long v = t == 0   ? (unsigned long long)atomic_load(&c->tenant_sessions)
                                   : t == 1 ? (unsigned long long)atomic_load(&c->tenants_down)
                                   : t == 2 ? (unsigned long long)atomic_load(&c->tenant_waiting)
                                            : atomic_load(&c->tenant_returned);
            sc_metrics_emit(o, "%s{consumer=\"%s\"} %llu\n", tm[t].name,
                            sc_metrics_esc(c->name, e, sizeof e), v);
        }
    }
    sc_metrics_emit(o, "# HELP sidecar_tenant_waiting_by_tenant Deliveries waiting in hand for "
                       "the tenant, only for the tenants.metrics_top tenants with the most "
                       "(sidecar_tenant_waiting is the total).\n"
                       "# TYPE sidecar_tenant_waiting_by_tenant gauge\n");
    for (int i = 0; i < n; i++) {
        if (!cs[i]->tenants)
            continue;
        size_t k;
        struct sc_tenant_value *v = top_of(&cs[i]->waiting, &k);
        sc_metrics_esc(cs[i]->name, e, sizeof e);
        for (size_t j = 0; j < k; j++)
            sc_metrics_emit(o, "sidecar_tenant_waiting_by_tenant{consumer=\"%s\",tenant=\"%s\"} "
                            "%lld\n", e, sc_metrics_esc(v[j].name, te, sizeof te), v[j].v);
        free(v);
    }
}

void sc_metrics_render_relay_tenants(struct sc_metrics_out *o, struct sc_relay_metrics *r,
                                     const char *lab)
{
    if (atomic_load(&r->tenants) < 0)
        return;
    sc_metrics_emit(o, "# HELP sidecar_relay_tenants Tenant databases the relay reads "
                       "(tenants.list, or those tenants.discover found).\n"
                       "# TYPE sidecar_relay_tenants gauge\nsidecar_relay_tenants{%s} %d\n"
                       "# HELP sidecar_relay_tenant_sessions Tenant database sessions open.\n"
                       "# TYPE sidecar_relay_tenant_sessions gauge\nsidecar_relay_tenant_sessions{%s} %d\n"
                       "# HELP sidecar_relay_tenants_down Tenants whose database cannot be used now.\n"
                       "# TYPE sidecar_relay_tenants_down gauge\nsidecar_relay_tenants_down{%s} %d\n",
                    lab, atomic_load(&r->tenants), lab, atomic_load(&r->tenant_sessions), lab,
                    atomic_load(&r->tenants_down));
    size_t k;
    struct sc_tenant_value *v = top_of(&r->backlog, &k);
    char te[120];
    sc_metrics_emit(o, "# HELP sidecar_relay_tenant_pending Outbox rows not yet PUBLISHED in the "
                       "tenant's database, only for the tenants.metrics_top tenants with the "
                       "most (sidecar_relay_pending is the total).\n"
                       "# TYPE sidecar_relay_tenant_pending gauge\n");
    for (size_t j = 0; j < k; j++)
        sc_metrics_emit(o, "sidecar_relay_tenant_pending{%s,tenant=\"%s\"} %lld\n", lab,
                        sc_metrics_esc(v[j].name, te, sizeof te), v[j].v);
    sc_metrics_emit(o, "# HELP sidecar_relay_tenant_oldest_pending_age_seconds Age of the oldest "
                       "row not yet PUBLISHED in the tenant's database, for the tenants of "
                       "sidecar_relay_tenant_pending.\n"
                       "# TYPE sidecar_relay_tenant_oldest_pending_age_seconds gauge\n");
    for (size_t j = 0; j < k; j++)
        sc_metrics_emit(o, "sidecar_relay_tenant_oldest_pending_age_seconds{%s,tenant=\"%s\"} "
                        "%.3f\n", lab, sc_metrics_esc(v[j].name, te, sizeof te),
                        v[j].age_ms > 0 ? (double)v[j].age_ms / 1000 : 0.0);
    free(v);
}
