/* The console's samplers: one thread asks the database, one the broker,
 * every console.sample_ms, and an hour of their answers is kept in memory.
 * Every page view, chart and /metrics scrape reads these, so the console's
 * cost on the servers is this loop's, whatever the number of viewers.
 *
 * What each database sample reads (all through indexes, none through a scan
 * of the outbox, so the cost does not grow with the table):
 *   - rows per status: a COUNT over one range of ix_outbox_event_claim
 *     capped at CAP_EXACT entries; a status with more is shown as the
 *     optimiser's estimate for that range (EXPLAIN, no rows read), marked
 *     "about", and counted exactly again once the estimate falls under half
 *     the cap;
 *   - the oldest PENDING row: MIN(created_at) for one status value, read
 *     off the end of the same index;
 *   - expired leases: a capped COUNT over ix_outbox_event_lease;
 *   - publishing rate: PUBLISHED rows whose created_at is at or after a
 *     watermark W (the oldest PENDING row, or 5 s ago when none is older),
 *     counted twice per sample: rows published since the last sample are
 *     count(W_prev) now - count(W_prev) then. Only the recent end of the
 *     index is read (rows created after W), capped at CAP_WINDOW;
 *   - consumption per consumer: consumed_event rows with an id above the
 *     last one seen (a primary key range: the new rows only), grouped by
 *     consumer; a gap over CAP_WINDOW is skipped, not read. */
#include <amqp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "console.h"
#include "io/amqp_conn.h"
#include "io/db_rows.h"
#include "io/url.h"
#include "lifecycle.h"
#include "log.h"

#define CAP_EXACT 100000
#define CAP_WINDOW 1000000
#define WATERMARK_SLACK "5" /* seconds: longer than a producer's transaction */
#define HISTORY_MS 3600000  /* an hour of samples */
#define QUEUE_ERR_MAX 320   /* "queue NAME: " and a 200-byte reason */

enum { ST_PENDING, ST_PUBLISHING, ST_PUBLISHED, ST_FAILED, N_ST };
static const char *const st_names[N_ST] = {"PENDING", "PUBLISHING", "PUBLISHED", "FAILED"};

struct server_state {
    int sampled;             /* a sample has finished */
    int ok;                  /* and the last one succeeded */
    char error[300];
    int64_t last_ok_wall_ms;
    int64_t busy_since_ms;   /* monotonic start of the sample running, 0 when idle */
    int64_t last_took_ms;
};

struct count {
    long long n;  /* -1: not known */
    int exact;
};

struct ring {
    int cap, head, len;      /* head: the next slot written */
    int64_t *t;              /* wall clock, ms */
    double **series;         /* n_series arrays of cap values; NaN-free: -1 means none */
    int n_series;
};

struct sc_console_sampler {
    struct sc_console *con;
    size_t nk;                /* configured consumers */
    pthread_t db_thread, amqp_thread;
    int db_started, amqp_started;
    atomic_int stop;
    pthread_mutex_t lock;     /* guards everything below that both sides read */

    struct server_state dbs, amqps;
    struct count st[N_ST];
    struct count expired;
    double oldest_age_s;      /* -1: no PENDING row */
    double publish_per_min;   /* -1: not known (yet) */
    double *consumed_per_min; /* nk; -1: not known (yet) */
    long long *queue_msgs, *queue_cons, *dlq_msgs; /* nk each; -1: not known */
    char (*queue_err)[QUEUE_ERR_MAX]; /* nk: why a queue could not be read */
    struct ring dbr;          /* series: backlog, publish/min, oldest age, consumed/min x nk */
    struct ring amqpr;        /* series: dlq x nk, queue x nk */

