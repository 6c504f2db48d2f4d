/* A consume worker's tenant sessions: open on first use, least recently
 * used closed first at the cap, idle ones closed, a lost one down with
 * backoff (tenant_pool.h). */
#include "consume/tenant_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consume/worker.h"
#include "lifecycle.h"
#include "log.h"
#include "tenant.h"

#define SWEEP_EVERY_MS 1000

int sc_tenant_rings_out(const struct sc_tenant_session *s)
{
    for (int i = 0; i < s->n_rings; i++)
        if (sc_order_ring_out(&s->rings[i]) > 0)
            return 1;
    return 0;
}

int sc_tenant_worker_init(struct worker *w, int total_workers)
{
    const struct sc_config *cfg = w->c->cfg;
    const struct sc_consumer_config *k = w->c->k;
    struct sc_tenant_worker *t = calloc(1, sizeof *t);
    char why[256];
    if (!t)
        return -1;
    if (sc_tenant_names_compile(cfg->tenants.names, &t->names, why, sizeof why)) {
        free(t);
        return -1;
    }
    /* Every worker gets its share, at least one: the process never holds
     * more than max_connections unless there are more workers than that. */
    t->open_cap = cfg->tenants.max_connections / (total_workers > 0 ? total_workers : 1);
    if (t->open_cap < 1)
        t->open_cap = 1;
    /* Parked deliveries take room in the prefetch window: half of it at
     * most, so the other tenants always have the rest. */
    t->park_cap = k->prefetch / 2;
    if (t->park_cap > 0 && !(t->parked = calloc((size_t)t->park_cap, sizeof *t->parked))) {
        regfree(&t->names);
        free(t);
        return -1;
    }
    t->acks_cap = sc_tenant_in_hand(k);
    if (!(t->acks = calloc((size_t)t->acks_cap, sizeof *t->acks))) {
        free(t->parked);
        regfree(&t->names);
        free(t);
        return -1;
    }
    /* The ordered path settles deliveries in places of its own and keeps
     * its state across broker sessions (tags restart at 1): it acks alone. */
    t->fold = !k->ordering.present;
    if (t->fold && sc_ack_plan_init(&t->plan, 4 * t->acks_cap)) {
        free(t->acks);
        free(t->parked);
        regfree(&t->names);
        free(t);
        return -1;
    }
    t->group_round = 1;
    w->tenant = t;
    w->ack_each = 1;
    return 0;
}

static void session_close(struct sc_tenant_worker *t, struct sc_tenant_session *s)
{
    if (s->db.conn) {
        sc_db_close(&s->db);
        t->open--;
    }
}

void sc_tenant_worker_free(struct worker *w)
{
    struct sc_tenant_worker *t = w->tenant;
    if (!t)
        return;
    sc_tenant_gauges(w, 1, NULL);
    for (int i = 0; i < t->n_sessions; i++) {
        session_close(t, &t->sessions[i]);
        sc_tenant_urls_free(t->sessions[i].urls, t->sessions[i].n_urls);
        sc_order_rings_clear(t->sessions[i].rings, t->sessions[i].n_rings);
        free(t->sessions[i].rings);
    }
    sc_db_close(&t->copies_db);
    for (int i = 0; i < t->n_parked; i++)
        amqp_destroy_envelope(&t->parked[i].env);
    free(t->parked);
    free(t->acks);
    sc_ack_plan_free(&t->plan);
    free(t->sessions);
    regfree(&t->names);
    free(t);
    w->tenant = NULL;
    w->db_urls = NULL;
    w->n_db_urls = 0;
}

/* The index of tenant name's session entry, or -1 (none). */
static int session_find(const struct sc_tenant_worker *t, const char *name)
{
    for (int i = 0; i < t->n_sessions; i++)
        if (strcmp(t->sessions[i].name, name) == 0)
            return i;
    return -1;
}

int sc_tenant_session_of(struct worker *w, const char *name)
{
    struct sc_tenant_worker *t = w->tenant;
    int found = session_find(t, name);
    if (found >= 0)
        return found;
    if (t->n_sessions == t->sessions_cap) {
        int cap = t->sessions_cap ? 2 * t->sessions_cap : 16;
        struct sc_tenant_session *ns = realloc(t->sessions, (size_t)cap * sizeof *ns);
        if (!ns)
            return -1;
        t->sessions = ns;
        t->sessions_cap = cap;
    }
    struct sc_tenant_session *s = &t->sessions[t->n_sessions];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    if (sc_tenant_urls(&w->c->cfg->tenants, name, &s->urls))
        return -1;
    s->n_urls = w->c->cfg->tenants.n_database_urls;
    s->last_use_ms = sc_now_ms();
    return t->n_sessions++;
}

