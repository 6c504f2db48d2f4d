/* One database sample of the console (console_sampler.h). What it reads,
 * all through indexes, none through a scan of the outbox, so the cost does
 * not grow with the table:
 *   - rows per status: a COUNT over one range of ix_outbox_event_claim
 *     capped at SC_CONSOLE_CAP_EXACT entries; a status with more is shown as
 *     the optimiser's estimate for that range (EXPLAIN, no rows read), marked
 *     "about", and counted exactly again once the estimate falls under half
 *     the cap;
 *   - the oldest PENDING row: MIN(created_at) for one status value, read
 *     off the end of the same index;
 *   - with relay.source "binlog", PENDING counts and the oldest start at the
 *     checkpoint's watermark (relay_checkpoint.published_created_before, one
 *     primary-key read): the rows before it are published, their status
 *     left PENDING, so PUBLISHED counts them too (status PENDING, created
 *     before W: the rule inspect applies), and the publishing rate adds the
 *     PENDING rows the watermark passed since the last sample;
 *   - expired leases: a capped COUNT over ix_outbox_event_lease;
 *   - publishing rate: PUBLISHED rows whose created_at is at or after a
 *     watermark W (the oldest PENDING row, or 5 s ago when none is older),
 *     counted twice per sample: rows published since the last sample are
 *     count(W_prev) now - count(W_prev) then. Only the recent end of the
 *     index is read (rows created after W), capped at CAP_WINDOW;
 *   - consumption per consumer: consumed_event rows with an id above the
 *     last one seen (a primary key range: the new rows only), grouped by
 *     consumer; a gap over CAP_WINDOW is skipped, not read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console_sampler.h"
#include "io/db_rows.h"
#include "io/db_watermark.h"
#include "lifecycle.h"

#define CAP_WINDOW 1000000
#define WATERMARK_SLACK "5" /* seconds: longer than a producer's transaction */

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

/* " AND created_at >= 'W'" for PENDING when the binlog relay has stored a
 * watermark W (rows before it are published though PENDING), else "". */
static const char *after_w(const struct db_sampling *d, int st, char *buf, size_t len)
{
    if (!d->ckpt_w[0] || strcmp(sc_console_st_names[st], "PENDING") != 0)
        return "";
    snprintf(buf, len, " AND created_at >= '%s'", d->ckpt_w);
    return buf;
}

/* The optimiser's row estimate for one range of ix_outbox_event_claim
 * (EXPLAIN reads no rows). */
static int estimate(struct db_sampling *d, const char *where, long long *n, struct sc_db_err *e)
{
    struct sc_db *db = &d->db;
    char sql[400];
    snprintf(sql, sizeof sql, "EXPLAIN SELECT 1 FROM outbox_event FORCE INDEX (ix_outbox_event_claim) "
                              "WHERE %s", where);
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

/* Rows of one range of ix_outbox_event_claim, exact up to the cap, else
 * the estimate; *over remembers which it was for the next sample. */
static int count_range(struct db_sampling *d, const char *where, int *over,
                       struct sample_count *out, struct sc_db_err *e)
{
    char sql[500], v[32];
    if (*over) {
        long long est;
        if (estimate(d, where, &est, e))
            return -1;
        if (est >= SC_CONSOLE_CAP_EXACT / 2) {
            out->n = est;
            out->exact = 0;
            return 0;
        }
    }
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*) FROM (SELECT 1 FROM outbox_event FORCE INDEX (ix_outbox_event_claim) "
             "WHERE %s LIMIT %d) capped", where, SC_CONSOLE_CAP_EXACT + 1);
    if (scalar(&d->db, sql, NULL, v, sizeof v, NULL, e))
        return -1;
    long long n = atoll(v);
    *over = n > SC_CONSOLE_CAP_EXACT;
    if (!*over) {
        out->n = n;
        out->exact = 1;
        return 0;
    }
    long long est;
    if (estimate(d, where, &est, e))
        return -1;
    out->n = est > SC_CONSOLE_CAP_EXACT ? est : SC_CONSOLE_CAP_EXACT + 1;
    out->exact = 0;
    return 0;
}

/* The binlog relay's held rows (PENDING with a lease) created before W:
 * not published, whatever W says. One range of ix_outbox_event_lease. */
static int held_before_w(struct db_sampling *d, long long *n, struct sc_db_err *e)
{
    char sql[400], v[32];
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*) FROM (SELECT 1 FROM outbox_event FORCE INDEX (ix_outbox_event_lease) "
             "WHERE status = 'PENDING' AND lease_until IS NOT NULL AND created_at < '%s' LIMIT %d) capped",
             d->ckpt_w, SC_CONSOLE_CAP_EXACT + 1);
    if (scalar(&d->db, sql, NULL, v, sizeof v, NULL, e))
        return -1;
    *n = atoll(v);
    return 0;
}

