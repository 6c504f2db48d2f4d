/* Inside the console's samplers: what one sample of each server reads, and
 * the state those readings are kept in for the page and /metrics.
 *
 * Pieces:
 *   console_sample.c       the two threads; the one writer of the state
 *                          under the lock (it stores every reading)
 *   console_sample_db.c    one database sample (a db_reading)
 *   console_sample_amqp.c  one broker sample (an amqp_reading)
 *   console_sample_tenants.c  one sample of each tenant's database (a
 *                          tenant_reading), one statement a tenant
 *   console_sample_discover.c  with tenants.discover, the listing of the
 *                          tenants, made again every discover_ms
 *   console_overview.c     the overview and the charts' history, as JSON
 *   console_metrics.c      the console's /metrics text */
#ifndef SC_CONSOLE_SAMPLER_H
#define SC_CONSOLE_SAMPLER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "console.h"
#include "console_ring.h"
#include "io/amqp_conn.h"
#include "io/db.h"
#include "tenant_discover.h"

/* A status with more rows than this is shown as the optimiser's estimate. */
#define SC_CONSOLE_CAP_EXACT 100000
#define SC_CONSOLE_QUEUE_ERR_MAX 320 /* "queue NAME: " and a 200-byte reason */

enum { ST_PENDING, ST_PUBLISHING, ST_PUBLISHED, ST_FAILED, N_ST };
/* The outbox's status values, by ST_ index. */
extern const char *const sc_console_st_names[N_ST];

/* How the sampling of one server goes. */
struct server_state {
    int sampled;             /* a sample has finished */
    int ok;                  /* and the last one succeeded */
    char error[300];
    int64_t last_ok_wall_ms;
    int64_t busy_since_ms;   /* monotonic start of the sample running, 0 when idle */
    int64_t last_took_ms;
};

/* A row count, exact up to SC_CONSOLE_CAP_EXACT. */
struct sample_count {
    long long n;  /* -1: not known */
    int exact;
};

/* What one database sample read. */
struct db_reading {
    struct sample_count by_status[N_ST];
    struct sample_count expired;  /* PUBLISHING rows past their lease */
    double oldest_age_s;          /* -1: no PENDING row */
    double publish_per_min;       /* -1: not known (yet) */
    double *consumed_per_min;     /* per consumer, malloc'd; -1: not known (yet) */
};

/* What one broker sample read, per consumer (-1: not known). */
struct amqp_reading {
    long long *counts;            /* 3 x consumers: queue messages, queue consumers,
                                     dead letters; malloc'd */
    char (*queue_err)[SC_CONSOLE_QUEUE_ERR_MAX]; /* why a queue could not be read; malloc'd */
};

/* The database thread's own state from one sample to the next: only
 * console_sample_db.c reads or writes it (console_sample.c sets it up and
 * closes db at the end). */
struct db_sampling {
    struct sc_db db;
    int over[N_ST];               /* the last count of that status hit the cap */
    char w_prev[40];              /* watermark of the last sample ("" before the first) */
    long long b_prev;             /* count(W_prev) at the last sample, -1 unknown */
    long long last_id;            /* highest consumed_event.id seen, -1 before the first */
    int64_t last_sample_ms;
    char ckpt_w[32];              /* the binlog relay's watermark (io/db_watermark.h), "" none */
    char ckpt_prev[32];           /* the same at the last sample */
    int over_before_w;            /* the count of PENDING rows before it hit the cap */
};

/* Tenants (tenants.list or tenants.discover): counts are exact up to
 * this, then shown as "more than" (a sweep over 200 tenants stays cheap). */
#define SC_CONSOLE_TENANT_CAP 10000
/* The overview's per-tenant table: the first this many, then "N more". */
#define SC_CONSOLE_TENANTS_SHOWN 50

/* What one sample of one tenant's database read, and how it went. */
struct tenant_reading {
    int sampled;                  /* a sample has finished */
    int ok;                       /* and the last one succeeded */
    char error[300];              /* why not: "error N: msg" */
    const char *error_class;      /* sc_db_error_class_name, or NULL */
    struct sample_count by_status[N_ST];
    double oldest_age_s;          /* -1: no PENDING row */
    double publish_per_min;       /* -1: not known (yet) */
    double consumed_per_min;      /* every consumer together; -1: not known (yet) */
    int64_t last_ok_wall_ms;
};

/* One tenant's name, as the sampler's state keeps it. */
typedef char sc_console_tenant_name[SC_TENANT_MAX + 1];

/* What the tenants thread keeps of one tenant from one sample to the next:
 * where it reads it, and its last counters for its rates. */
struct tenant_track {
    char qname[80];               /* `database` of the tenant */
    long long published_prev;     /* -1: not known */
    long long max_id_prev;        /* -1: not known */
    int64_t prev_ms;
};

/* With tenants.discover: the listing's own state (console_sample_discover.c). */
struct tenant_discovery {
    regex_t names;                /* tenants.names, compiled */
    int compiled;
    int64_t next_ms;              /* monotonic: the next listing is due then (0: now) */
    char why[768];                /* why the last listing failed, "" when it did not */
    char **refused;               /* database names already logged as refused */
    size_t n_refused;
};