int sc_tenant_down(const struct worker *w, int i, int64_t now_ms)
{
    return w->tenant->sessions[i].retry_at_ms > now_ms;
}

/* Closes the open session used longest ago (not keep). */
static void evict_lru(struct sc_tenant_worker *t, int keep)
{
    int lru = -1;
    for (int i = 0; i < t->n_sessions; i++)
        if (i != keep && t->sessions[i].db.conn &&
            (lru < 0 || t->sessions[i].last_use_ms < t->sessions[lru].last_use_ms))
            lru = i;
    if (lru >= 0)
        session_close(t, &t->sessions[lru]);
}

/* A locked tenant (its claim waited out mysql.lock_wait_timeout_s) holds
 * the worker for one whole wait per try: it waits at least LOCK_BACKOFF
 * waits between tries, so it takes at most a fifth of the worker's time
 * from the other tenants while the lock lasts. */
#define LOCK_BACKOFF 4

static void mark_down(struct worker *w, struct sc_tenant_session *s, const struct sc_db_err *e)
{
    s->failures++;
    int delay = sc_backoff_ms(s->failures);
    int lock_floor = LOCK_BACKOFF * w->c->cfg->mysql_lock_wait_timeout_s * 1000;
    if (e->cls == SC_DBERR_LOCK_WAIT && delay < lock_floor)
        delay = lock_floor;
    s->retry_at_ms = sc_now_ms() + delay;
    snprintf(s->last_error, sizeof s->last_error, "error %u: %.200s", e->code, e->msg);
    struct sc_log_fields lf = {.consumer = w->c->k->name, .error_code = e->code};
    sc_log(SC_LOG_WARN, &lf, "tenant %s: database cannot be used (%s, %s); its deliveries wait "
           "in hand, tried again in %d ms (attempt %u); other tenants go on", s->name,
           sc_db_error_class_name(e->cls), e->msg, delay, s->failures);
}

int sc_tenant_enter(struct worker *w, int i, struct sc_db_err *e)
{
    struct sc_tenant_worker *t = w->tenant;
    struct sc_tenant_session *s = &t->sessions[i];
    s->last_use_ms = sc_now_ms();
    w->db_urls = s->urls;
    w->n_db_urls = s->n_urls;
    if (s->db.conn) {
        w->db = s->db;
        memset(&s->db, 0, sizeof s->db);
        t->open--; /* counted again when it comes back */
        return 0;
    }
    while (t->open >= t->open_cap)
        evict_lru(t, i);
    memset(&w->db, 0, sizeof w->db);
    if (sc_worker_db_open(w, e)) {
        sc_db_close(&w->db);
        mark_down(w, s, e);
        return -1;
    }
    return 1;
}

void sc_tenant_leave(struct worker *w, int i, int lost, const struct sc_db_err *e)
{
    struct sc_tenant_worker *t = w->tenant;
    struct sc_tenant_session *s = &t->sessions[i];
    if (lost) {
        sc_db_close(&w->db);
        mark_down(w, s, e);
    } else if (w->db.conn) {
        if (s->failures) {
            struct sc_log_fields lf = {.consumer = w->c->k->name};
            sc_log(SC_LOG_INFO, &lf, "tenant %s: database usable again after %u failed attempts",
                   s->name, s->failures);
        }
        s->failures = 0;
        s->retry_at_ms = 0;
        s->db = w->db;
        t->open++;
    }
    memset(&w->db, 0, sizeof w->db);
    s->last_use_ms = sc_now_ms();
}

int sc_tenant_ack_defer(struct worker *w, uint64_t tag)
{
    struct sc_tenant_worker *t = w->tenant;
    if (t->n_acks >= t->acks_cap)
        return -1;
    t->acks[t->n_acks++] = tag;
    return 0;
}

void sc_tenant_settled(struct worker *w, uint64_t tag)
{
    if (w->tenant && w->tenant->fold)
        sc_ack_plan_settled(&w->tenant->plan, tag);
}

static int tag_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int sc_tenant_ack_flush(struct worker *w)
{
    struct sc_tenant_worker *t = w->tenant;
    int n = t->n_acks, failed = 0, folded = 0;
    t->n_acks = 0;
    if (t->fold) {
        folded = sc_ack_plan_round(&t->plan, t->acks, n);
        if (folded > 0)
            failed = sc_amqp_ack(&w->in, t->acks[folded - 1], folded > 1) != 0;
    } else {
        qsort(t->acks, (size_t)n, sizeof *t->acks, tag_cmp);
    }
    for (int i = folded; i < n && !failed; i++)
        failed = sc_amqp_ack(&w->in, t->acks[i], 0) != 0;
    return failed ? -1 : 0;
}

