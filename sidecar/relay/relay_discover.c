/* tenants.discover in the relay: the listing of tenant_discover.c, made at
 * start and every tenants.discover_ms, turned into tenants joining and
 * leaving the round. A listing that fails changes nothing (logged once per
 * change of its reason); a refused database name is logged once.
 *
 * After the first listing (at start, before the first claim) every listing
 * runs on a thread of its own: a server that swallows connects, or a query
 * that hangs, holds that thread for its timeout, never the relay's claims.
 * The thread leaves its latest result under a mutex, held only to swap a
 * pointer; the relay takes it between two claims and alone changes the
 * round, so the tenants and their state are the relay thread's only. A
 * result the relay has not taken yet is replaced by a newer one. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mysql.h>

#include "lifecycle.h"
#include "log.h"
#include "relay_tenants.h"
#include "tenant.h"
#include "tenant_discover.h"

/* One listing's outcome: the tenants found, or why it failed. */
struct listing {
    int failed;
    struct sc_tenant_found found;
    char why[768];
};

struct sc_relay_discovery {
    const struct sc_config *cfg;
    int discover_ms;
    regex_t names;           /* the listing thread's only, once it runs */
    pthread_t thread;
    int started;
    pthread_mutex_t lock;    /* guards stop and ready */
    pthread_cond_t wake;     /* stop was set */
    int stop;
    struct listing *ready;   /* the latest listing not yet taken, or NULL */
};

static void listing_free(struct listing *l)
{
    if (!l)
        return;
    sc_tenant_found_free(&l->found);
    free(l);
}

/* Lists now. Returns a listing (failed or not), or NULL (out of memory). */
static struct listing *list_now(struct sc_relay_discovery *d)
{
    struct listing *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->failed = sc_tenant_discover(d->cfg, &d->names, &l->found, l->why, sizeof l->why) != 0;
    return l;
}

static int found_has(const struct sc_tenant_found *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->names[i], name) == 0)
            return 1;
    return 0;
}

static void log_refused(struct sc_relay_tenants *ts, const char *db)
{
    if (sc_tenant_refused_first(&ts->refused, &ts->n_refused, db))
        sc_warn("relay: tenants.discover: database %.64s ignored: its tenant part is not a name "
                "tenants.names accepts (logged once)", db);
}

/* Turns a listing into tenants joining and leaving the round (the relay's
 * thread). */
static void apply(struct sc_relay_tenants *ts, const struct listing *l)
{
    if (l->failed) {
        unsigned code = 1 + (unsigned)strlen(l->why);
        if (code != ts->discover_err)
            sc_warn("relay: tenants.discover: %s; the tenants known go on, listed again in %d ms "
                    "(logged again when the reason changes)", l->why, ts->discover_ms);
        ts->discover_err = code;
        return;
    }
    const struct sc_tenant_found *f = &l->found;
    if (ts->discover_err)
        sc_info("relay: tenants.discover: listing works again");
    ts->discover_err = 0;
    for (size_t i = 0; i < f->n_refused; i++)
        log_refused(ts, f->refused[i]);
    for (int i = 0; i < ts->n; i++) {
        struct sc_relay_tenant *t = ts->t[i];
        if (t && !t->gone && !found_has(f, t->name)) {
            sc_info("relay: tenant %s: its database is no longer found: dropped from the round%s",
                    t->name, t->held ? " once its batch in hand is settled" : "");
            sc_relay_tenants_drop(ts, i);
        }
    }
    for (size_t i = 0; i < f->n; i++) {
        int known = 0;
        for (int j = 0; j < ts->n && !known; j++)
            known = ts->t[j] && !ts->t[j]->gone && strcmp(ts->t[j]->name, f->names[i]) == 0;
        if (known)
            continue;
        if (sc_relay_tenants_add(ts, f->names[i])) {
            sc_warn("relay: tenant %s: out of memory: not added, tried at the next listing",
                    f->names[i]);
            continue;
        }
        sc_info("relay: tenant %s: database found, joins the round", f->names[i]);
    }
    atomic_store(&ts->m->tenants, ts->live);
}

