#include "relay_db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/db_settings.h"
#include "io/db_watermark.h"
#include "lifecycle.h"
#include "log.h"

#define GAUGE_REFRESH_MS 5000

/* The two claim statements. Each is one index range read in index order
 * with LIMIT and SKIP LOCKED, so its cost does not grow with the backlog:
 * expired leases in (status, lease_until) order, then PENDING rows in
 * (status, created_at, event_id) order. A live lease (lease_until in the
 * future) is outside the first range and never taken. FORCE INDEX keeps the
 * plan when the statistics of a small or freshly loaded table would suggest
 * a scan; both MySQL 8 and MariaDB accept it. */
#define CLAIM_SELECT                                                                              \
    "SELECT event_id, aggregate_type, aggregate_id, event_type, event_version, payload, "        \
    "DATE_FORMAT(created_at, '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ'), traceparent, tracestate "         \
    "FROM outbox_event o "
#define CLAIM_EXPIRED_SQL                                                                         \
    CLAIM_SELECT "FORCE INDEX (ix_outbox_event_lease) "                                          \
    "WHERE status = 'PUBLISHING' AND lease_until < UTC_TIMESTAMP(6) %s"                           \
    "ORDER BY lease_until LIMIT %d FOR UPDATE SKIP LOCKED"
#define CLAIM_PENDING_SQL                                                                         \
    CLAIM_SELECT "FORCE INDEX (ix_outbox_event_claim) WHERE status = 'PENDING' %s"               \
    "ORDER BY created_at, event_id LIMIT %d FOR UPDATE SKIP LOCKED"

/* relay.ordering "per_aggregate": a row is claimed only when it is the head
 * of its aggregate, every earlier row PUBLISHED. An aggregate's order is
 * (event_version, created_at, event_id): the producer's own sequence first,
 * so a clock stepped back or two writers with skewed clocks cannot invert
 * it; created_at and event_id only order rows of one version. Each test
 * below is one dive into ix_outbox_event_order (aggregate_type,
 * aggregate_id, status, event_version, created_at, event_id) that reads the
 * first entry of one status of the aggregate (ORDER BY ... LIMIT 1 in index
 * order), so an aggregate with 10,000 pending events costs one entry per
 * test, not 10,000. The subqueries are consistent (non-locking) reads even
 * inside FOR UPDATE SKIP LOCKED: a predecessor another relay has locked is
 * still seen, and holds its successor back. A stale snapshot shows a row at
 * most less far along (PENDING -> PUBLISHING -> PUBLISHED only moves
 * forward), so it can only hold an event back, never let one through early.
 * Any FAILED row holds the whole aggregate until it is repaired. */
#define AGG_ORDER "p.event_version, p.created_at, p.event_id"
#define AGG_FIRST(cols, st)                                                                       \
    "(SELECT " cols " FROM outbox_event p FORCE INDEX (ix_outbox_event_order) "                   \
    "WHERE p.aggregate_type = o.aggregate_type AND p.aggregate_id = o.aggregate_id "             \
    "AND p.status = '" st "' ORDER BY " AGG_ORDER " LIMIT 1)"
/* no row of status st precedes o (true when the aggregate has none): one
 * row subquery compared with o's position, lexicographically */
#define NONE_BEFORE(st)                                                                           \
    "IFNULL(" AGG_FIRST(AGG_ORDER, st) " > (o.event_version, o.created_at, o.event_id), TRUE) "
/* Written as a first-entry dive too: MariaDB turns NOT EXISTS into a
 * materialised scan of the whole index. */
#define NO_FAILED AGG_FIRST("p.event_id", "FAILED") " IS NULL "
#define HEAD_PENDING                                                                              \
    "AND o.event_id = " AGG_FIRST("p.event_id", "PENDING") " AND " NONE_BEFORE("PUBLISHING")       \
    "AND " NO_FAILED
#define HEAD_EXPIRED                                                                              \
    "AND o.event_id = " AGG_FIRST("p.event_id", "PUBLISHING") " AND " NONE_BEFORE("PENDING")       \
    "AND " NO_FAILED
