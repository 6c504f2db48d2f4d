/* The relay with a `tenants` section: the outbox of every database of
 * tenants.list, or of those tenants.discover finds (relay_discover.c),
 * read through the calls struct sc_relay_ops names.
 *
 * Each claim takes one batch from the next tenant due, round-robin from
 * where the last one left off, so a tenant with a backlog delays another
 * tenant's first event by at most one batch per tenant. A tenant whose
 * claim found nothing is not claimed from again for relay.poll_ms; one
 * whose database failed (missing, refused, lost) not before its backoff,
 * logged once per change of its error. Sessions open on first use, at most
 * tenants.max_connections at once (the least recently used closed first),
 * and close after tenants.idle_close_ms unused. A batch's marks go to its
 * own tenant's database, whatever was claimed since.
 *
 * Backlog gauges: each tenant is counted by its own session (rows PENDING
 * or PUBLISHING, another relay's leased ones too) at its first claim, then
 * at most once per 5 s (longer when the count is slow) while it has rows:
 * a claim found some, or its last count did. One counted empty whose
 * claims have found nothing since is not counted again (0, no query), so
 * idle tenants cost only their claims. The totals and the top
 * tenants.metrics_top go to the metrics once a second. */
#ifndef SC_RELAY_TENANTS_H
#define SC_RELAY_TENANTS_H

#include <stdint.h>

#include "config.h"
#include "metrics.h"
#include "relay_core.h"
#include "relay_db.h"

struct sc_relay_tenant {
    char name[SC_TENANT_MAX + 1];
    char **urls;             /* tenants.database_url with the name in it */
    size_t n_urls;
    struct sc_relay_db db;   /* its session and statements */
    int64_t due_ms;          /* not claimed from before then (idle or down) */
    int64_t last_use_ms;
    unsigned long long fails; /* failures in a row */
    unsigned err_code;       /* the failing state's error code, 0 while healthy */
    int held;                /* its batches claimed and not yet settled */
    int gone;                /* discovery no longer finds it: freed once held is 0 */
    long long pending, age_ms; /* its backlog as last counted */
    int counted_empty;       /* its last count found nothing and no claim found rows since */
};

struct sc_relay_discovery;

struct sc_relay_tenants {
    struct sc_relay_tenant **t; /* NULL: a free slot (a row names its tenant by index) */
    int n, cap, cursor;      /* slots used; the next claim starts at t[cursor] */
    int live;                /* tenants in the round */
    const struct sc_config *cfg;
    const char *worker_id;
    int open, open_cap;      /* sessions open; tenants.max_connections */
    int poll_ms, idle_close_ms, per_aggregate;
    struct sc_relay_tenant *current; /* the tenant of the last statement */
    int closed;              /* db_close since the last db_open (the readiness gauge) */
    MYSQL_BIND *binds;       /* shared by every tenant's statements */
    unsigned long *lens;
    int64_t last_sweep_ms;
    int64_t claim_started_ms; /* when the claim that returned the last rows began */
    struct sc_relay_metrics *m;
    struct sc_relay_metrics scratch; /* what a tenant's gauge query fills */
    struct sc_tenant_value *values; /* the gauges' copy, cap of them */
    /* tenants.discover (relay_discover.c) */
    int discover, discover_ms;
    struct sc_relay_discovery *discovery; /* its listing thread and hand-over */
    char **refused;          /* database names whose refusal was logged */
    size_t n_refused;
    unsigned discover_err;   /* 0 while the last listing worked: its failure is logged once */
    /* called between tenants: keeps the broker connection alive */
    void (*beat)(void *arg);
    void *beat_arg;
};

/* Sets up one entry per tenants.list name, or the tenants discovery finds
 * (none when it fails: it is tried again at each refresh). Returns 0, or
 * -1 (out of memory). */
int sc_relay_tenants_init(struct sc_relay_tenants *ts, const struct sc_config *cfg,
                          const char *worker_id, struct sc_relay_metrics *m);
void sc_relay_tenants_free(struct sc_relay_tenants *ts);

/* struct sc_relay_ops's calls. The claim never fails: a tenant's failure
 * is its own (down with backoff) and the next tenant is tried. */
int sc_relay_tenants_claim(struct sc_relay_tenants *ts, struct sc_relay_row *rows, int max);
int sc_relay_tenants_mark_published(struct sc_relay_tenants *ts, struct sc_relay_row *const *rows,
                                    int n, unsigned char *marked, struct sc_db_err *e);
int sc_relay_tenants_mark_failed(struct sc_relay_tenants *ts, const struct sc_relay_row *row,
                                 struct sc_db_err *e);
int sc_relay_tenants_rollback(struct sc_relay_tenants *ts, struct sc_db_err *e);
/* Closes the session of the last statement's tenant (it failed). */
void sc_relay_tenants_close_current(struct sc_relay_tenants *ts);
void sc_relay_tenants_batch_done(struct sc_relay_tenants *ts, const struct sc_relay_batch *b);
/* ms until the next tenant is due, or an open session's idle_close_ms has
 * passed (at least SC_RELAY_POLL_MIN_MS, at most poll_ms). */
int sc_relay_tenants_idle_wait_ms(const struct sc_relay_tenants *ts);

/* Adds tenant name to the round (reviving it when it was dropped and is
 * still settling). Returns 0, or -1 (out of memory). */
int sc_relay_tenants_add(struct sc_relay_tenants *ts, const char *name);
/* Takes slot i out of the round: freed at once when nothing of it is in
 * hand, else by the first sweep after its last batch is done. */
void sc_relay_tenants_drop(struct sc_relay_tenants *ts, int i);

/* relay_discover.c. The listing runs on a thread of its own, never on the
 * relay's: a server that does not answer holds only that thread. Start
 * lists once on the calling thread (the tenants at start), then starts the
 * thread, which lists again every tenants.discover_ms and leaves each
 * result under a mutex. Returns 0, or -1 (the thread could not start). */
int sc_relay_discover_start(struct sc_relay_tenants *ts);
/* Between claims: takes the thread's latest listing, if one came since the
 * last call, and adds and drops tenants to match. Never waits for a
 * listing. */
void sc_relay_discover_refresh(struct sc_relay_tenants *ts);
/* Stops the thread (waiting out a listing under way: at most one connect
 * or statement timeout) and frees what discovery holds. */
void sc_relay_discover_free(struct sc_relay_tenants *ts);

#endif