    /* the database thread's own state */
    struct sc_db db;
    int over[N_ST];           /* the last count of that status hit the cap */
    char w_prev[40];          /* watermark of the last sample ("" before the first) */
    long long b_prev;         /* count(W_prev) at the last sample, -1 unknown */
    long long last_id;        /* highest consumed_event.id seen, -1 before the first */
    int64_t last_sample_ms;
};

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int ring_init(struct ring *r, int cap, int n_series)
{
    memset(r, 0, sizeof *r);
    r->cap = cap;
    r->n_series = n_series;
    r->t = calloc((size_t)cap, sizeof *r->t);
    r->series = calloc((size_t)n_series + 1, sizeof *r->series);
    if (!r->t || !r->series)
        return -1;
    for (int i = 0; i < n_series; i++)
        if (!(r->series[i] = calloc((size_t)cap, sizeof **r->series)))
            return -1;
    return 0;
}

static void ring_free(struct ring *r)
{
    for (int i = 0; r->series && i < r->n_series; i++)
        free(r->series[i]);
    free(r->series);
    free(r->t);
}

/* Appends one point (values has n_series entries). */
static void ring_push(struct ring *r, int64_t t, const double *values)
{
    r->t[r->head] = t;
    for (int i = 0; i < r->n_series; i++)
        r->series[i][r->head] = values[i];
    r->head = (r->head + 1) % r->cap;
    if (r->len < r->cap)
        r->len++;
}

/* The ring's points oldest first: {"t": [...], names[i]: [...]}; a value
 * of -1 is null (not known at that sample). */
static json_t *ring_json(const struct ring *r, const char *const *names)
{
    json_t *t = json_array(), *out = json_object();
    json_t **cols = calloc((size_t)r->n_series, sizeof *cols);
    if (!t || !out || !cols) {
        json_decref(t);
        json_decref(out);
        free(cols);
        return NULL;
    }
    for (int i = 0; i < r->n_series; i++)
        cols[i] = json_array();
    for (int k = 0; k < r->len; k++) {
        int at = (r->head - r->len + k + r->cap) % r->cap;
        json_array_append_new(t, json_integer(r->t[at]));
        for (int i = 0; i < r->n_series; i++) {
            double v = r->series[i][at];
            json_array_append_new(cols[i], v < 0 ? json_null() : json_real(v));
        }
    }
    json_object_set_new(out, "t", t);
    for (int i = 0; i < r->n_series; i++)
        json_object_set_new(out, names[i], cols[i]);
    free(cols);
    return out;
}

/* The first cell of a one-row answer, copied to out ("" and *null = 1 for
 * SQL NULL). Returns 0, or -1 with e filled. */
static int scalar(struct sc_db *db, const char *sql, const char *param, char *out, size_t len,
                  int *null, struct sc_db_err *e)
{
    struct sc_rows rows;
    if (sc_db_select_params(db, sql, param ? &param : NULL, param ? 1 : 0, 1, 0, &rows, e))
        return -1;
    const char *v = sc_rows_get(&rows, 0, 0);
    snprintf(out, len, "%s", v ? v : "");
    if (null)
        *null = v == NULL;
    sc_rows_free(&rows);
    return 0;
}

/* The optimiser's row estimate for one status range (EXPLAIN reads no rows). */
static int estimate(struct sc_db *db, int st, long long *n, struct sc_db_err *e)
{
    char sql[200];
    snprintf(sql, sizeof sql, "EXPLAIN SELECT 1 FROM outbox_event FORCE INDEX (ix_outbox_event_claim) "
                              "WHERE status = '%s'", st_names[st]);
    MYSQL_RES *r = sc_db_select(db, sql, e);
    if (!r)
        return -1;
    unsigned nf = mysql_num_fields(r);
    MYSQL_FIELD *f = mysql_fetch_fields(r);
    MYSQL_ROW row = mysql_fetch_row(r);
    *n = -1;
    for (unsigned i = 0; row && i < nf; i++)
        if (strcmp(f[i].name, "rows") == 0 && row[i])
            *n = atoll(row[i]);
    mysql_free_result(r);
    return 0;
}

