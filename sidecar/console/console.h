/* sidecar console: an operator's page and its JSON API, in its own process.
 *
 * Pieces, one concern a file:
 *   console.c          start-up (tokens, config path), the run loop, stop
 *   console_sample*.c  two sampler threads (database, broker) and an hour of
 *                      samples in memory, shown by console_overview.c (the
 *                      overview, the charts) and console_metrics.c (the
 *                      console's /metrics) without a query per view; see
 *                      console_sampler.h and console_ring.h
 *   console_pool.c     the few database sessions the requests share
 *   console_live_db.c  database reads made for one request (outbox rows, an
 *                      event, an aggregate), each bounded
 *   console_live_dlq.c broker reads made for one request (a dead-letter
 *                      queue's page, a search by id), each bounded
 *   console_text.c     any bytes as a JSON string the page can show
 *   console_action.c   the two actions: dead-letter replay, FAILED -> PENDING
 *   console_http.c     the HTTP server (libmicrohttpd), routes, the checks
 *                      every action passes (POST, token, same origin)
 *   assets/            the page: HTML, CSS and plain JavaScript, embedded in
 *                      the binary at build time (embed.py) */
#ifndef SC_CONSOLE_H
#define SC_CONSOLE_H

#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "config.h"
#include "io/db.h"

/* `sidecar console -c FILE`: serves until SIGTERM/SIGINT. 0 on a clean
 * stop, 1 when it cannot listen, 2 on a bad token file or bad usage. */
int sc_console_run(const struct sc_config *cfg, int argc, char **argv);

/* ---- internal: shared between the console's files ---------------------- */

/* Live queries share a few database sessions; one more waits for none:
 * the request is refused at once, so a database that does not answer holds
 * at most this many threads. */
#define SC_CONSOLE_DB_SLOTS 4
/* Broker requests (a DLQ page) at once, for the same reason. */
#define SC_CONSOLE_AMQP_SLOTS 2
/* The most tokens a token file holds. */
#define SC_CONSOLE_TOKENS_MAX 32

struct sc_console_token {
    char name[64];   /* who, in the action log lines */
    char token[256];
};

struct sc_console_pool {
    pthread_mutex_t lock;
    struct sc_db db[SC_CONSOLE_DB_SLOTS];
    int busy[SC_CONSOLE_DB_SLOTS];
    char tenant[SC_CONSOLE_DB_SLOTS][SC_TENANT_MAX + 1]; /* whose database a session is in:
                                                          "" mysql.url's */
};

struct sc_console_sampler;

struct sc_console {
    const struct sc_config *cfg;
    struct sc_config cfg_short;  /* the same, with the console's shorter connect bounds */
    struct sc_console_token tokens[SC_CONSOLE_TOKENS_MAX];
    int n_tokens;                /* 0: read-only */
    char exe[PATH_MAX];          /* this binary, for `sidecar dlq replay` */
    char config_path[PATH_MAX];  /* the -c FILE it was started with */
    struct sc_console_pool pool;
    atomic_int amqp_busy;
    pthread_mutex_t action_lock; /* one action at a time */
    struct sc_console_sampler *sampler;
};

/* console_tenants.c: the tenant a request names (?tenant=NAME): 0 with
 * *tenant name, one of the tenants now (tenants.list, or those the last
 * listing of tenants.discover found), or NULL when name is NULL
 * (mysql.url's database); -1 with *err and *status (400 a name no tenant
 * can have or a console without tenants, 404 one not a tenant now, 503
 * tenants.discover has not listed them yet). Tenants are named, never
 * numbered, past this: a listing may change the set meanwhile. */
int sc_console_tenant(const struct sc_console *con, const char *name, const char **tenant,
                      json_t **err, unsigned *status);

/* console_sample.c */
struct sc_console_sampler *sc_console_sampler_start(struct sc_console *con);
void sc_console_sampler_stop(struct sc_console_sampler *s);
/* console_overview.c */
/* tenant: a tenant's name, or NULL (not one); one gone since it was checked
 * is a 404 in *status. */
json_t *sc_console_overview(struct sc_console_sampler *s, const char *tenant, unsigned *status);
json_t *sc_console_history(struct sc_console_sampler *s, const char *tenant, unsigned *status);
/* console_metrics.c */
char *sc_console_metrics(struct sc_console_sampler *s); /* Prometheus text, malloc'd */

/* console_pool.c: the pool's lock, and at the end its sessions closed. */
void sc_console_pool_init(struct sc_console_pool *p);
void sc_console_pool_close(struct sc_console_pool *p);

/* The console's database session settings on a fresh connection: READ
 * COMMITTED, a server-side statement time bound. Errors are ignored (a
 * server without the variable). */
void sc_console_db_session(struct sc_db *db);

/* A database session from the pool (slot in *slot) in tenant's database
 * (NULL: mysql.url's), or NULL with *status and *err set (busy: 503 at once;
 * cannot connect: 503 with the error). */
struct sc_db *sc_console_db_get(struct sc_console *con, const char *tenant, int *slot, json_t **err,
                                unsigned *status);
/* Back to the pool; broken: close it (a connection-class error). */
void sc_console_db_put(struct sc_console *con, int slot, int broken);
/* 1 when e is of the connection's class: the session is closed, not reused. */
int sc_console_db_broken(const struct sc_db_err *e);
/* {"error": "database: error N: msg"} and 503/500 by the error's class. */
json_t *sc_console_db_error(const char *what, const struct sc_db_err *e, unsigned *status);

/* console_live_db.c, console_live_dlq.c: each returns a JSON reply and sets
 * *status (HTTP); tenant as for sc_console_db_get. */
json_t *sc_console_outbox_rows(struct sc_console *con, const char *tenant,
                               const char *status_name, const char *after, int limit,
                               unsigned *status);
json_t *sc_console_event(struct sc_console *con, const char *tenant, const char *id,
                         unsigned *status);
json_t *sc_console_aggregate(struct sc_console *con, const char *tenant, const char *type,
                             const char *id, const char *after, int limit, unsigned *status);
/* The dead-letter reads (console_live_dlq.c). tenant: a tenant's name
 * (?tenant=NAME) to keep only the dead letters whose x-sidecar-tenant is
 * it, or NULL for every one. */
json_t *sc_console_dlq(struct sc_console *con, const char *consumer, const char *tenant, int offset,
                       int limit, unsigned *status);
json_t *sc_console_dlq_find(struct sc_console *con, const char *id, const char *tenant,
                            unsigned *status);

/* console_action.c: who names the caller (token name and address). */
json_t *sc_console_replay(struct sc_console *con, const char *who, const char *tenant,
                          const json_t *req, unsigned *status);
json_t *sc_console_set_pending(struct sc_console *con, const char *tenant, const char *who,
                               const json_t *req, unsigned *status);

/* console_http.c */
struct sc_console_http;
struct sc_console_http *sc_console_http_start(struct sc_console *con, char *err, size_t err_len);
void sc_console_http_stop(struct sc_console_http *h);

/* console_assets.c (generated by embed.py from assets/) */
struct sc_console_asset {
    const char *path;          /* "/app.js" */
    const char *content_type;
    const unsigned char *data;
    size_t len;
};
extern const struct sc_console_asset sc_console_assets[];
extern const size_t sc_console_n_assets;

#endif