static int count_status(struct db_sampling *d, int st, struct sample_count *out,
                        struct sc_db_err *e)
{
    char where[200], wb[80];
    snprintf(where, sizeof where, "status = '%s'%s", sc_console_st_names[st],
             after_w(d, st, wb, sizeof wb));
    if (count_range(d, where, &d->over[st], out, e))
        return -1;
    long long held = 0;
    if (d->ckpt_w[0] && (st == ST_PUBLISHED || st == ST_PENDING) && held_before_w(d, &held, e))
        return -1;
    if (st == ST_PENDING)
        out->n += held;
    if (st != ST_PUBLISHED || !d->ckpt_w[0])
        return 0;
    /* The binlog relay's published rows: PENDING, created before W (the
     * rule inspect applies to one row). */
    struct sample_count before;
    snprintf(where, sizeof where, "status = 'PENDING' AND created_at < '%s'", d->ckpt_w);
    if (count_range(d, where, &d->over_before_w, &before, e))
        return -1;
    out->n += before.n > held ? before.n - held : 0;
    out->exact &= before.exact;
    return 0;
}

/* Rows the binlog relay published between two watermarks: PENDING rows
 * created in [from, to), or -1 past the cap. */
static int published_between(struct sc_db *db, const char *from, const char *to, long long *n,
                             struct sc_db_err *e)
{
    char v[32];
    const char *p[2] = {from, to};
    struct sc_rows rows;
    if (sc_db_select_params(db,
            "SELECT COUNT(*) FROM (SELECT 1 FROM outbox_event FORCE INDEX (ix_outbox_event_claim) "
            "WHERE status = 'PENDING' AND created_at >= ? AND created_at < ? LIMIT 1000001) capped",
            p, 2, 1, 0, &rows, e))
        return -1;
    const char *c = sc_rows_get(&rows, 0, 0);
    snprintf(v, sizeof v, "%s", c ? c : "0");
    sc_rows_free(&rows);
    *n = atoll(v);
    if (*n > CAP_WINDOW)
        *n = -1;
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

int sc_console_sample_db(struct db_sampling *d, const struct sc_console *con,
                         struct db_reading *out, char *err, size_t err_len)
{
    struct sc_db_err e = {0};
    size_t nk = con->cfg->n_consumers;
    if (!sc_db_connected(&d->db)) {
        if (sc_db_connect(&d->db, &con->cfg_short, &e))
            goto fail;
        sc_console_db_session(&d->db);
    }
    int64_t now = sc_now_ms();
    double minutes = d->last_sample_ms ? (double)(now - d->last_sample_ms) / 60000.0 : 0;

    struct sample_count st[N_ST], expired = {-1, 0};
    if (sc_db_outbox_watermark(&d->db, d->ckpt_w, sizeof d->ckpt_w, &e) < 0)
        goto fail;
    for (int i = 0; i < N_ST; i++)
        if (count_status(d, i, &st[i], &e))
            goto fail;
    char v[64];
    if (scalar(&d->db,
               "SELECT COUNT(*) FROM (SELECT 1 FROM outbox_event FORCE INDEX (ix_outbox_event_lease) "
               "WHERE status = 'PUBLISHING' AND lease_until < UTC_TIMESTAMP(6) LIMIT 100001) capped",
               NULL, v, sizeof v, NULL, &e))
        goto fail;
    expired.n = atoll(v);
    expired.exact = expired.n <= SC_CONSOLE_CAP_EXACT;