static int count_status(struct sc_console_sampler *s, int st, struct count *out,
                        struct sc_db_err *e)
{
    char sql[300], v[32];
    if (s->over[st]) {
        long long est;
        if (estimate(&s->db, st, &est, e))
            return -1;
        if (est >= CAP_EXACT / 2) {
            out->n = est;
            out->exact = 0;
            return 0;
        }
    }
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*) FROM (SELECT 1 FROM outbox_event FORCE INDEX (ix_outbox_event_claim) "
             "WHERE status = '%s' LIMIT %d) capped", st_names[st], CAP_EXACT + 1);
    if (scalar(&s->db, sql, NULL, v, sizeof v, NULL, e))
        return -1;
    long long n = atoll(v);
    s->over[st] = n > CAP_EXACT;
    if (!s->over[st]) {
        out->n = n;
        out->exact = 1;
        return 0;
    }
    long long est;
    if (estimate(&s->db, st, &est, e))
        return -1;
    out->n = est > CAP_EXACT ? est : CAP_EXACT + 1;
    out->exact = 0;
    return 0;
}

/* PUBLISHED rows created at or after w, or -1 past the cap. */
static int published_since(struct sc_db *db, const char *w, long long *n, struct sc_db_err *e)
{
    char v[32];
    static const char sql[] =
        "SELECT COUNT(*) FROM (SELECT 1 FROM outbox_event FORCE INDEX (ix_outbox_event_claim) "
        "WHERE status = 'PUBLISHED' AND created_at >= ? LIMIT 1000001) capped";
    if (scalar(db, sql, w, v, sizeof v, NULL, e))
        return -1;
    *n = atoll(v);
    if (*n > CAP_WINDOW)
        *n = -1;
    return 0;
}

