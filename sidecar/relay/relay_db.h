/* The relay's statements on MariaDB/MySQL: the claim, the marks and the
 * backlog gauges, behind the calls struct sc_relay_ops names. */
#ifndef SC_RELAY_DB_H
#define SC_RELAY_DB_H

#include "io/db.h"
#include "metrics.h"
#include "relay_core.h"

struct sc_relay_db {
    struct sc_db db;
    const struct sc_config *cfg;
    const char *worker_id;
    int batch, lease_ms;
    int per_aggregate; /* relay.ordering "per_aggregate": only aggregate heads are claimed */
    MYSQL_STMT *claim_update;   /* SET PUBLISHING ... WHERE event_id IN (batch placeholders) */
    MYSQL_STMT *still_owned;    /* SELECT ... FOR UPDATE: which of the batch we still lease */
    MYSQL_STMT *mark_published; /* SET PUBLISHED ... WHERE IN (...) AND status AND lease_owner */
    MYSQL_STMT *mark_failed;    /* SET FAILED ... WHERE event_id = ? AND status AND lease_owner */
    MYSQL_BIND *binds;
    unsigned long *lens;
    char *const *urls;  /* a tenant's database (its nodes), NULL: mysql.url */
    size_t n_urls;
    int shared;         /* binds and lens belong to the tenants' pool */
    int64_t last_gauge_ms, gauge_interval_ms;
    int last_expired;   /* rows the last claim took back from expired leases */
};

/* Returns 0, or -1 out of memory. */
int sc_relay_db_init(struct sc_relay_db *d, const struct sc_config *cfg, const char *worker_id);
void sc_relay_db_free(struct sc_relay_db *d);

/* The same for one tenant's database urls[0..n): binds and lens (batch + 2
 * each) are the pool's, shared by its tenants (one statement runs at a
 * time), and not freed here. */
void sc_relay_db_init_tenant(struct sc_relay_db *d, const struct sc_config *cfg, const char *worker_id,
                             char *const *urls, size_t n_urls, MYSQL_BIND *binds, unsigned long *lens);

/* Connects (READ COMMITTED), checks the server settings, prepares. */
int sc_relay_db_open(struct sc_relay_db *d, struct sc_db_err *e);
void sc_relay_db_close(struct sc_relay_db *d);
int sc_relay_db_is_open(const struct sc_relay_db *d);
int sc_relay_db_rollback(struct sc_relay_db *d, struct sc_db_err *e);

/* The calls of struct sc_relay_ops (same contracts). */
int sc_relay_db_claim(struct sc_relay_db *d, struct sc_relay_row *rows, int max, struct sc_db_err *e);
int sc_relay_db_mark_published(struct sc_relay_db *d, struct sc_relay_row *const *rows, int n,
                               unsigned char *marked, struct sc_db_err *e);
int sc_relay_db_mark_failed(struct sc_relay_db *d, const struct sc_relay_row *row,
                            struct sc_db_err *e);

/* The pending-count and oldest-pending-age gauges, refreshed when due, read
 * on db (the relay's own, or the binlog source's). */
void sc_relay_db_refresh_gauges(struct sc_relay_db *d, struct sc_db *db, struct sc_relay_metrics *m);

/* Logs the two claim statements at debug level. */
void sc_relay_db_log_claim_sql(int batch, int per_aggregate);

/* Fills o from a row of the claim's columns (event_id, aggregate_type,
 * aggregate_id, event_type, event_version, payload, created_at,
 * traceparent, tracestate). Returns nonzero when an allocation failed. */
int sc_relay_row_take(struct sc_relay_row *o, MYSQL_ROW row);

#endif
