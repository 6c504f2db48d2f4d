#include "relay_tenants.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lifecycle.h"
#include "log.h"
#include "relay_message.h"
#include "tenant.h"

#define SWEEP_EVERY_MS 1000

static void session_close(struct sc_relay_tenants *ts, struct sc_relay_tenant *t);

int sc_relay_tenants_init(struct sc_relay_tenants *ts, const struct sc_config *cfg,
                          const char *worker_id, struct sc_relay_metrics *m)
{
    const struct sc_tenants_config *tc = &cfg->tenants;
    memset(ts, 0, sizeof *ts);
    ts->m = m;
    ts->cfg = cfg;
    ts->worker_id = worker_id;
    ts->poll_ms = cfg->relay.poll_ms;
    ts->idle_close_ms = tc->idle_close_ms;
    ts->open_cap = tc->max_connections > 0 ? tc->max_connections : 1;
    ts->per_aggregate = sc_relay_per_aggregate(&cfg->relay);
    ts->discover = tc->discover;
    ts->discover_ms = tc->discover_ms;
    m->backlog.top_n = tc->metrics_top;
    ts->binds = calloc((size_t)cfg->relay.batch + 2, sizeof *ts->binds);
    ts->lens = calloc((size_t)cfg->relay.batch + 2, sizeof *ts->lens);
    if (!ts->binds || !ts->lens) {
        sc_relay_tenants_free(ts);
        return -1;
    }
    /* "closed" until the core's first db_open: that sets the readiness
     * gauge. */
    ts->closed = 1;
    atomic_store(&m->tenant_sessions, 0);
    atomic_store(&m->tenants_down, 0);
    atomic_store(&m->pending, 0);
    atomic_store(&m->oldest_pending_age_ms, 0);
    for (size_t i = 0; i < tc->n_list; i++)
        if (sc_relay_tenants_add(ts, tc->list[i])) {
            sc_relay_tenants_free(ts);
            return -1;
        }
    if (ts->discover && sc_relay_discover_start(ts)) {
        sc_relay_tenants_free(ts);
        return -1;
    }
    atomic_store(&m->tenants, ts->live);
    return 0;
}

int sc_relay_tenants_add(struct sc_relay_tenants *ts, const char *name)
{
    int slot = -1;
    for (int i = 0; i < ts->n; i++) {
        if (ts->t[i] && strcmp(ts->t[i]->name, name) == 0) {
            if (ts->t[i]->gone) {
                ts->t[i]->gone = 0;
                ts->live++;
            }
            return 0;
        }
        if (!ts->t[i] && slot < 0)
            slot = i;
    }
    if (slot < 0) {
        if (ts->n == ts->cap) {
            int cap = ts->cap ? ts->cap * 2 : 16;
            struct sc_relay_tenant **a = realloc(ts->t, (size_t)cap * sizeof *a);
            struct sc_tenant_value *v = realloc(ts->values, (size_t)cap * sizeof *v);
            if (a)
                ts->t = a;
            if (v)
                ts->values = v;
            if (!a || !v)
                return -1;
            ts->cap = cap;
        }
        slot = ts->n;
    }
    struct sc_relay_tenant *t = calloc(1, sizeof *t);
    if (!t)
        return -1;
    snprintf(t->name, sizeof t->name, "%s", name);
    if (sc_tenant_urls(&ts->cfg->tenants, t->name, &t->urls)) {
        free(t);
        return -1;
    }
    t->n_urls = ts->cfg->tenants.n_database_urls;
    sc_relay_db_init_tenant(&t->db, ts->cfg, ts->worker_id, t->urls, t->n_urls, ts->binds, ts->lens);
    ts->t[slot] = t;
    if (slot == ts->n)
        ts->n++;
    ts->live++;
    return 0;
}

/* Frees slot i's tenant (nothing of it in hand). */
static void tenant_free(struct sc_relay_tenants *ts, int i)
{
    struct sc_relay_tenant *t = ts->t[i];
    session_close(ts, t);
    if (t->err_code)
        atomic_fetch_sub(&ts->m->tenants_down, 1);
    if (ts->current == t)
        ts->current = NULL;
    sc_relay_db_free(&t->db);
    sc_tenant_urls_free(t->urls, t->n_urls);
    free(t);
    ts->t[i] = NULL;
    while (ts->n > 0 && !ts->t[ts->n - 1])
        ts->n--;
}