static int db_sample(struct sc_console_sampler *s, char *err, size_t err_len)
{
    struct sc_db_err e = {0};
    struct sc_console *con = s->con;
    if (!sc_db_connected(&s->db)) {
        if (sc_db_connect(&s->db, &con->cfg_short, &e))
            goto fail;
        sc_console_db_session(&s->db);
    }
    int64_t now = sc_now_ms();
    double minutes = s->last_sample_ms ? (double)(now - s->last_sample_ms) / 60000.0 : 0;

    struct count st[N_ST], expired = {-1, 0};
    for (int i = 0; i < N_ST; i++)
        if (count_status(s, i, &st[i], &e))
            goto fail;
    char v[64];
    if (scalar(&s->db,
               "SELECT COUNT(*) FROM (SELECT 1 FROM outbox_event FORCE INDEX (ix_outbox_event_lease) "
               "WHERE status = 'PUBLISHING' AND lease_until < UTC_TIMESTAMP(6) LIMIT 100001) capped",
               NULL, v, sizeof v, NULL, &e))
        goto fail;
    expired.n = atoll(v);
    expired.exact = expired.n <= CAP_EXACT;

    /* The oldest PENDING row's age and the watermark, in one statement:
     * both MIN()s are one dive to the start of a status's index range. */
    struct sc_rows rows;
    if (sc_db_select_params(&s->db,
            "SELECT TIMESTAMPDIFF(MICROSECOND, (SELECT MIN(created_at) FROM outbox_event "
            "WHERE status = 'PENDING'), UTC_TIMESTAMP(6)), "
            "LEAST(COALESCE((SELECT MIN(created_at) FROM outbox_event WHERE status = 'PENDING'), "
            "'9999-12-31 00:00:00'), UTC_TIMESTAMP(6) - INTERVAL " WATERMARK_SLACK " SECOND)",
            NULL, 0, 1, 0, &rows, &e))
        goto fail;
    const char *age_us = sc_rows_get(&rows, 0, 0), *w = sc_rows_get(&rows, 0, 1);
    double oldest = age_us ? (double)atoll(age_us) / 1e6 : -1;
    char w_now[40];
    snprintf(w_now, sizeof w_now, "%s", w ? w : "");
    sc_rows_free(&rows);

    double pub_per_min = -1;
    long long b_now = -1;
    if (w_now[0] && published_since(&s->db, w_now, &b_now, &e))
        goto fail;
    if (s->w_prev[0] && s->b_prev >= 0 && minutes > 0) {
        long long a_now;
        if (published_since(&s->db, s->w_prev, &a_now, &e))
            goto fail;
        if (a_now >= 0 && a_now >= s->b_prev)
            pub_per_min = (double)(a_now - s->b_prev) / minutes;
    }

    /* Consumption since the last sample: new primary keys only. */
    double *per_min = calloc(s->nk ? s->nk : 1, sizeof *per_min);
    if (!per_min) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    for (size_t k = 0; k < s->nk; k++)
        per_min[k] = -1;
    int null = 0;
    if (scalar(&s->db, "SELECT MAX(id) FROM consumed_event", NULL, v, sizeof v, &null, &e)) {
        free(per_min);
        goto fail;
    }
    long long hi = null ? 0 : atoll(v);
    if (s->last_id >= 0 && minutes > 0 && hi - s->last_id <= CAP_WINDOW) {
        char lo_s[32], hi_s[32];
        snprintf(lo_s, sizeof lo_s, "%lld", s->last_id);
        snprintf(hi_s, sizeof hi_s, "%lld", hi);
        const char *p[2] = {lo_s, hi_s};
        if (sc_db_select_params(&s->db,
                "SELECT consumer_name, COUNT(*) FROM consumed_event WHERE id > ? AND id <= ? "
                "GROUP BY consumer_name ORDER BY NULL", p, 2, 1000, 0, &rows, &e)) {
            free(per_min);
            goto fail;
        }
        for (size_t k = 0; k < s->nk; k++)
            per_min[k] = 0;
        for (size_t r = 0; r < rows.n_rows; r++)
            for (size_t k = 0; k < s->nk; k++)
                if (strcmp(sc_rows_get(&rows, r, 0), con->cfg->consumers[k].name) == 0)
                    per_min[k] = (double)atoll(sc_rows_get(&rows, r, 1)) / minutes;
        sc_rows_free(&rows);
    }
    s->last_id = hi < s->last_id ? s->last_id : hi;
    sc_db_rollback(&s->db, &e); /* end the reads' transaction */

    snprintf(s->w_prev, sizeof s->w_prev, "%s", w_now);
    s->b_prev = b_now;
    s->last_sample_ms = now;

    double backlog = st[ST_PENDING].n >= 0 && st[ST_PUBLISHING].n >= 0
                         ? (double)(st[ST_PENDING].n + st[ST_PUBLISHING].n) : -1;
    double *pt = calloc(3 + s->nk, sizeof *pt);
    pthread_mutex_lock(&s->lock);
    memcpy(s->st, st, sizeof st);
    s->expired = expired;
    s->oldest_age_s = oldest;
    s->publish_per_min = pub_per_min;
    memcpy(s->consumed_per_min, per_min, s->nk * sizeof *per_min);
    if (pt) {
        pt[0] = backlog;
        pt[1] = pub_per_min;
        pt[2] = oldest < 0 ? 0 : oldest;
        for (size_t k = 0; k < s->nk; k++)
            pt[3 + k] = per_min[k];
        ring_push(&s->dbr, wall_ms(), pt);
    }
    pthread_mutex_unlock(&s->lock);
    free(pt);
    free(per_min);
    return 0;
fail:
    snprintf(err, err_len, "error %u: %s", e.code, e.msg);
    if (e.cls == SC_DBERR_CONNECTION || !e.code || e.code >= 2000)
        sc_db_close(&s->db);
    else
        sc_db_rollback(&s->db, &e);
    return -1;
}

/* A passive queue.declare: the queue's depth and consumers. Returns 0; 1
 * when the broker refused it (no such queue, or not allowed: err says,
 * and the channel is open again); -1 when the connection is gone. */