#define CLAIM_SQL_MAX 4096
/* the format with its head tests inlined, plus the digits of a LIMIT */
_Static_assert(sizeof(CLAIM_EXPIRED_SQL HEAD_EXPIRED) + 12 <= CLAIM_SQL_MAX &&
                   sizeof(CLAIM_PENDING_SQL HEAD_PENDING) + 12 <= CLAIM_SQL_MAX,
               "the claim statements fit CLAIM_SQL_MAX");

/* The claim statement text: expired leases or PENDING rows, ordered or not. */
static void claim_sql(char *sql, size_t len, int expired, int per_aggregate, int limit)
{
    if (expired)
        snprintf(sql, len, CLAIM_EXPIRED_SQL, per_aggregate ? HEAD_EXPIRED : "", limit);
    else
        snprintf(sql, len, CLAIM_PENDING_SQL, per_aggregate ? HEAD_PENDING : "", limit);
}

static char *dup_field(const char *s)
{
    return strdup(s ? s : "");
}

int sc_relay_row_take(struct sc_relay_row *o, MYSQL_ROW row)
{
    snprintf(o->event_id, sizeof o->event_id, "%s", row[0] ? row[0] : "");
    o->aggregate_type = dup_field(row[1]);
    o->aggregate_id = dup_field(row[2]);
    o->event_type = dup_field(row[3]);
    o->version = row[4] ? atoll(row[4]) : 0;
    o->payload = dup_field(row[5]);
    snprintf(o->time, sizeof o->time, "%s", row[6] ? row[6] : "");
    /* trace context: checked when the message is built (relay_message.c) */
    snprintf(o->traceparent, sizeof o->traceparent, "%s", row[7] ? row[7] : "");
    o->tracestate = row[8] ? strdup(row[8]) : NULL;
    return !o->aggregate_type || !o->aggregate_id || !o->event_type || !o->payload ||
           (row[8] && !o->tracestate);
}

/* What every relay session takes from the config. */
static void init_common(struct sc_relay_db *d, const struct sc_config *cfg, const char *worker_id)
{
    memset(d, 0, sizeof *d);
    d->cfg = cfg;
    d->worker_id = worker_id;
    d->batch = cfg->relay.batch;
    d->per_aggregate = sc_relay_per_aggregate(&cfg->relay);
    d->lease_ms = cfg->relay.lease_ms;
}

int sc_relay_db_init(struct sc_relay_db *d, const struct sc_config *cfg, const char *worker_id)
{
    init_common(d, cfg, worker_id);
    d->binds = calloc((size_t)d->batch + 2, sizeof *d->binds);
    d->lens = calloc((size_t)d->batch + 2, sizeof *d->lens);
    return d->binds && d->lens ? 0 : -1;
}

void sc_relay_db_init_tenant(struct sc_relay_db *d, const struct sc_config *cfg, const char *worker_id,
                             char *const *urls, size_t n_urls, MYSQL_BIND *binds, unsigned long *lens)
{
    init_common(d, cfg, worker_id);
    d->binds = binds;
    d->lens = lens;
    d->urls = urls;
    d->n_urls = n_urls;
    d->shared = 1;
}

void sc_relay_db_free(struct sc_relay_db *d)
{
    sc_db_close(&d->db);
    if (!d->shared) {
        free(d->binds);
        free(d->lens);
    }
    d->binds = NULL;
    d->lens = NULL;
}

/* "?,?,...,?" with n placeholders. */
static char *placeholders(int n)
{
    char *s = malloc((size_t)n * 2 + 1);
    if (!s)
        return NULL;
    for (int i = 0; i < n; i++) {
        s[2 * i] = '?';
        s[2 * i + 1] = i + 1 < n ? ',' : 0;
    }
    return s;
}