static struct timespec deadline(int64_t in_ms)
{
    struct timespec at;
    clock_gettime(CLOCK_MONOTONIC, &at);
    at.tv_sec += (time_t)(in_ms / 1000);
    at.tv_nsec += (long)(in_ms % 1000) * 1000000L;
    if (at.tv_nsec >= 1000000000L) {
        at.tv_sec++;
        at.tv_nsec -= 1000000000L;
    }
    return at;
}

/* Waits until at, or until told to stop. Returns 1 when told to stop. */
static int wait_until(struct sc_relay_discovery *d, const struct timespec *at)
{
    pthread_mutex_lock(&d->lock);
    while (!d->stop && !sc_stop_requested() &&
           pthread_cond_timedwait(&d->wake, &d->lock, at) != ETIMEDOUT)
        ;
    int stop = d->stop || sc_stop_requested();
    pthread_mutex_unlock(&d->lock);
    return stop;
}

static void *discover_main(void *arg)
{
    struct sc_relay_discovery *d = arg;
    mysql_thread_init();
    struct timespec at = deadline(d->discover_ms);
    while (!wait_until(d, &at)) {
        /* Every discover_ms from one listing's start to the next; a listing
         * that took longer is followed by the next at once. */
        at = deadline(d->discover_ms);
        struct listing *l = list_now(d);
        if (!l)
            continue; /* out of memory: the tenants known go on */
        pthread_mutex_lock(&d->lock);
        struct listing *old = d->ready;
        d->ready = l;
        pthread_mutex_unlock(&d->lock);
        listing_free(old);
    }
    mysql_thread_end();
    return NULL;
}

int sc_relay_discover_start(struct sc_relay_tenants *ts)
{
    struct sc_relay_discovery *d = calloc(1, sizeof *d);
    if (!d)
        return -1;
    d->cfg = ts->cfg;
    d->discover_ms = ts->discover_ms;
    char why[768];
    if (sc_tenant_names_compile(ts->cfg->tenants.names, &d->names, why, sizeof why)) {
        free(d); /* the config check compiled it already */
        return -1;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&d->wake, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&d->lock, NULL);
    ts->discovery = d;
    /* At start, on this thread: the first claim already knows the tenants,
     * and nothing is being published yet that a slow listing could hold. */
    struct listing *first = list_now(d);
    if (!first)
        return -1;
    apply(ts, first);
    listing_free(first);
    if (pthread_create(&d->thread, NULL, discover_main, d) != 0) {
        sc_error("relay: tenants.discover: cannot start its listing thread");
        return -1;
    }
    d->started = 1;
    return 0;
}

void sc_relay_discover_refresh(struct sc_relay_tenants *ts)
{
    struct sc_relay_discovery *d = ts->discovery;
    if (!d)
        return;
    pthread_mutex_lock(&d->lock);
    struct listing *l = d->ready;
    d->ready = NULL;
    pthread_mutex_unlock(&d->lock);
    if (!l)
        return;
    apply(ts, l);
    listing_free(l);
}

void sc_relay_discover_free(struct sc_relay_tenants *ts)
{
    struct sc_relay_discovery *d = ts->discovery;
    if (d) {
        if (d->started) {
            pthread_mutex_lock(&d->lock);
            d->stop = 1;
            pthread_cond_signal(&d->wake);
            pthread_mutex_unlock(&d->lock);
            pthread_join(d->thread, NULL);
        }
        listing_free(d->ready);
        regfree(&d->names);
        pthread_cond_destroy(&d->wake);
        pthread_mutex_destroy(&d->lock);
        free(d);
        ts->discovery = NULL;
    }
    for (size_t i = 0; i < ts->n_refused; i++)
        free(ts->refused[i]);
    free(ts->refused);
    ts->refused = NULL;
    ts->n_refused = 0;
}