static int parked_refs(const struct sc_tenant_worker *t, int i)
{
    for (int j = 0; j < t->n_parked; j++)
        if (t->parked[j].session == i)
            return 1;
    return 0;
}

void sc_tenant_sweep(struct worker *w, int64_t now_ms)
{
    struct sc_tenant_worker *t = w->tenant;
    if (now_ms - t->last_sweep_ms < SWEEP_EVERY_MS)
        return;
    t->last_sweep_ms = now_ms;
    int idle_ms = w->c->cfg->tenants.idle_close_ms;
    for (int i = t->n_sessions - 1; i >= 0; i--) {
        struct sc_tenant_session *s = &t->sessions[i];
        if (now_ms - s->last_use_ms < idle_ms)
            continue;
        session_close(t, s);
        /* Forget a tenant unused this long (names come from messages: the
         * entries must not grow with every name ever seen), unless it is
         * down, has deliveries parked or copies gone round. */
        if (s->retry_at_ms > now_ms || parked_refs(t, i) || sc_tenant_rings_out(s))
            continue;
        sc_tenant_series_add(&w->c->m.waiting, s->name, -s->g_parked);
        sc_tenant_urls_free(s->urls, s->n_urls);
        sc_order_rings_clear(s->rings, s->n_rings);
        free(s->rings);
        int last = t->n_sessions - 1;
        if (i != last) {
            t->sessions[i] = t->sessions[last];
            for (int j = 0; j < t->n_parked; j++)
                if (t->parked[j].session == last)
                    t->parked[j].session = i;
        }
        t->n_sessions--;
    }
}

static void gauge(atomic_int *g, int *mine, int now)
{
    atomic_fetch_add(g, now - *mine);
    *mine = now;
}

/* Counts into parked_now the slots of o waiting for a tenant whose last
 * try failed. Returns how many. */
static int count_slots(struct sc_tenant_worker *t, const struct sc_order *o)
{
    int failing = 0, n = 0;
    for (int i = 0; i < t->n_sessions && !failing; i++)
        failing = t->sessions[i].retry_at_ms != 0;
    for (int j = 0; failing && j < o->n; j++) {
        const struct sc_order_slot *s = &o->slots[j];
        int i = s->tenant[0] ? session_find(t, s->tenant) : -1;
        if (i >= 0 && t->sessions[i].retry_at_ms != 0) {
            t->sessions[i].parked_now++;
            n++;
        }
    }
    return n;
}

void sc_tenant_gauges(struct worker *w, int gone, const struct sc_order *o)
{
    struct sc_tenant_worker *t = w->tenant;
    struct sc_consumer_metrics *m = &w->c->m;
    int64_t now = sc_now_ms();
    int down = 0, waiting = 0;
    for (int i = 0; !gone && i < t->n_sessions; i++)
        down += t->sessions[i].retry_at_ms > now;
    for (int i = 0; i < t->n_sessions; i++)
        t->sessions[i].parked_now = 0;
    for (int j = 0; !gone && j < t->n_parked; j++)
        t->sessions[t->parked[j].session].parked_now++;
    if (!gone) {
        waiting = t->n_parked;
        if (o)
            waiting += count_slots(t, o);
    }
    gauge(&m->tenant_sessions, &t->g_sessions, gone ? 0 : t->open + (w->db.conn != NULL));
    gauge(&m->tenants_down, &t->g_down, down);
    gauge(&m->tenant_waiting, &t->g_waiting, waiting);
    /* By tenant: the changes since the last count, into the series the
     * consumer's workers share. */
    for (int i = 0; i < t->n_sessions; i++) {
        struct sc_tenant_session *s = &t->sessions[i];
        sc_tenant_series_add(&m->waiting, s->name, s->parked_now - s->g_parked);
        s->g_parked = s->parked_now;
    }
}

int64_t sc_tenant_next_retry_ms(const struct worker *w)
{
    const struct sc_tenant_worker *t = w->tenant;
    int64_t next = INT64_MAX;
    for (int j = 0; j < t->n_parked; j++) {
        int64_t at = t->sessions[t->parked[j].session].retry_at_ms;
        if (at < next)
            next = at;
    }
    return next;
}
