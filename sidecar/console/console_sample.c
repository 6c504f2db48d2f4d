/* The console's samplers: one thread asks the database, one the broker,
 * every console.sample_ms, and an hour of their answers is kept in memory.
 * Every page view, chart and /metrics scrape reads these, so the console's
 * cost on the servers is this loop's, whatever the number of viewers.
 *
 * This file is the one writer of the state under the sampler's lock: the
 * sample files (console_sample_db.c, console_sample_amqp.c) return a
 * reading, which is stored here, so what a view sees changes in one place.
 * With tenants.discover the set of tenants changes here too, between two
 * sweeps of the tenants thread (retenant). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "console_sampler.h"
#include "lifecycle.h"
#include "log.h"

#define HISTORY_MS 3600000  /* an hour of samples */

const char *const sc_console_st_names[N_ST] = {"PENDING", "PUBLISHING", "PUBLISHED", "FAILED"};

int64_t sc_console_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void store_db(struct sc_console_sampler *s, const struct db_reading *r)
{
    const struct sample_count *st = r->by_status;
    double backlog = st[ST_PENDING].n >= 0 && st[ST_PUBLISHING].n >= 0
                         ? (double)(st[ST_PENDING].n + st[ST_PUBLISHING].n) : -1;
    double *pt = calloc(3 + s->nk, sizeof *pt);
    pthread_mutex_lock(&s->lock);
    memcpy(s->by_status, r->by_status, sizeof r->by_status);
    s->expired = r->expired;
    s->oldest_age_s = r->oldest_age_s;
    s->publish_per_min = r->publish_per_min;
    memcpy(s->consumed_per_min, r->consumed_per_min, s->nk * sizeof *r->consumed_per_min);
    if (pt) {
        pt[0] = backlog;
        pt[1] = r->publish_per_min;
        pt[2] = r->oldest_age_s < 0 ? 0 : r->oldest_age_s;
        for (size_t k = 0; k < s->nk; k++)
            pt[3 + k] = r->consumed_per_min[k];
        sc_console_ring_push(&s->dbr, sc_console_wall_ms(), pt);
    }
    pthread_mutex_unlock(&s->lock);
    free(pt);
}

static void store_amqp(struct sc_console_sampler *s, const struct amqp_reading *r)
{
    size_t nk = s->nk;
    const long long *v = r->counts;
    double *pt = calloc(2 * nk + 1, sizeof *pt);
    pthread_mutex_lock(&s->lock);
    memcpy(s->queue_msgs, v, nk * sizeof *v);
    memcpy(s->queue_cons, v + nk, nk * sizeof *v);
    memcpy(s->dlq_msgs, v + 2 * nk, nk * sizeof *v);
    memcpy(s->queue_err, r->queue_err, nk * sizeof *r->queue_err);
    if (pt) {
        for (size_t k = 0; k < nk; k++) {
            pt[k] = (double)v[2 * nk + k];
            pt[nk + k] = (double)v[k];
        }
        sc_console_ring_push(&s->amqpr, sc_console_wall_ms(), pt);
    }
    pthread_mutex_unlock(&s->lock);
    free(pt);
}

static void mark_busy(struct sc_console_sampler *s, struct server_state *srv)
{
    pthread_mutex_lock(&s->lock);
    srv->busy_since_ms = sc_now_ms();
    pthread_mutex_unlock(&s->lock);
}

static void mark_done(struct sc_console_sampler *s, struct server_state *srv, const char *who,
                      int rc, const char *err)
{
    pthread_mutex_lock(&s->lock);
    int was_ok = srv->ok, was_sampled = srv->sampled;
    srv->last_took_ms = sc_now_ms() - srv->busy_since_ms;
    srv->busy_since_ms = 0;
    srv->sampled = 1;
    srv->ok = rc == 0;
    if (rc == 0)
        srv->last_ok_wall_ms = sc_console_wall_ms();
    snprintf(srv->error, sizeof srv->error, "%s", rc ? err : "");
    pthread_mutex_unlock(&s->lock);
    /* One line per change of state, not one per sample. */
    if (rc && (was_ok || !was_sampled))
        sc_warn("console: %s: %s (sampling again every %d ms)", who, err,
                s->con->cfg->console_sample_ms);
    else if (!rc && !was_ok && was_sampled)
        sc_info("console: %s answers again", who);
}