static int passive_declare(struct sc_amqp *a, const char *queue, long long *msgs,
                           long long *cons, char *err, size_t err_len)
{
    amqp_queue_declare_ok_t *ok = amqp_queue_declare(a->conn, SC_AMQP_CHANNEL,
                                                     amqp_cstring_bytes(queue), 1, 0, 0, 0,
                                                     amqp_empty_table);
    if (ok) {
        *msgs = ok->message_count;
        *cons = ok->consumer_count;
        return 0;
    }
    amqp_rpc_reply_t r = amqp_get_rpc_reply(a->conn);
    if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION && r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_t *m = r.reply.decoded;
        snprintf(err, err_len, "%.*s", (int)m->reply_text.len, (const char *)m->reply_text.bytes);
        amqp_channel_close_ok_t close_ok;
        if (amqp_send_method(a->conn, SC_AMQP_CHANNEL, AMQP_CHANNEL_CLOSE_OK_METHOD, &close_ok) ||
            !amqp_channel_open(a->conn, SC_AMQP_CHANNEL))
            return -1;
        return 1;
    }
    snprintf(err, err_len, "%s", r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION
                                     ? amqp_error_string2(r.library_error)
                                     : "the broker closed the connection");
    return -1;
}

static int amqp_sample(struct sc_console_sampler *s, struct sc_amqp *a, char *err, size_t err_len)
{
    struct sc_console *con = s->con;
    if (!sc_amqp_connected(a) && sc_amqp_connect(a, &con->cfg_short, "sidecar console", err, err_len))
        return -1;
    size_t nk = s->nk;
    long long *v = calloc(3 * (nk ? nk : 1), sizeof *v);
    char (*qe)[QUEUE_ERR_MAX] = calloc(nk ? nk : 1, sizeof *qe);
    if (!v || !qe) {
        free(v);
        free(qe);
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    for (size_t k = 0; k < nk; k++) {
        const struct sc_consumer_config *c = &con->cfg->consumers[k];
        long long dlq_cons = 0;
        char why[200] = "";
        v[k] = v[nk + k] = v[2 * nk + k] = -1;
        int rc = passive_declare(a, c->queue, &v[k], &v[nk + k], why, sizeof why);
        if (rc == 1)
            snprintf(qe[k], sizeof qe[k], "queue %s: %s", c->queue, why);
        if (rc >= 0) {
            rc = passive_declare(a, c->dead_letter_queue, &v[2 * nk + k], &dlq_cons, why, sizeof why);
            if (rc == 1 && !qe[k][0])
                snprintf(qe[k], sizeof qe[k], "queue %s: %s", c->dead_letter_queue, why);
        }
        if (rc < 0) {
            snprintf(err, err_len, "%s", why);
            sc_amqp_close(a);
            free(v);
            free(qe);
            return -1;
        }
    }
    double *pt = calloc(2 * nk + 1, sizeof *pt);
    pthread_mutex_lock(&s->lock);
    memcpy(s->queue_msgs, v, nk * sizeof *v);
    memcpy(s->queue_cons, v + nk, nk * sizeof *v);
    memcpy(s->dlq_msgs, v + 2 * nk, nk * sizeof *v);
    memcpy(s->queue_err, qe, nk * sizeof *qe);
    if (pt) {
        for (size_t k = 0; k < nk; k++) {
            pt[k] = (double)v[2 * nk + k];
            pt[nk + k] = (double)v[k];
        }
        ring_push(&s->amqpr, wall_ms(), pt);
    }
    pthread_mutex_unlock(&s->lock);
    free(pt);
    free(v);
    free(qe);
    return 0;
}

static void mark_busy(struct sc_console_sampler *s, struct server_state *st)
{
    pthread_mutex_lock(&s->lock);
    st->busy_since_ms = sc_now_ms();
    pthread_mutex_unlock(&s->lock);
}

static void mark_done(struct sc_console_sampler *s, struct server_state *st, const char *who,
                      int rc, const char *err)
{
    pthread_mutex_lock(&s->lock);
    int was_ok = st->ok, was_sampled = st->sampled;
    st->last_took_ms = sc_now_ms() - st->busy_since_ms;
    st->busy_since_ms = 0;
    st->sampled = 1;
    st->ok = rc == 0;
    if (rc == 0)
        st->last_ok_wall_ms = wall_ms();
    snprintf(st->error, sizeof st->error, "%s", rc ? err : "");
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
        mark_busy(s, &s->dbs);
        int rc = db_sample(s, err, sizeof err);
        mark_done(s, &s->dbs, "database", rc, err);
        wait_tick(s, t0);
    }
    struct sc_db_err e = {0};
    if (sc_db_connected(&s->db))
        sc_db_rollback(&s->db, &e);
    sc_db_close(&s->db);
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
        mark_busy(s, &s->amqps);
        int rc = amqp_sample(s, &a, err, sizeof err);
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
    s->b_prev = -1;
    s->last_id = -1;
    for (int i = 0; i < N_ST; i++)
        s->st[i].n = -1;
    s->expired.n = -1;
    size_t nk1 = s->nk ? s->nk : 1;
    s->consumed_per_min = malloc(nk1 * sizeof *s->consumed_per_min);
    s->queue_msgs = malloc(nk1 * sizeof *s->queue_msgs);
    s->queue_cons = malloc(nk1 * sizeof *s->queue_cons);
    s->dlq_msgs = malloc(nk1 * sizeof *s->dlq_msgs);
    s->queue_err = calloc(nk1, sizeof *s->queue_err);
    int points = HISTORY_MS / con->cfg->console_sample_ms;
    if (!s->consumed_per_min || !s->queue_msgs || !s->queue_cons || !s->dlq_msgs ||
        !s->queue_err || ring_init(&s->dbr, points, 3 + (int)s->nk) ||
        ring_init(&s->amqpr, points, 2 * (int)s->nk)) {
        sc_console_sampler_stop(s);
        return NULL;
    }
    for (size_t k = 0; k < s->nk; k++)
        s->consumed_per_min[k] = s->queue_msgs[k] = s->queue_cons[k] = s->dlq_msgs[k] = -1;
    s->db_started = pthread_create(&s->db_thread, NULL, db_loop, s) == 0;
    s->amqp_started = pthread_create(&s->amqp_thread, NULL, amqp_loop, s) == 0;
    if (!s->db_started || !s->amqp_started) {
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
    ring_free(&s->dbr);
    ring_free(&s->amqpr);
    free(s->consumed_per_min);
    free(s->queue_msgs);
    free(s->queue_cons);
    free(s->dlq_msgs);
    free(s->queue_err);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* A server's state as the page shows it: "ok", "error" (the last sample
 * failed: error says why), "stalled" (a sample has run for over 5 s: the
 * server does not answer), "unknown" (no sample has finished yet). */
static json_t *server_json(const struct server_state *st, const char *endpoint)
{
    int64_t now = sc_now_ms();
    const char *state = !st->sampled ? "unknown" : st->ok ? "ok" : "error";
    double busy_s = st->busy_since_ms ? (double)(now - st->busy_since_ms) / 1000.0 : 0;
    if (busy_s > 5)
        state = "stalled";
    json_t *o = json_pack("{s:s, s:s, s:f, s:I}", "state", state, "endpoint", endpoint,
                          "busy_s", busy_s, "last_took_ms", (json_int_t)st->last_took_ms);
    json_object_set_new(o, "error", st->error[0] ? json_string(st->error) : json_null());
    json_object_set_new(o, "last_ok", st->last_ok_wall_ms ? json_integer(st->last_ok_wall_ms)
                                                            : json_null());
    return o;
}

static json_t *num_or_null(long long v)
{
    return v < 0 ? json_null() : json_integer(v);
}

static json_t *real_or_null(double v)
{
    return v < 0 ? json_null() : json_real(v);
}

json_t *sc_console_overview(struct sc_console_sampler *s)
{
    struct sc_console *con = s->con;
    char db_ep[300] = "", amqp_ep[300] = "";
    sc_url_endpoint(con->cfg->mysql_url, db_ep, sizeof db_ep);
    sc_url_endpoint(con->cfg->amqp_url, amqp_ep, sizeof amqp_ep);
    json_t *out = json_object();
    pthread_mutex_lock(&s->lock);
    json_object_set_new(out, "time", json_integer(wall_ms()));
    json_object_set_new(out, "sample_ms", json_integer(con->cfg->console_sample_ms));
    json_object_set_new(out, "read_only", json_boolean(con->n_tokens == 0));
    json_object_set_new(out, "database", server_json(&s->dbs, db_ep));
    json_object_set_new(out, "broker", server_json(&s->amqps, amqp_ep));
    json_t *counts = json_object();
    for (int i = 0; i < N_ST; i++)
        json_object_set_new(counts, st_names[i],
                            json_pack("{s:o, s:b}", "n", num_or_null(s->st[i].n), "exact",
                                      s->st[i].exact));
    json_object_set_new(out, "outbox",
        json_pack("{s:o, s:o, s:o, s:o}", "counts", counts, "oldest_pending_age_s",
                  real_or_null(s->oldest_age_s), "expired_leases", num_or_null(s->expired.n),
                  "published_per_min", real_or_null(s->publish_per_min)));
    json_t *cs = json_array();
    for (size_t k = 0; k < s->nk; k++) {
        const struct sc_consumer_config *c = &con->cfg->consumers[k];
        json_t *o = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:o}", "name", c->name, "queue",
                              c->queue, "dead_letter_queue", c->dead_letter_queue,
                              "queue_messages", num_or_null(s->queue_msgs[k]), "queue_consumers",
                              num_or_null(s->queue_cons[k]), "dlq_messages",
                              num_or_null(s->dlq_msgs[k]), "consumed_per_min",
                              real_or_null(s->consumed_per_min[k]));
        json_object_set_new(o, "queue_error", s->queue_err[k][0] ? json_string(s->queue_err[k])
                                                                 : json_null());
        json_array_append_new(cs, o);
    }
    json_object_set_new(out, "consumers", cs);
    pthread_mutex_unlock(&s->lock);
    return out;
}

