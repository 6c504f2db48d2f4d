#include "relay_tenants.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lifecycle.h"
#include "log.h"
#include "relay_message.h"
#include "tenant.h"

#define SWEEP_EVERY_MS 1000

int sc_relay_tenants_init(struct sc_relay_tenants *ts, const struct sc_config *cfg,
                          const char *worker_id, struct sc_relay_metrics *m)
{
    const struct sc_tenants_config *tc = &cfg->tenants;
    memset(ts, 0, sizeof *ts);
    ts->m = m;
    ts->poll_ms = cfg->relay.poll_ms;
    ts->idle_close_ms = tc->idle_close_ms;
    ts->open_cap = tc->max_connections > 0 ? tc->max_connections : 1;
    ts->per_aggregate = sc_relay_per_aggregate(&cfg->relay);
    ts->binds = calloc((size_t)cfg->relay.batch + 2, sizeof *ts->binds);
    ts->lens = calloc((size_t)cfg->relay.batch + 2, sizeof *ts->lens);
    ts->t = calloc(tc->n_list ? tc->n_list : 1, sizeof *ts->t);
    if (!ts->binds || !ts->lens || !ts->t) {
        sc_relay_tenants_free(ts);
        return -1;
    }
    for (size_t i = 0; i < tc->n_list; i++) {
        struct sc_relay_tenant *t = &ts->t[i];
        snprintf(t->name, sizeof t->name, "%s", tc->list[i]);
        if (sc_tenant_urls(tc, t->name, &t->urls)) {
            sc_relay_tenants_free(ts);
            return -1;
        }
        t->n_urls = tc->n_database_urls;
        sc_relay_db_init_tenant(&t->db, cfg, worker_id, t->urls, t->n_urls, ts->binds, ts->lens);
        ts->n++;
    }
    /* "closed" until the core's first db_open: that sets the readiness
     * gauge. */
    ts->closed = 1;
    atomic_store(&m->tenants, ts->n);
    atomic_store(&m->tenant_sessions, 0);
    atomic_store(&m->tenants_down, 0);
    return 0;
}

void sc_relay_tenants_free(struct sc_relay_tenants *ts)
{
    for (int i = 0; ts->t && i < ts->n; i++) {
        sc_relay_db_free(&ts->t[i].db);
        sc_tenant_urls_free(ts->t[i].urls, ts->t[i].n_urls);
    }
    free(ts->t);
    free(ts->binds);
    free(ts->lens);
    ts->t = NULL;
    ts->binds = NULL;
    ts->lens = NULL;
    ts->n = 0;
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
            if (&ts->t[i] != t && sc_relay_db_is_open(&ts->t[i].db) &&
                (!lru || ts->t[i].last_use_ms < lru->last_use_ms))
                lru = &ts->t[i];
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

/* Closes the sessions unused for tenants.idle_close_ms, at most once a
 * second. */
static void sweep(struct sc_relay_tenants *ts, int64_t now)
{
    if (now - ts->last_sweep_ms < SWEEP_EVERY_MS)
        return;
    ts->last_sweep_ms = now;
    for (int i = 0; i < ts->n; i++)
        if (now - ts->t[i].last_use_ms >= ts->idle_close_ms)
            session_close(ts, &ts->t[i]);
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
    sweep(ts, sc_now_ms());
    for (int k = 0; k < ts->n; k++) {
        int i = (ts->cursor + k) % ts->n;
        struct sc_relay_tenant *t = &ts->t[i];
        int64_t now = sc_now_ms();
        if (t->due_ms > now)
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
            n = sc_relay_db_claim(&t->db, rows, max, &e);
        }
        if (n < 0) {
            clear_rows(rows, max);
            atomic_fetch_add(&ts->m->claim_failed, 1);
            struct sc_db_err rb = {0};
            if ((e.cls == SC_DBERR_DEADLOCK || e.cls == SC_DBERR_LOCK_WAIT) &&
                sc_relay_db_rollback(&t->db, &rb) == 0)
                continue; /* another relay's rows: this tenant again next round */
            tenant_failed(ts, t, "claim", &e);
            continue;
        }
        tenant_healthy(ts, t);
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
    return r->source >= 0 && r->source < ts->n ? &ts->t[r->source] : NULL;
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
        t->held--;
}

int sc_relay_tenants_idle_wait_ms(const struct sc_relay_tenants *ts)
{
    int64_t now = sc_now_ms(), wait = ts->poll_ms;
    for (int i = 0; i < ts->n; i++)
        if (ts->t[i].due_ms - now < wait)
            wait = ts->t[i].due_ms - now;
    return wait < SC_RELAY_POLL_MIN_MS ? SC_RELAY_POLL_MIN_MS : (int)wait;
}