static int prepare(struct sc_relay_db *d, struct sc_db_err *e)
{
    /* Every IN list has exactly `batch` placeholders, padded with the first
     * id: a fixed upper bound, one prepared statement, never IN (). */
    char *ph = placeholders(d->batch);
    char *sql = ph ? malloc(strlen(ph) + 512) : NULL;
    if (!sql) {
        free(ph);
        snprintf(e->msg, sizeof e->msg, "out of memory");
        e->cls = SC_DBERR_FAILURE;
        return -1;
    }
    sprintf(sql,
            "UPDATE outbox_event SET status = 'PUBLISHING', lease_owner = ?, "
            "lease_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, "
            "publish_attempts = publish_attempts + 1 WHERE event_id IN (%s)", ph);
    d->claim_update = sc_db_prepare(&d->db, sql, e);
    sprintf(sql,
            "SELECT event_id FROM outbox_event WHERE status = 'PUBLISHING' AND lease_owner = ? "
            "AND event_id IN (%s) FOR UPDATE", ph);
    d->still_owned = d->claim_update ? sc_db_prepare(&d->db, sql, e) : NULL;
    sprintf(sql,
            "UPDATE outbox_event SET status = 'PUBLISHED', published_at = UTC_TIMESTAMP(6), "
            "lease_owner = NULL, lease_until = NULL "
            "WHERE status = 'PUBLISHING' AND lease_owner = ? AND event_id IN (%s)", ph);
    d->mark_published = d->still_owned ? sc_db_prepare(&d->db, sql, e) : NULL;
    d->mark_failed = d->mark_published
                         ? sc_db_prepare(&d->db,
                                         "UPDATE outbox_event SET status = 'FAILED', lease_owner = NULL, "
                                         "lease_until = NULL WHERE event_id = ? "
                                         "AND status = 'PUBLISHING' AND lease_owner = ?", e)
                         : NULL;
    free(sql);
    free(ph);
    return d->mark_failed ? 0 : -1;
}

