/* The relay with a `tenants` section: the outbox of every database of
 * tenants.list, read through the calls struct sc_relay_ops names.
 *
 * Each claim takes one batch from the next tenant due, round-robin from
 * where the last one left off, so a tenant with a backlog delays another
 * tenant's first event by at most one batch per tenant. A tenant whose
 * claim found nothing is not claimed from again for relay.poll_ms; one
 * whose database failed (missing, refused, lost) not before its backoff,
 * logged once per change of its error. Sessions open on first use, at most
 * tenants.max_connections at once (the least recently used closed first),
 * and close after tenants.idle_close_ms unused. A batch's marks go to its
 * own tenant's database, whatever was claimed since. */
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
};

struct sc_relay_tenants {
    struct sc_relay_tenant *t;
    int n, cursor;           /* the next claim starts at t[cursor] */
    int open, open_cap;      /* sessions open; tenants.max_connections */
    int poll_ms, idle_close_ms, per_aggregate;
    struct sc_relay_tenant *current; /* the tenant of the last statement */
    int closed;              /* db_close since the last db_open (the readiness gauge) */
    MYSQL_BIND *binds;       /* shared by every tenant's statements */
    unsigned long *lens;
    int64_t last_sweep_ms;
    struct sc_relay_metrics *m;
    /* called between tenants: keeps the broker connection alive */
    void (*beat)(void *arg);
    void *beat_arg;
};

/* Sets up one entry per tenants.list name. Returns 0, or -1 (out of
 * memory). */
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
/* ms until the next tenant is due (at least SC_RELAY_POLL_MIN_MS, at most
 * poll_ms). */
int sc_relay_tenants_idle_wait_ms(const struct sc_relay_tenants *ts);

#endif