/* Sleeps until the next tick, or until stop. */
static void wait_tick(struct sc_console_sampler *s, int64_t t0)
{
    int64_t until = t0 + s->con->cfg->console_sample_ms;
    while (!atomic_load(&s->stop) && !sc_stop_requested()) {
        int64_t left = until - sc_now_ms();
        if (left <= 0)
            return;
        struct timespec ts = {0, (left > 100 ? 100 : left) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static void *db_loop(void *arg)
{
    struct sc_console_sampler *s = arg;
    while (!atomic_load(&s->stop) && !sc_stop_requested()) {
        int64_t t0 = sc_now_ms();
        char err[600] = "";
        struct db_reading r;
        mark_busy(s, &s->dbs);
        int rc = sc_console_sample_db(&s->dbt, s->con, &r, err, sizeof err);
        if (rc == 0) {
            store_db(s, &r);
            free(r.consumed_per_min);
        }
        mark_done(s, &s->dbs, "database", rc, err);
        wait_tick(s, t0);
    }
    struct sc_db_err e = {0};
    if (sc_db_connected(&s->dbt.db))
        sc_db_rollback(&s->dbt.db, &e);
    sc_db_close(&s->dbt.db);
    return NULL;
}

static void tenant_point(const struct tenant_reading *r, double *pt)
{
    const struct sample_count *st = r->by_status;
    pt[0] = st[ST_PENDING].n >= 0 ? (double)(st[ST_PENDING].n + (st[ST_PUBLISHING].n > 0 ? st[ST_PUBLISHING].n : 0))
                                  : -1;
    pt[1] = r->publish_per_min;
    pt[2] = r->oldest_age_s < 0 ? 0 : r->oldest_age_s;
}

/* The totals' point of a sweep: sums over the tenants that answered (the
 * rate only when every one of them knows its own), the oldest age's max. */
static void push_totals(struct sc_console_sampler *s)
{
    double tot[3] = {0, 0, 0};
    int any = 0, rate_known = 1;
    for (size_t i = 0; i < s->nt; i++) {
        double pt[3];
        if (!s->tenants[i].ok)
            continue;
        tenant_point(&s->tenants[i], pt);
        any = 1;
        tot[0] += pt[0] < 0 ? 0 : pt[0];
        rate_known &= pt[1] >= 0;
        tot[1] += pt[1] < 0 ? 0 : pt[1];
        tot[2] = pt[2] > tot[2] ? pt[2] : tot[2];
    }
    if (!any)
        tot[0] = tot[1] = -1;
    else if (!rate_known)
        tot[1] = -1;
    sc_console_ring_push(&s->totr, sc_console_wall_ms(), tot);
}

/* The tenants a listing found become the tenants shown: one still found
 * keeps its reading, its hour of history and its rates' counters; a new one
 * starts unsampled (the sweep that follows reads it); one no longer found
 * leaves, with its history. The new arrays are built first and swapped in
 * under the lock, so a view sees the tenants before or after, never half.
 * Out of memory: the tenants stay as they were, the next listing tries
 * again. The tenants thread's only: it is the one writer of the set. */
static void retenant(struct sc_console_sampler *s, const struct sc_tenant_found *f)
{
    size_t n = f->n, n1 = n ? n : 1, old_n = s->nt, made = 0;
    sc_console_tenant_name *names = calloc(n1, sizeof *names);
    struct tenant_reading *readings = calloc(n1, sizeof *readings);
    struct sc_console_ring *rings = calloc(n1, sizeof *rings);
    struct tenant_track *track = calloc(n1, sizeof *track);
    size_t *from = malloc(n1 * sizeof *from);
    char *kept = calloc(old_n ? old_n : 1, 1);
    if (!names || !readings || !rings || !track || !from || !kept)
        goto oom;
    /* Both sorted by name (the listing's by sc_console_discover_due, the
     * tenants shown since they are the last listing's): one walk pairs them. */
    for (size_t i = 0, j = 0; i < n; i++) {
        while (j < old_n && strcmp(s->tnames[j], f->names[i]) < 0)
            j++;
        from[i] = j < old_n && strcmp(s->tnames[j], f->names[i]) == 0 ? j : SIZE_MAX;
    }
    for (made = 0; made < n; made++) {
        size_t i = made;
        snprintf(names[i], sizeof names[i], "%s", f->names[i]);
        if (from[i] != SIZE_MAX) {
            readings[i] = s->tenants[from[i]];
            rings[i] = s->tenr[from[i]];
            track[i] = s->tt.track[from[i]];
            kept[from[i]] = 1;
            continue;
        }
        if (sc_console_ring_init(&rings[i], s->points, 3)) {
            sc_console_ring_free(&rings[i]);
            goto oom;
        }
        sc_console_tenant_track_init(&track[i], s->con, f->names[i]);
    }
    sc_console_tenant_name *old_names = s->tnames;
    struct tenant_reading *old_readings = s->tenants;
    struct sc_console_ring *old_rings = s->tenr;
    pthread_mutex_lock(&s->lock);
    s->tnames = names;
    s->tenants = readings;
    s->tenr = rings;
    s->nt = n;
    pthread_mutex_unlock(&s->lock);
    free(s->tt.track);
    s->tt.track = track;
    s->tt.nt = n;
    for (size_t i = 0; i < n; i++)
        if (from[i] == SIZE_MAX)
            sc_info("console: tenant %s: database found, shown from this sample on", names[i]);
    for (size_t j = 0; j < old_n; j++)
        if (!kept[j]) {
            sc_info("console: tenant %s: its database is no longer found: no longer shown",
                    old_names[j]);
            sc_console_ring_free(&old_rings[j]);
        }
    free(old_names);
    free(old_readings);
    free(old_rings);
    free(from);
    free(kept);
    return;
oom:
    for (size_t i = 0; rings && from && i < made; i++)
        if (from[i] == SIZE_MAX)
            sc_console_ring_free(&rings[i]);
    free(names);
    free(readings);
    free(rings);
    free(track);
    free(from);
    free(kept);
    sc_warn("console: tenants.discover: out of memory: the tenants shown stay as they were");
}

/* tenants.discover: lists the tenants when discover_ms has passed, before
 * the sweep, so a tenant found is read in the sweep that follows. */
static void list_tenants(struct sc_console_sampler *s)
{
    struct sc_tenant_found f;
    int got = sc_console_discover_due(&s->tt.disc, s->con, &f);
    if (got)
        retenant(s, &f);
    sc_tenant_found_free(&f);
    pthread_mutex_lock(&s->lock);
    s->listed |= got;
    snprintf(s->list_error, sizeof s->list_error, "%s", s->tt.disc.why);
    pthread_mutex_unlock(&s->lock);
}

/* Each tenant once a tick, one after the other: a tenant that does not
 * answer holds this thread only (the page reads what was stored). When
 * the session itself cannot connect, the tenants after it in the sweep get
 * the same error instead of a connect each. */
static void *tenant_loop(void *arg)
{
    struct sc_console_sampler *s = arg;
    struct tenant_reading *r = malloc(sizeof *r);
    while (r && !atomic_load(&s->stop) && !sc_stop_requested()) {
        int64_t t0 = sc_now_ms();
        int down = 0;
        if (s->con->cfg->tenants.discover)
            list_tenants(s);
        int64_t t1 = sc_now_ms();
        mark_busy(s, &s->tens);
        for (size_t i = 0; i < s->nt && !atomic_load(&s->stop) && !sc_stop_requested(); i++) {
            if (!down) {
                sc_console_sample_tenant(&s->tt, s->con, i, r);
                down = !r->ok && !sc_db_connected(&s->tt.db);
            }
            /* One line per change of a tenant's state, not one per sample
             * (read without the lock: this thread is the one writer). */
            const struct tenant_reading *was = &s->tenants[i];
            const char *name = s->tnames[i];
            if (!r->ok && (was->ok || !was->sampled))
                sc_warn("console: tenant %s: %s (%s; sampling again every %d ms)", name, r->error,
                        r->error_class ? r->error_class : "?", s->con->cfg->console_sample_ms);
            else if (r->ok && was->sampled && !was->ok)
                sc_info("console: tenant %s answers again", name);
            pthread_mutex_lock(&s->lock);
            if (r->ok) {
                double pt[3];
                tenant_point(r, pt);
                sc_console_ring_push(&s->tenr[i], sc_console_wall_ms(), pt);
            }
            if (r->ok || !s->tenants[i].sampled)
                s->tenants[i] = *r;
            else { /* the last good counts stay, marked not answering */
                s->tenants[i].ok = 0;
                s->tenants[i].error_class = r->error_class;
                memcpy(s->tenants[i].error, r->error, sizeof r->error);
            }
            pthread_mutex_unlock(&s->lock);
        }
        pthread_mutex_lock(&s->lock);
        push_totals(s);
        s->tens.last_took_ms = sc_now_ms() - t1;
        s->tens.busy_since_ms = 0;
        s->tens.sampled = 1;
        pthread_mutex_unlock(&s->lock);
        wait_tick(s, t0);
    }
    free(r);
    sc_console_tenants_free(&s->tt);
    return NULL;
}

static void *amqp_loop(void *arg)
{
    struct sc_console_sampler *s = arg;
    struct sc_amqp a;
    memset(&a, 0, sizeof a);
    while (!atomic_load(&s->stop) && !sc_stop_requested()) {
        int64_t t0 = sc_now_ms();
        char err[600] = "";
        struct amqp_reading r;
        mark_busy(s, &s->amqps);
        int rc = sc_console_sample_amqp(s->con, &a, &r, err, sizeof err);
        if (rc == 0) {
            store_amqp(s, &r);
            free(r.counts);
            free(r.queue_err);
        }
        mark_done(s, &s->amqps, "broker", rc, err);
        wait_tick(s, t0);
    }
    sc_amqp_close(&a);
    return NULL;
}

struct sc_console_sampler *sc_console_sampler_start(struct sc_console *con)
{
    struct sc_console_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->con = con;
    s->nk = con->cfg->n_consumers;
    pthread_mutex_init(&s->lock, NULL);
    s->oldest_age_s = -1;
    s->publish_per_min = -1;
    s->dbt.b_prev = -1;
    s->dbt.last_id = -1;
    for (int i = 0; i < N_ST; i++)
        s->by_status[i].n = -1;
    s->expired.n = -1;
    size_t nk1 = s->nk ? s->nk : 1;
    s->consumed_per_min = malloc(nk1 * sizeof *s->consumed_per_min);
    s->queue_msgs = malloc(nk1 * sizeof *s->queue_msgs);
    s->queue_cons = malloc(nk1 * sizeof *s->queue_cons);
    s->dlq_msgs = malloc(nk1 * sizeof *s->dlq_msgs);
    s->queue_err = calloc(nk1, sizeof *s->queue_err);
    int points = HISTORY_MS / con->cfg->console_sample_ms;
    if (!s->consumed_per_min || !s->queue_msgs || !s->queue_cons || !s->dlq_msgs ||
        !s->queue_err || sc_console_ring_init(&s->dbr, points, 3 + (int)s->nk) ||
        sc_console_ring_init(&s->amqpr, points, 2 * (int)s->nk)) {
        sc_console_sampler_stop(s);
        return NULL;
    }
    for (size_t k = 0; k < s->nk; k++)
        s->consumed_per_min[k] = s->queue_msgs[k] = s->queue_cons[k] = s->dlq_msgs[k] = -1;
    /* With tenants.discover none yet: the tenants thread's first listing
     * finds them (the console never waits for a server to start). */
    s->tenanted = con->cfg->tenants.present;
    s->points = points;
    if (sc_console_tenants_init(&s->tt, con) ||
        !(s->tenants = calloc(s->tt.nt ? s->tt.nt : 1, sizeof *s->tenants)) ||
        !(s->tnames = calloc(s->tt.nt ? s->tt.nt : 1, sizeof *s->tnames)) ||
        !(s->tenr = calloc(s->tt.nt ? s->tt.nt : 1, sizeof *s->tenr))) {
        sc_console_sampler_stop(s);
        return NULL;
    }
    s->nt = s->tt.nt;
    if (s->tenanted && sc_console_ring_init(&s->totr, points, 3)) {
        sc_console_sampler_stop(s);
        return NULL;
    }
    for (size_t i = 0; i < s->nt; i++) {
        snprintf(s->tnames[i], sizeof s->tnames[i], "%s", con->cfg->tenants.list[i]);
        if (sc_console_ring_init(&s->tenr[i], points, 3)) {
            sc_console_sampler_stop(s);
            return NULL;
        }
    }
    if (s->tenanted)
        s->tenant_started = pthread_create(&s->tenant_thread, NULL, tenant_loop, s) == 0;
    s->db_started = pthread_create(&s->db_thread, NULL, db_loop, s) == 0;
    s->amqp_started = pthread_create(&s->amqp_thread, NULL, amqp_loop, s) == 0;
    if (!s->db_started || !s->amqp_started || (s->tenanted && !s->tenant_started)) {
        sc_console_sampler_stop(s);
        return NULL;
    }
    return s;
}

void sc_console_sampler_stop(struct sc_console_sampler *s)
{
    if (!s)
        return;
    atomic_store(&s->stop, 1);
    if (s->db_started)
        pthread_join(s->db_thread, NULL);
    if (s->amqp_started)
        pthread_join(s->amqp_thread, NULL);
    if (s->tenant_started)
        pthread_join(s->tenant_thread, NULL);
    else
        sc_console_tenants_free(&s->tt);
    free(s->tenants);
    free(s->tnames);
    for (size_t i = 0; s->tenr && i < s->nt; i++)
        sc_console_ring_free(&s->tenr[i]);
    free(s->tenr);
    sc_console_ring_free(&s->totr);
    sc_console_ring_free(&s->dbr);
    sc_console_ring_free(&s->amqpr);
    free(s->consumed_per_min);
    free(s->queue_msgs);
    free(s->queue_cons);
    free(s->dlq_msgs);
    free(s->queue_err);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