json_t *sc_console_history(struct sc_console_sampler *s)
{
    size_t nk = s->nk;
    const char **db_names = calloc(3 + nk, sizeof *db_names);
    const char **amqp_names = calloc(2 * nk + 1, sizeof *amqp_names);
    char (*labels)[160] = calloc(3 * nk + 1, sizeof *labels);
    json_t *out = NULL;
    if (!db_names || !amqp_names || !labels)
        goto done;
    db_names[0] = "backlog";
    db_names[1] = "published_per_min";
    db_names[2] = "oldest_pending_age_s";
    for (size_t k = 0; k < nk; k++) {
        const char *n = s->con->cfg->consumers[k].name;
        snprintf(labels[k], sizeof labels[k], "consumed_per_min:%s", n);
        snprintf(labels[nk + k], sizeof labels[nk + k], "dlq_messages:%s", n);
        snprintf(labels[2 * nk + k], sizeof labels[2 * nk + k], "queue_messages:%s", n);
        db_names[3 + k] = labels[k];
        amqp_names[k] = labels[nk + k];
        amqp_names[nk + k] = labels[2 * nk + k];
    }
    pthread_mutex_lock(&s->lock);
    json_t *dbj = ring_json(&s->dbr, db_names), *aj = ring_json(&s->amqpr, amqp_names);
    pthread_mutex_unlock(&s->lock);
    out = json_pack("{s:i, s:o?, s:o?}", "sample_ms", s->con->cfg->console_sample_ms,
                    "database", dbj, "broker", aj);
done:
    free(db_names);
    free(amqp_names);
    free(labels);
    return out;
}

