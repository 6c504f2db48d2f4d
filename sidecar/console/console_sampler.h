/* Inside the console's samplers: what one sample of each server reads, and
 * the state those readings are kept in for the page and /metrics.
 *
 * Pieces:
 *   console_sample.c       the two threads; the one writer of the state
 *                          under the lock (it stores every reading)
 *   console_sample_db.c    one database sample (a db_reading)
 *   console_sample_amqp.c  one broker sample (an amqp_reading)
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

    struct db_sampling dbt;       /* not under the lock: the database thread's own */
};

/* The wall clock in ms (what the page shows; sc_now_ms is monotonic). */
int64_t sc_console_wall_ms(void);

/* console_sample_db.c: one database sample into out. 0, or -1 with err (a
 * connection-class error closes d->db: the next sample connects again). */
int sc_console_sample_db(struct db_sampling *d, const struct sc_console *con,
                         struct db_reading *out, char *err, size_t err_len);

/* console_sample_amqp.c: one broker sample, a passive declare of every
 * consumer's queue and dead-letter queue (connecting first when a is not).
 * 0 with out filled, or -1 with err (a connection gone is closed). */
int sc_console_sample_amqp(const struct sc_console *con, struct sc_amqp *a,
                           struct amqp_reading *out, char *err, size_t err_len);

#endif