void sc_relay_tenants_drop(struct sc_relay_tenants *ts, int i)
{
    struct sc_relay_tenant *t = ts->t[i];
    if (!t->gone) {
        t->gone = 1;
        ts->live--;
    }
    if (t->held == 0)
        tenant_free(ts, i);
}

void sc_relay_tenants_free(struct sc_relay_tenants *ts)
{
    sc_relay_discover_free(ts); /* its thread first: nothing of it outlives the config */
    for (int i = 0; ts->t && i < ts->n; i++)
        if (ts->t[i]) {
            sc_relay_db_free(&ts->t[i]->db);
            sc_tenant_urls_free(ts->t[i]->urls, ts->t[i]->n_urls);
            free(ts->t[i]);
        }
    free(ts->t);
    free(ts->values);
    free(ts->binds);
    free(ts->lens);
    ts->t = NULL;
    ts->values = NULL;
    ts->binds = NULL;
    ts->lens = NULL;
    ts->n = ts->cap = ts->live = 0;
}

static void session_close(struct sc_relay_tenants *ts, struct sc_relay_tenant *t)
{
    if (!sc_relay_db_is_open(&t->db))
        return;
    sc_relay_db_close(&t->db);
    ts->open--;
    atomic_store(&ts->m->tenant_sessions, ts->open);
}

/* Opens t's session if it is closed, closing the least recently used one
 * at the cap. Returns 0, or -1 with e filled. */
static int session_open(struct sc_relay_tenants *ts, struct sc_relay_tenant *t, struct sc_db_err *e)
{
    ts->current = t;
    if (sc_relay_db_is_open(&t->db))
        return 0;
    while (ts->open >= ts->open_cap) {
        struct sc_relay_tenant *lru = NULL;
        for (int i = 0; i < ts->n; i++)
            if (ts->t[i] && ts->t[i] != t && sc_relay_db_is_open(&ts->t[i]->db) &&
                (!lru || ts->t[i]->last_use_ms < lru->last_use_ms))
                lru = ts->t[i];
        if (!lru)
            break;
        session_close(ts, lru);
    }
    if (sc_relay_db_open(&t->db, e))
        return -1;
    ts->open++;
    atomic_store(&ts->m->tenant_sessions, ts->open);
    return 0;
}

/* The totals and the top tenants of the backlog, from each tenant's last
 * count. */
static void publish_gauges(struct sc_relay_tenants *ts)
{
    long long pending = 0, age = 0;
    size_t k = 0;
    for (int i = 0; i < ts->n; i++) {
        const struct sc_relay_tenant *t = ts->t[i];
        if (!t || t->gone)
            continue;
        pending += t->pending;
        if (t->pending > 0 && t->age_ms > age)
            age = t->age_ms;
        struct sc_tenant_value *v = &ts->values[k++];
        snprintf(v->name, sizeof v->name, "%s", t->name);
        v->v = t->pending;
        v->age_ms = t->age_ms;
    }
    sc_tenant_series_set(&ts->m->backlog, ts->values, k);
    atomic_store(&ts->m->pending, pending);
    atomic_store(&ts->m->oldest_pending_age_ms, age);
    atomic_store(&ts->m->tenants, ts->live);
}

/* Closes the sessions unused for tenants.idle_close_ms, frees the dropped
 * tenants that settled, and publishes the gauges, at most once a second. */
static void sweep(struct sc_relay_tenants *ts, int64_t now)
{
    if (now - ts->last_sweep_ms < SWEEP_EVERY_MS)
        return;
    ts->last_sweep_ms = now;
    for (int i = 0; i < ts->n; i++) {
        if (!ts->t[i])
            continue;
        if (ts->t[i]->gone && ts->t[i]->held == 0) {
            tenant_free(ts, i);
            continue;
        }
        if (now - ts->t[i]->last_use_ms >= ts->idle_close_ms)
            session_close(ts, ts->t[i]);
    }
    publish_gauges(ts);
}

/* Counts t's backlog on its open session when due (rate-limited by the
 * relay_db's own gauge clock). claimed: the claim just made found rows. */
static void count_backlog(struct sc_relay_tenants *ts, struct sc_relay_tenant *t, int claimed)
{
    atomic_store(&ts->scratch.pending, -1);
    sc_relay_db_refresh_gauges(&t->db, &t->db.db, &ts->scratch);
    long long p = atomic_load(&ts->scratch.pending);
    if (p >= 0) {
        t->pending = p;
        t->age_ms = atomic_load(&ts->scratch.oldest_pending_age_ms);
        t->counted_empty = p == 0;
    } else if (claimed) {
        t->counted_empty = 0; /* counted at its next claim the clock allows */
    }
}