/* The tenants thread's own state: one session (the tenants' databases are
 * on the same server, their names differ: each is read by its qualified
 * name), and each tenant's track, in the order of the sampler's tenants. */
struct tenant_sampling {
    struct sc_db db;
    size_t nt;
    struct tenant_track *track;   /* nt */
    struct tenant_discovery disc;
};

struct sc_console_sampler {
    struct sc_console *con;
    size_t nk;                    /* configured consumers */
    pthread_t db_thread, amqp_thread;
    int db_started, amqp_started;
    atomic_int stop;
    pthread_mutex_t lock;         /* guards everything below that both sides read */

    struct server_state dbs, amqps;
    struct sample_count by_status[N_ST];
    struct sample_count expired;
    double oldest_age_s;          /* -1: no PENDING row */
    double publish_per_min;       /* -1: not known (yet) */
    double *consumed_per_min;     /* nk; -1: not known (yet) */
    long long *queue_msgs, *queue_cons, *dlq_msgs; /* nk each; -1: not known */
    char (*queue_err)[SC_CONSOLE_QUEUE_ERR_MAX];   /* nk: why a queue could not be read */
    struct sc_console_ring dbr;   /* series: backlog, publish/min, oldest age, consumed/min x nk */
    struct sc_console_ring amqpr; /* series: dlq x nk, queue x nk */

    int tenanted;                 /* a tenants section: the overview is of their totals */
    size_t nt;                    /* tenants.list, or those the last listing found */
    sc_console_tenant_name *tnames; /* nt: each tenant's name */
    struct tenant_reading *tenants; /* nt */
    struct sc_console_ring *tenr; /* nt; series: backlog, publish/min, oldest age */
    int listed;                   /* tenants.discover: a listing has succeeded */
    char list_error[768];         /* tenants.discover: why the last listing failed, or "" */
    struct sc_console_ring totr;  /* the same series over every tenant that answered */
    int points;                   /* each ring's length: an hour of samples */
    struct server_state tens;     /* the sweeps over the tenants: busy_since_ms, last_took_ms */
    pthread_t tenant_thread;
    int tenant_started;

    struct db_sampling dbt;       /* not under the lock: the database thread's own */
    struct tenant_sampling tt;    /* not under the lock: the tenants thread's own */
};

/* The wall clock in ms (what the page shows; sc_now_ms is monotonic). */
int64_t sc_console_wall_ms(void);

/* console_sample_db.c: one database sample into out. 0, or -1 with err (a
 * connection-class error closes d->db: the next sample connects again). */
int sc_console_sample_db(struct db_sampling *d, const struct sc_console *con,
                         struct db_reading *out, char *err, size_t err_len);

/* console_sample_tenants.c: sets up t for con's tenants.list (none with
 * tenants.discover: the listing adds them) (0, or -1 out of memory), and
 * frees it. */
int sc_console_tenants_init(struct tenant_sampling *t, const struct sc_console *con);
void sc_console_tenants_free(struct tenant_sampling *t);
/* A new tenant's track: where its database is read, no counters yet. */
void sc_console_tenant_track_init(struct tenant_track *k, const struct sc_console *con,
                                  const char *tenant);
/* One sample of tenant i into out (one statement; the session connected
 * first when it is not). Always fills out: ok 0 with the error when the
 * tenant's database could not be read. */
void sc_console_sample_tenant(struct tenant_sampling *t, const struct sc_console *con, size_t i,
                              struct tenant_reading *out);

/* console_sample_discover.c, on the tenants thread: when discover_ms has
 * passed since the last listing (or none was made), lists the tenants now.
 * Returns 1 with *found (free with sc_tenant_found_free), its names
 * sorted by strcmp (a refused name is logged once); 0 when no listing was
 * due or it failed (d->why says why; logged once per change of reason). */
int sc_console_discover_due(struct tenant_discovery *d, const struct sc_console *con,
                            struct sc_tenant_found *found);
void sc_console_discover_free(struct tenant_discovery *d);

/* console_tenants.c, under the sampler's lock: the index of tenant name
 * among the tenants now, or -1. */
int sc_console_tenant_index(const struct sc_console_sampler *s, const char *name);
/* console_tenants.c, under the sampler's lock: one tenant's row; the
 * table of the first SC_CONSOLE_TENANTS_SHOWN (unreachable first, then by
 * backlog) with "more" and the total line; the total line alone. */
json_t *sc_console_tenant_json(const struct sc_console_sampler *s, size_t i);
json_t *sc_console_tenants_table(const struct sc_console_sampler *s);
json_t *sc_console_tenants_total(const struct sc_console_sampler *s);

/* console_sample_amqp.c: one broker sample, a passive declare of every
 * consumer's queue and dead-letter queue (connecting first when a is not).
 * 0 with out filled, or -1 with err (a connection gone is closed). */
int sc_console_sample_amqp(const struct sc_console *con, struct sc_amqp *a,
                           struct amqp_reading *out, char *err, size_t err_len);

#endif