struct text {
    char *p;
    size_t len, cap;
};

__attribute__((format(printf, 2, 3))) static void add(struct text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = (t->cap + (size_t)n) * 2;
        char *p = realloc(t->p, cap);
        if (!p)
            return;
        t->p = p;
        t->cap = cap;
    }
}

/* A label value: \ " and newline escaped. */
static const char *lv(const char *s, char *buf, size_t len)
{
    size_t j = 0;
    for (; *s && j + 2 < len; s++) {
        if (*s == '\\' || *s == '"' || *s == '\n') {
            buf[j++] = '\\';
            buf[j++] = *s == '\n' ? 'n' : *s;
        } else {
            buf[j++] = *s;
        }
    }
    buf[j] = 0;
    return buf;
}

char *sc_console_metrics(struct sc_console_sampler *s)
{
    struct text t = {malloc(4096), 0, 4096};
    if (!t.p)
        return NULL;
    t.p[0] = 0;
    pthread_mutex_lock(&s->lock);
    add(&t, "# HELP sidecar_console_up 1 when the console's last sample of that server succeeded.\n"
            "# TYPE sidecar_console_up gauge\n"
            "sidecar_console_up{server=\"mysql\"} %d\nsidecar_console_up{server=\"amqp\"} %d\n",
        s->dbs.sampled && s->dbs.ok, s->amqps.sampled && s->amqps.ok);
    add(&t, "# HELP sidecar_console_sample_seconds How long the console's last sample took.\n"
            "# TYPE sidecar_console_sample_seconds gauge\n"
            "sidecar_console_sample_seconds{server=\"mysql\"} %.3f\n"
            "sidecar_console_sample_seconds{server=\"amqp\"} %.3f\n",
        (double)s->dbs.last_took_ms / 1000.0, (double)s->amqps.last_took_ms / 1000.0);
    add(&t, "# HELP sidecar_outbox_rows Outbox rows by status (exact up to %d, above it the "
            "optimiser's estimate: sidecar_outbox_rows_exact 0).\n# TYPE sidecar_outbox_rows gauge\n",
        CAP_EXACT);
    for (int i = 0; i < N_ST; i++)
        if (s->st[i].n >= 0)
            add(&t, "sidecar_outbox_rows{status=\"%s\"} %lld\n", st_names[i], s->st[i].n);
    add(&t, "# HELP sidecar_outbox_rows_exact 1 when sidecar_outbox_rows of that status is an "
            "exact count.\n# TYPE sidecar_outbox_rows_exact gauge\n");
    for (int i = 0; i < N_ST; i++)
        if (s->st[i].n >= 0)
            add(&t, "sidecar_outbox_rows_exact{status=\"%s\"} %d\n", st_names[i], s->st[i].exact);
    if (s->dbs.sampled && s->dbs.ok)
        add(&t, "# HELP sidecar_outbox_oldest_pending_age_seconds Age of the oldest PENDING outbox "
                "row (0 when none).\n# TYPE sidecar_outbox_oldest_pending_age_seconds gauge\n"
                "sidecar_outbox_oldest_pending_age_seconds %.3f\n",
            s->oldest_age_s < 0 ? 0 : s->oldest_age_s);
    if (s->expired.n >= 0)
        add(&t, "# HELP sidecar_outbox_expired_leases PUBLISHING rows whose lease has expired.\n"
                "# TYPE sidecar_outbox_expired_leases gauge\nsidecar_outbox_expired_leases %lld\n",
            s->expired.n);
    static const struct {
        const char *name, *help;
        int which; /* 0 queue, 1 consumers, 2 dlq */
    } qs[] = {
        {"sidecar_queue_messages", "Messages ready in a consumer's queue.", 0},
        {"sidecar_queue_consumers", "Consumers attached to a consumer's queue.", 1},
        {"sidecar_dlq_messages", "Messages in a consumer's dead-letter queue.", 2},
    };
    char a[300], b[300];
    for (size_t j = 0; j < sizeof qs / sizeof *qs; j++) {
        add(&t, "# HELP %s %s\n# TYPE %s gauge\n", qs[j].name, qs[j].help, qs[j].name);
        for (size_t k = 0; k < s->nk; k++) {
            const struct sc_consumer_config *c = &s->con->cfg->consumers[k];
            long long v = qs[j].which == 0 ? s->queue_msgs[k]
                          : qs[j].which == 1 ? s->queue_cons[k] : s->dlq_msgs[k];
            if (v >= 0)
                add(&t, "%s{consumer=\"%s\",queue=\"%s\"} %lld\n", qs[j].name,
                    lv(c->name, a, sizeof a),
                    lv(qs[j].which == 2 ? c->dead_letter_queue : c->queue, b, sizeof b), v);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return t.p;
}