/* t's database failed: its session is closed, and it is not tried again
 * before its backoff. Logged when its failing state changes. */
static void tenant_failed(struct sc_relay_tenants *ts, struct sc_relay_tenant *t, const char *what,
                          const struct sc_db_err *e)
{
    session_close(ts, t);
    t->fails++;
    t->due_ms = sc_now_ms() + sc_backoff_ms(t->fails);
    unsigned code = e->code ? e->code : (unsigned)-1;
    if (t->err_code == 0)
        atomic_fetch_add(&ts->m->tenants_down, 1);
    if (code == t->err_code)
        return;
    t->err_code = code;
    sc_warn("relay: tenant %s: %s failed: error %u (SQLSTATE %s): %s; the other tenants go on, "
            "this one is retried with backoff and logged again when its error changes",
            t->name, what, e->code, e->sqlstate, e->msg);
}

/* The claim skips locked rows, so its lock wait is the table's (LOCK
 * TABLES, a backup's read lock, DDL): each try blocks the one relay thread,
 * every tenant's round with it, for mysql.lock_wait_timeout_s. The locked
 * tenant waits at least LOCK_BACKOFF waits between tries, so it takes at
 * most a fifth of the relay's time while the lock lasts. */
#define LOCK_BACKOFF 4

static void lock_backoff(struct sc_relay_tenants *ts, struct sc_relay_tenant *t)
{
    int64_t at = sc_now_ms() + (int64_t)LOCK_BACKOFF * ts->cfg->mysql_lock_wait_timeout_s * 1000;
    if (t->due_ms < at)
        t->due_ms = at;
}

static void tenant_healthy(struct sc_relay_tenants *ts, struct sc_relay_tenant *t)
{
    if (t->err_code) {
        sc_info("relay: tenant %s: database works again after %llu failed attempts (last error %u)",
                t->name, t->fails, t->err_code == (unsigned)-1 ? 0 : t->err_code);
        atomic_fetch_sub(&ts->m->tenants_down, 1);
    }
    t->err_code = 0;
    t->fails = 0;
}

/* A failed claim may have filled some rows before it failed. */
static void clear_rows(struct sc_relay_row *rows, int max)
{
    for (int i = 0; i < max; i++)
        sc_relay_row_clear(&rows[i]);
}

int sc_relay_tenants_claim(struct sc_relay_tenants *ts, struct sc_relay_row *rows, int max)
{
    if (ts->discover)
        sc_relay_discover_refresh(ts);
    int64_t call_started = sc_now_ms();
    sweep(ts, call_started);
    for (int k = 0; k < ts->n; k++) {
        int i = (ts->cursor + k) % ts->n;
        struct sc_relay_tenant *t = ts->t[i];
        int64_t now = sc_now_ms();
        if (!t || t->gone || t->due_ms > now)
            continue;
        if (ts->beat)
            ts->beat(ts->beat_arg);
        struct sc_db_err e = {0};
        int was_open = sc_relay_db_is_open(&t->db);
        if (session_open(ts, t, &e)) {
            tenant_failed(ts, t, "connecting", &e);
            continue;
        }
        t->last_use_ms = now;
        atomic_fetch_add(&ts->m->claims, 1);
        ts->claim_started_ms = sc_now_ms();
        int n = sc_relay_db_claim(&t->db, rows, max, &e);
        if (n < 0 && was_open && e.cls == SC_DBERR_CONNECTION) {
            /* A session that sat open may only have idled out on the
             * server (wait_timeout): made once more before the tenant
             * counts as down. */
            clear_rows(rows, max);
            session_close(ts, t);
            memset(&e, 0, sizeof e);
            if (session_open(ts, t, &e)) {
                tenant_failed(ts, t, "connecting", &e);
                continue;
            }
            atomic_fetch_add(&ts->m->claims, 1);
            ts->claim_started_ms = sc_now_ms();
            n = sc_relay_db_claim(&t->db, rows, max, &e);
        }
        if (n < 0) {
            clear_rows(rows, max);
            atomic_fetch_add(&ts->m->claim_failed, 1);
            struct sc_db_err rb = {0};
            if (e.cls == SC_DBERR_DEADLOCK && sc_relay_db_rollback(&t->db, &rb) == 0)
                continue; /* another relay's rows: this tenant again next round */
            tenant_failed(ts, t, e.cls == SC_DBERR_LOCK_WAIT ? "claim (lock wait)" : "claim", &e);
            if (e.cls == SC_DBERR_LOCK_WAIT)
                lock_backoff(ts, t);
            continue;
        }
        tenant_healthy(ts, t);
        /* Rows of an expired lease may be this relay's own batch still in
         * flight, its lease run out while another tenant held the call:
         * counted from the call's start, such a copy is left unsent, never
         * published twice. PENDING rows count from their own statement. */
        if (t->db.last_expired > 0)
            ts->claim_started_ms = call_started;
        /* An idle tenant, counted empty and claimed from in vain since,
         * costs no query: only a tenant with rows (found by a claim or by
         * its last count, another relay's leased ones too) is counted. */
        if (n > 0 || ts->per_aggregate || !t->counted_empty)
            count_backlog(ts, t, n > 0);
        if (n == 0) {
            /* Under per_aggregate a batch of its own in hand may hold back
             * every successor: claimable again once that batch is marked. */
            if (!(ts->per_aggregate && t->held > 0))
                t->due_ms = now + ts->poll_ms;
            continue;
        }
        for (int j = 0; j < n; j++) {
            rows[j].tenant = t->name;
            rows[j].source = i;
        }
        t->held++;
        ts->cursor = (i + 1) % ts->n;
        return n;
    }
    return 0;
}