    /* The oldest PENDING row's age and the watermark, in one statement:
     * both MIN()s are one dive to the start of a status's index range (past
     * the binlog relay's watermark, where it has one). */
    struct sc_rows rows;
    char oldest_sql[1200], wb[80], oldest_of[600];
    const char *aw = after_w(d, ST_PENDING, wb, sizeof wb);
    if (aw[0]) /* and the held rows before W (ix_outbox_event_lease) */
        snprintf(oldest_of, sizeof oldest_of,
                 "NULLIF(LEAST(COALESCE((SELECT MIN(created_at) FROM outbox_event WHERE status = 'PENDING'%s), "
                 "'9999-12-31 00:00:00'), COALESCE((SELECT MIN(created_at) FROM outbox_event FORCE INDEX "
                 "(ix_outbox_event_lease) WHERE status = 'PENDING' AND lease_until IS NOT NULL), "
                 "'9999-12-31 00:00:00')), '9999-12-31 00:00:00')", aw);
    else
        snprintf(oldest_of, sizeof oldest_of, "(SELECT MIN(created_at) FROM outbox_event WHERE status = 'PENDING')");
    snprintf(oldest_sql, sizeof oldest_sql,
             "SELECT TIMESTAMPDIFF(MICROSECOND, %s, UTC_TIMESTAMP(6)), "
             "LEAST(COALESCE((SELECT MIN(created_at) FROM outbox_event WHERE status = 'PENDING'%s), "
             "'9999-12-31 00:00:00'), UTC_TIMESTAMP(6) - INTERVAL " WATERMARK_SLACK " SECOND)", oldest_of, aw);
    if (sc_db_select_params(&d->db, oldest_sql, NULL, 0, 1, 0, &rows, &e))
        goto fail;
    const char *age_us = sc_rows_get(&rows, 0, 0), *w = sc_rows_get(&rows, 0, 1);
    double oldest = age_us ? (double)atoll(age_us) / 1e6 : -1;
    char w_now[40];
    snprintf(w_now, sizeof w_now, "%s", w ? w : "");
    sc_rows_free(&rows);

    double pub_per_min = -1;
    long long b_now = -1;
    if (w_now[0] && published_since(&d->db, w_now, &b_now, &e))
        goto fail;
    if (d->w_prev[0] && d->b_prev >= 0 && minutes > 0) {
        long long a_now;
        if (published_since(&d->db, d->w_prev, &a_now, &e))
            goto fail;
        if (a_now >= 0 && a_now >= d->b_prev)
            pub_per_min = (double)(a_now - d->b_prev) / minutes;
    }
    /* relay.source "binlog" marks no row: what it published since the last
     * sample is what its watermark passed. */
    if (d->ckpt_w[0] && d->ckpt_prev[0] && minutes > 0) {
        long long passed = 0;
        if (strcmp(d->ckpt_prev, d->ckpt_w) < 0 &&
            published_between(&d->db, d->ckpt_prev, d->ckpt_w, &passed, &e))
            goto fail;
        if (passed >= 0)
            pub_per_min = (pub_per_min > 0 ? pub_per_min : 0) + (double)passed / minutes;
    }
    snprintf(d->ckpt_prev, sizeof d->ckpt_prev, "%s", d->ckpt_w);

    /* Consumption since the last sample: new primary keys only. */
    double *per_min = calloc(nk ? nk : 1, sizeof *per_min);
    if (!per_min) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    for (size_t k = 0; k < nk; k++)
        per_min[k] = -1;
    int null = 0;
    if (scalar(&d->db, "SELECT MAX(id) FROM consumed_event", NULL, v, sizeof v, &null, &e)) {
        free(per_min);
        goto fail;
    }
    long long hi = null ? 0 : atoll(v);
    if (d->last_id >= 0 && minutes > 0 && hi - d->last_id <= CAP_WINDOW) {
        char lo_s[32], hi_s[32];
        snprintf(lo_s, sizeof lo_s, "%lld", d->last_id);
        snprintf(hi_s, sizeof hi_s, "%lld", hi);
        const char *p[2] = {lo_s, hi_s};
        if (sc_db_select_params(&d->db,
                "SELECT consumer_name, COUNT(*) FROM consumed_event WHERE id > ? AND id <= ? "
                "GROUP BY consumer_name ORDER BY NULL", p, 2, 1000, 0, &rows, &e)) {
            free(per_min);
            goto fail;
        }
        for (size_t k = 0; k < nk; k++)
            per_min[k] = 0;
        for (size_t r = 0; r < rows.n_rows; r++)
            for (size_t k = 0; k < nk; k++)
                if (strcmp(sc_rows_get(&rows, r, 0), con->cfg->consumers[k].name) == 0)
                    per_min[k] = (double)atoll(sc_rows_get(&rows, r, 1)) / minutes;
        sc_rows_free(&rows);
    }
    d->last_id = hi < d->last_id ? d->last_id : hi;
    sc_db_rollback(&d->db, &e); /* end the reads' transaction */

    snprintf(d->w_prev, sizeof d->w_prev, "%s", w_now);
    d->b_prev = b_now;
    d->last_sample_ms = now;

    memcpy(out->by_status, st, sizeof st);
    out->expired = expired;
    out->oldest_age_s = oldest;
    out->publish_per_min = pub_per_min;
    out->consumed_per_min = per_min;
    return 0;
fail:
    snprintf(err, err_len, "error %u: %s", e.code, e.msg);
    if (e.cls == SC_DBERR_CONNECTION || !e.code || e.code >= 2000)
        sc_db_close(&d->db);
    else
        sc_db_rollback(&d->db, &e);
    return -1;
}