int sc_relay_db_open(struct sc_relay_db *d, struct sc_db_err *e)
{
    /* READ COMMITTED: the claim locks only the rows it takes, no gaps, so
     * producers inserting new outbox rows never wait on (or deadlock with)
     * a claim. */
    if ((d->urls ? sc_db_connect_tenant(&d->db, d->cfg, d->urls, d->n_urls, e)
                 : sc_db_connect(&d->db, d->cfg, e)) ||
        sc_db_query(&d->db, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", e) ||
        sc_db_settings_check(&d->db, e) || prepare(d, e)) {
        sc_db_close(&d->db);
        return -1;
    }
    return 0;
}

void sc_relay_db_close(struct sc_relay_db *d)
{
    sc_db_close(&d->db);
}

int sc_relay_db_is_open(const struct sc_relay_db *d)
{
    return sc_db_connected(&d->db);
}

int sc_relay_db_rollback(struct sc_relay_db *d, struct sc_db_err *e)
{
    return sc_db_rollback(&d->db, e);
}

static void bind_str(MYSQL_BIND *b, unsigned long *len, const char *s)
{
    memset(b, 0, sizeof *b);
    *len = strlen(s);
    b->buffer_type = MYSQL_TYPE_STRING;
    b->buffer = (void *)s;
    b->buffer_length = *len;
    b->length = len;
}

/* Binds the ids of rows[0..n) from binds[offset], padded to the batch size
 * with the first. */
static void bind_ids(struct sc_relay_db *d, int offset, struct sc_relay_row *const *rows, int n)
{
    for (int i = 0; i < d->batch; i++)
        bind_str(&d->binds[offset + i], &d->lens[offset + i], rows[i < n ? i : 0]->event_id);
}


/* Runs one claim SELECT for up to `limit` rows and appends them to rows from
 * index *n. Returns 0, or -1 with e filled. */
static int claim_select(struct sc_relay_db *d, int expired, int limit, struct sc_relay_row *rows,
                        int max, int *n, struct sc_db_err *e)
{
    char sql[CLAIM_SQL_MAX];
    claim_sql(sql, sizeof sql, expired, d->per_aggregate, limit);
    MYSQL_RES *res = sc_db_select(&d->db, sql, e);
    if (!res)
        return -1;
    MYSQL_ROW row;
    int oom = 0;
    while ((row = mysql_fetch_row(res)) && *n < max) {
        oom |= sc_relay_row_take(&rows[*n], row);
        (*n)++;
    }
    mysql_free_result(res);
    if (oom) {
        snprintf(e->msg, sizeof e->msg, "out of memory reading the claimed rows");
        e->cls = SC_DBERR_FAILURE;
        return -1;
    }
    return 0;
}

int sc_relay_db_claim(struct sc_relay_db *d, struct sc_relay_row *rows, int max, struct sc_db_err *e)
{
    int n = 0;
    d->last_expired = 0;
    if (claim_select(d, 1, max, rows, max, &n, e))
        return -1;
    d->last_expired = n;
    if (n < max && claim_select(d, 0, max - n, rows, max, &n, e))
        return -1;
    if (n == 0)
        return sc_db_rollback(&d->db, e) ? -1 : 0; /* end the (empty) transaction */
    struct sc_relay_row *ids[SC_BATCH_LIMIT];
    for (int i = 0; i < n; i++)
        ids[i] = &rows[i];
    long long lease_us = (long long)d->lease_ms * 1000;
    bind_str(&d->binds[0], &d->lens[0], d->worker_id);
    memset(&d->binds[1], 0, sizeof d->binds[1]);
    d->binds[1].buffer_type = MYSQL_TYPE_LONGLONG;
    d->binds[1].buffer = &lease_us;
    bind_ids(d, 2, ids, n);
    if (mysql_stmt_bind_param(d->claim_update, d->binds) || mysql_stmt_execute(d->claim_update)) {
        sc_db_stmt_error(d->claim_update, e);
        return -1;
    }
    return sc_db_commit(&d->db, e) ? -1 : n;
}

static int run_ids(struct sc_relay_db *d, MYSQL_STMT *st, struct sc_relay_row *const *rows, int n,
                   struct sc_db_err *e)
{
    bind_str(&d->binds[0], &d->lens[0], d->worker_id);
    bind_ids(d, 1, rows, n);
    if (mysql_stmt_bind_param(st, d->binds) || mysql_stmt_execute(st)) {
        sc_db_stmt_error(st, e);
        return -1;
    }
    return 0;
}

/* Which of rows[0..n) this worker still leases, under a locking read. */
static int still_owned(struct sc_relay_db *d, struct sc_relay_row *const *rows, int n,
                       unsigned char *owned, struct sc_db_err *e)
{
    if (run_ids(d, d->still_owned, rows, n, e))
        return -1;
    char id[40];
    unsigned long id_len = 0;
    MYSQL_BIND out;
    memset(&out, 0, sizeof out);
    out.buffer_type = MYSQL_TYPE_STRING;
    out.buffer = id;
    out.buffer_length = sizeof id;
    out.length = &id_len;
    memset(owned, 0, (size_t)n);
    if (mysql_stmt_bind_result(d->still_owned, &out)) {
        sc_db_stmt_error(d->still_owned, e);
        return -1;
    }
    int rc;
    while ((rc = mysql_stmt_fetch(d->still_owned)) == 0 || rc == MYSQL_DATA_TRUNCATED) {
        id[id_len < sizeof id ? id_len : sizeof id - 1] = 0;
        for (int i = 0; i < n; i++)
            if (strcmp(rows[i]->event_id, id) == 0)
                owned[i] = 1;
    }
    if (rc != MYSQL_NO_DATA) {
        sc_db_stmt_error(d->still_owned, e);
        return -1;
    }
    mysql_stmt_free_result(d->still_owned);
    return 0;
}

/* The common case is one conditional UPDATE for the whole batch; only when
 * it changed fewer rows than expected (a lease was lost) is it rolled back
 * and redone for the rows a locking read finds still owned. */
int sc_relay_db_mark_published(struct sc_relay_db *d, struct sc_relay_row *const *rows, int n,
                               unsigned char *marked, struct sc_db_err *e)
{
    if (run_ids(d, d->mark_published, rows, n, e))
        return -1;
    if ((unsigned long long)mysql_stmt_affected_rows(d->mark_published) == (unsigned long long)n) {
        if (sc_db_commit(&d->db, e))
            return -1;
        memset(marked, 1, (size_t)n);
        return 0;
    }
    if (sc_db_rollback(&d->db, e) || still_owned(d, rows, n, marked, e))
        return -1;
    struct sc_relay_row *keep[SC_BATCH_LIMIT];
    int n_keep = 0;
    for (int i = 0; i < n; i++)
        if (marked[i])
            keep[n_keep++] = rows[i];
    if (n_keep > 0 && run_ids(d, d->mark_published, keep, n_keep, e))
        return -1;
    return sc_db_commit(&d->db, e) ? -1 : 0;
}

int sc_relay_db_mark_failed(struct sc_relay_db *d, const struct sc_relay_row *row, struct sc_db_err *e)
{
    MYSQL_BIND b[2];
    unsigned long len[2];
    bind_str(&b[0], &len[0], row->event_id);
    bind_str(&b[1], &len[1], d->worker_id);
    if (mysql_stmt_bind_param(d->mark_failed, b) || mysql_stmt_execute(d->mark_failed)) {
        sc_db_stmt_error(d->mark_failed, e);
        return -1;
    }
    int changed = mysql_stmt_affected_rows(d->mark_failed) == 1;
    return sc_db_commit(&d->db, e) ? -1 : changed;
}

/* One indexed query every few seconds, cached for /metrics. Counting is
 * O(backlog), so after a slow count the next one waits 100 times as long as
 * it took: the gauges cost the relay at most ~1% of its time even with
 * millions of rows pending. Rows created before the binlog relay's
 * watermark are published, though PENDING: not counted, but for the held
 * ones (PENDING with a lease: one range of ix_outbox_event_lease). */
void sc_relay_db_refresh_gauges(struct sc_relay_db *d, struct sc_db *db, struct sc_relay_metrics *m)
{
    if (!sc_db_connected(db) || sc_now_ms() - d->last_gauge_ms < d->gauge_interval_ms)
        return;
    int64_t t0 = sc_now_ms();
    struct sc_db_err e = {0};
    char w[SC_DB_WATERMARK_LEN], sql[400];
    int has_w = sc_db_outbox_watermark(db, w, sizeof w, &e) == 1;
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*), COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(created_at), UTC_TIMESTAMP(6)), 0) "
             "FROM outbox_event WHERE status IN ('PENDING', 'PUBLISHING')%s%s%s",
             has_w ? " AND created_at >= '" : "", has_w ? w : "", has_w ? "'" : "");
    MYSQL_RES *res = sc_db_select(db, sql, &e);
    if (res) {
        MYSQL_ROW row = mysql_fetch_row(res);
        if (row && row[0] && row[1]) {
            long long pending = atoll(row[0]), age_us = atoll(row[1]);
            mysql_free_result(res);
            res = NULL;
            if (has_w) {
                snprintf(sql, sizeof sql,
                         "SELECT COUNT(*), COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(created_at), "
                         "UTC_TIMESTAMP(6)), 0) FROM outbox_event FORCE INDEX (ix_outbox_event_lease) "
                         "WHERE status = 'PENDING' AND lease_until IS NOT NULL AND created_at < '%s'", w);
                res = sc_db_select(db, sql, &e);
                MYSQL_ROW h = res ? mysql_fetch_row(res) : NULL;
                if (h && h[0] && h[1]) {
                    pending += atoll(h[0]);
                    age_us = atoll(h[1]) > age_us ? atoll(h[1]) : age_us;
                }
            }
            atomic_store(&m->pending, pending);
            atomic_store(&m->oldest_pending_age_ms, age_us / 1000);
        }
        if (res)
            mysql_free_result(res);
    }
    /* (the binlog relay counts its held aggregates itself: binlog_hold.c) */
    if (d->per_aggregate && db == &d->db) { /* O(FAILED rows), one range of the claim index */
        res = sc_db_select(db, "SELECT COUNT(*) FROM (SELECT 1 FROM outbox_event FORCE INDEX "
                           "(ix_outbox_event_claim) WHERE status = 'FAILED' GROUP BY aggregate_type, "
                           "aggregate_id) held", &e);
        MYSQL_ROW row = res ? mysql_fetch_row(res) : NULL;
        if (row && row[0])
            atomic_store(&m->held_aggregates, atoll(row[0]));
        if (res)
            mysql_free_result(res);
    }
    sc_db_rollback(db, &e); /* end the read's transaction */
    d->last_gauge_ms = sc_now_ms();
    int64_t took = d->last_gauge_ms - t0;
    d->gauge_interval_ms = took * 100 > GAUGE_REFRESH_MS ? took * 100 : GAUGE_REFRESH_MS;
}

void sc_relay_db_log_claim_sql(int batch, int per_aggregate)
{
    if (!sc_log_enabled(SC_LOG_DEBUG))
        return;
    char sql[CLAIM_SQL_MAX];
    claim_sql(sql, sizeof sql, 1, per_aggregate, batch);
    sc_debug("relay claim statement (expired leases): %s", sql);
    claim_sql(sql, sizeof sql, 0, per_aggregate, batch);
    sc_debug("relay claim statement (pending): %s", sql);
}