static struct sc_relay_tenant *tenant_of(struct sc_relay_tenants *ts, const struct sc_relay_row *r)
{
    return r->source >= 0 && r->source < ts->n ? ts->t[r->source] : NULL;
}

/* The open session of the tenant row came from, for its marks. */
static struct sc_relay_tenant *mark_session(struct sc_relay_tenants *ts,
                                            const struct sc_relay_row *row, struct sc_db_err *e)
{
    struct sc_relay_tenant *t = tenant_of(ts, row);
    if (!t) {
        snprintf(e->msg, sizeof e->msg, "a row of no tenant");
        e->cls = SC_DBERR_FAILURE;
        return NULL;
    }
    if (session_open(ts, t, e))
        return NULL;
    t->last_use_ms = sc_now_ms();
    return t;
}

int sc_relay_tenants_mark_published(struct sc_relay_tenants *ts, struct sc_relay_row *const *rows,
                                    int n, unsigned char *marked, struct sc_db_err *e)
{
    struct sc_relay_tenant *t = mark_session(ts, rows[0], e);
    return t ? sc_relay_db_mark_published(&t->db, rows, n, marked, e) : -1;
}

int sc_relay_tenants_mark_failed(struct sc_relay_tenants *ts, const struct sc_relay_row *row,
                                 struct sc_db_err *e)
{
    struct sc_relay_tenant *t = mark_session(ts, row, e);
    return t ? sc_relay_db_mark_failed(&t->db, row, e) : -1;
}

int sc_relay_tenants_rollback(struct sc_relay_tenants *ts, struct sc_db_err *e)
{
    if (!ts->current || !sc_relay_db_is_open(&ts->current->db))
        return 0;
    return sc_relay_db_rollback(&ts->current->db, e);
}

void sc_relay_tenants_close_current(struct sc_relay_tenants *ts)
{
    if (ts->current)
        session_close(ts, ts->current);
}

void sc_relay_tenants_batch_done(struct sc_relay_tenants *ts, const struct sc_relay_batch *b)
{
    struct sc_relay_tenant *t = b->n > 0 ? tenant_of(ts, &b->rows[0]) : NULL;
    if (t && t->held > 0)
        t->held--; /* a dropped tenant is freed by the next sweep: its rows are still being ended */
}

int sc_relay_tenants_idle_wait_ms(const struct sc_relay_tenants *ts)
{
    int64_t now = sc_now_ms(), wait = ts->poll_ms;
    for (int i = 0; i < ts->n; i++) {
        const struct sc_relay_tenant *t = ts->t[i];
        if (!t)
            continue;
        if (!t->gone && t->due_ms - now < wait)
            wait = t->due_ms - now;
        /* Only the claim's sweep closes an idle session: with poll_ms past
         * idle_close_ms, waiting for the next claim would keep it open the
         * whole poll and close it just before it is opened again. */
        if (sc_relay_db_is_open(&t->db)) {
            int64_t at = t->last_use_ms + ts->idle_close_ms;
            if (at < ts->last_sweep_ms + SWEEP_EVERY_MS)
                at = ts->last_sweep_ms + SWEEP_EVERY_MS;
            if (at - now < wait)
                wait = at - now;
        }
    }
    return wait < SC_RELAY_POLL_MIN_MS ? SC_RELAY_POLL_MIN_MS : (int)wait;
}
