#include "binlog_source.h"
#include "binlog_source_held.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/db_settings.h"
#include "lifecycle.h"
#include "log.h"
#include "relay_db.h"
#include "relay_message.h"

/* The read-back's text: its head and tail, and each id escaped (at most
 * 72 bytes), quoted and a comma apart. */
#define READ_SQL_MAX (1024 + (SC_BATCH_LIMIT + SC_BINLOG_SPILL) * 76)
#define LAG_EVERY_MS 5000
#define WM_EVERY_MS 2000 /* a watermark sample: five short statements */
#define ER_NEED_PRIV 1227 /* Access denied; you need (at least one of) the ... privilege(s) */

unsigned sc_binlog_replica_id(const char *worker_id)
{
    /* A replica's server_id must differ from every server's and replica's:
     * derived from the worker id (FNV-1a), in a range servers rarely use. */
    unsigned h = 2166136261u;
    for (const char *p = worker_id; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return 0x40000000u | (h & 0x3fffffffu);
}

/* ---- the ops of the core over MariaDB ---------------------------------------- */

static enum sc_binlog_open op_stream_open(void *io, const struct sc_binlog_pos *from, struct sc_db_err *e)
{
    struct sc_binlog_source *s = io;
    return sc_binlog_stream_open(&s->stream, s->cfg, from, s->server_id, e);
}

static void op_stream_close(void *io)
{
    sc_binlog_stream_close(&((struct sc_binlog_source *)io)->stream);
}

static int op_stream_is_open(void *io)
{
    return sc_binlog_stream_is_open(&((struct sc_binlog_source *)io)->stream);
}

static int op_stream_read(void *io, char (*ids)[37], int have, int max, int cap, int wait_ms, char *err,
                          size_t err_len)
{
    struct sc_binlog_source *s = io;
    int n = sc_binlog_stream_read(&s->stream, ids, have, max, cap, wait_ms);
    if (n < 0)
        snprintf(err, err_len, "%s", s->stream.err);
    return n < 0 && s->stream.unreadable ? SC_BINLOG_READ_STOP : n;
}

static struct sc_binlog_tx *op_stream_tx(void *io)
{
    return &((struct sc_binlog_source *)io)->stream.tx;
}

/* The read locks in share mode, to wait for a row whose commit is not yet
 * visible, so it must reach its rows by the primary key alone: a scan
 * (MariaDB 11 chose one on a small outbox) would wait on every uncommitted
 * row of the table, a producer's open transaction stopping the relay. */
static int op_read_rows(void *io, char (*ids)[37], int n, char *status, struct sc_relay_row *got,
                        struct sc_db_err *e)
{
    static char sql[READ_SQL_MAX];
    struct sc_binlog_source *s = io;
    int len = snprintf(sql, sizeof sql,
                       "SELECT event_id, aggregate_type, aggregate_id, event_type, event_version, "
                       "payload, DATE_FORMAT(created_at, '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ'), "
                       "traceparent, tracestate, status, lease_until IS NOT NULL FROM outbox_event "
                       "FORCE INDEX (PRIMARY) WHERE event_id IN (");
    int asked = 0;
    for (int i = 0; i < n; i++) {
        if (status[i])
            continue;
        char id[2 * 36 + 1];
        mysql_real_escape_string(s->db.conn, id, ids[i], (unsigned long)strlen(ids[i]));
        len += snprintf(sql + len, sizeof sql - (size_t)len, "%s'%s'", asked ? "," : "", id);
        asked++;
    }
    if (asked == 0)
        return 0;
    snprintf(sql + len, sizeof sql - (size_t)len, ") LOCK IN SHARE MODE");
    MYSQL_RES *res = sc_db_select(&s->db, sql, e);
    if (!res)
        return -1;
    MYSQL_ROW row;
    int oom = 0;
    while ((row = mysql_fetch_row(res))) {
        for (int i = 0; i < n; i++) {
            if (status[i] || !row[0] || strcmp(row[0], ids[i]) != 0)
                continue;
            int pending = row[9] && strcmp(row[9], "PENDING") == 0;
            int marked = row[10] && strcmp(row[10], "1") == 0;
            status[i] = pending ? (marked ? SC_FOUND_HELD : SC_FOUND_PENDING)
                        : row[9] && strcmp(row[9], "FAILED") == 0 ? SC_FOUND_FAILED
                                                                  : SC_FOUND_OTHER;
            if (status[i] != SC_FOUND_OTHER)
                oom |= sc_relay_row_take(&got[i], row);
            break;
        }
    }
    mysql_free_result(res);
    if (oom) {
        /* A row with fields missing must not be published: the read fails
         * and the core reads the batch again after a rewind. */
        sc_db_rollback(&s->db, &(struct sc_db_err){0});
        *e = (struct sc_db_err){.cls = SC_DBERR_FAILURE};
        snprintf(e->msg, sizeof e->msg, "out of memory reading outbox rows back");
        return -1;
    }
    return sc_db_commit(&s->db, e) ? -1 : asked;
}

static int op_ckpt_acquire(void *io, struct sc_binlog_pos *stored, struct sc_db_err *e)
{
    struct sc_binlog_source *s = io;
    int rc = sc_binlog_ckpt_acquire(&s->ckpt, e);
    if (rc == 1)
        *stored = s->ckpt.stored;
    return rc;
}

static int op_ckpt_store(void *io, const struct sc_binlog_pos *pos, struct sc_db_err *e)
{
    return sc_binlog_ckpt_store(&((struct sc_binlog_source *)io)->ckpt, pos, e);
}

static void op_db_close(void *io)
{
    sc_db_close(&((struct sc_binlog_source *)io)->db);
}

static int64_t op_now_ms(void *io)
{
    (void)io;
    return sc_now_ms();
}

static void op_sleep_ms(void *io, int ms)
{
    (void)io;
    sc_sleep_ms(ms);
}

static void op_gone(void *io, const struct sc_db_err *e)
{
    (void)io;
    sc_error("relay: %s. Stopping, never skipping: publish the gap with relay.source \"poll\", "
             "then move the checkpoint past it (docs/operations.md, \"Binlog relay\")", e->msg);
    sc_request_stop();
}

/* The lag gauges, every LAG_EVERY_MS: the binary logs from the position
 * on, less its offset, and the checkpoint's commit time behind now. With
 * nothing read and unsettled, the position is what the stream has read
 * (the relay's own checkpoint writes are all that follows an idle
 * checkpoint) and the lag in time is 0. */
static void op_measure_lag(void *io, const struct sc_binlog_pos *at, int settled)
{
    struct sc_binlog_source *s = io;
    int64_t now = sc_now_ms();
    if (!s->m || now < s->lag_at || !at->file[0])
        return;
    s->lag_at = now + LAG_EVERY_MS;
    struct sc_db_err e = {0};
    MYSQL_RES *res = sc_db_select(&s->db, "SHOW BINARY LOGS", &e);
    if (!res)
        return;
    long long bytes = 0;
    int from = 0;
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(res))) {
        if (row[0] && strcmp(row[0], at->file) == 0) {
            from = 1;
            bytes -= (long long)at->pos;
        }
        if (from && row[1])
            bytes += atoll(row[1]);
    }
    mysql_free_result(res);
    sc_db_rollback(&s->db, &e);
    if (!from)
        return;
    atomic_store(&s->m->binlog_lag_bytes, bytes > 0 ? bytes : 0);
    long long ms = !settled && at->when ? (long long)time(NULL) * 1000 - (long long)at->when * 1000 : 0;
    atomic_store(&s->m->binlog_lag_ms, ms > 0 ? ms : 0);
}

/* The first row of sql's answer into cells (NULL for SQL NULL), at most n. */
static int first_row(struct sc_db *db, const char *sql, char cells[][64], int n, int *null,
                     struct sc_db_err *e)
{
    MYSQL_RES *res = sc_db_select(db, sql, e);
    if (!res)
        return -1;
    MYSQL_ROW row = mysql_fetch_row(res);
    unsigned nf = mysql_num_fields(res);
    for (int i = 0; i < n; i++) {
        null[i] = !row || (unsigned)i >= nf || !row[i];
        snprintf(cells[i], 64, "%s", null[i] ? "" : row[i]);
    }
    mysql_free_result(res);
    return 0;
}

/* One sample of the watermark (binlog_watermark.h), every WM_EVERY_MS: the
 * time, then the oldest statement running on the server (PROCESSLIST,
 * before the transactions: a statement that ends between the two reads
 * has its transaction in InnoDB by then), then the oldest transaction
 * open in InnoDB, its age against the sampler's own transaction (the
 * server shows trx_started in its system time zone, whole seconds), then
 * the binary log's end (SHOW BINARY LOGS' last file and size: a
 * transaction committed in InnoDB is written there before). */
static int wm_sample(struct sc_binlog_source *s, struct sc_db_err *e)
{
    char c[3][64];
    int null[3];
    if (sc_db_rollback(&s->db, e) || first_row(&s->db, "SELECT UTC_TIMESTAMP(6)", c, 1, null, e))
        return -1;
    int64_t now_us = sc_binlog_wm_parse(c[0]);
    if (sc_db_query(&s->db, "START TRANSACTION WITH CONSISTENT SNAPSHOT", e) ||
        first_row(&s->db, "SELECT MAX(TIME) FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() "
                          "AND COMMAND NOT IN ('Sleep', 'Daemon', 'Binlog Dump', 'Binlog Dump GTID')",
                  c, 1, null, e))
        return -1;
    long long stmt_age = null[0] ? 0 : atoll(c[0]);
    if (first_row(&s->db, "SELECT TIMESTAMPDIFF(SECOND, MIN(trx_started), "
                          "MAX(IF(trx_mysql_thread_id = CONNECTION_ID(), trx_started, NULL))) "
                          "FROM information_schema.INNODB_TRX", c, 1, null, e))
        return -1;
    if (null[0]) {
        snprintf(e->msg, sizeof e->msg, "information_schema.INNODB_TRX does not list the sampler's own "
                 "transaction");
        return -1;
    }
    long long trx_age = atoll(c[0]);
    MYSQL_RES *res = sc_db_select(&s->db, "SHOW BINARY LOGS", e);
    if (!res)
        return -1;
    struct sc_binlog_pos end = {0};
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(res)))
        if (row[0] && row[1]) {
            snprintf(end.file, sizeof end.file, "%s", row[0]);
            end.pos = strtoull(row[1], NULL, 10);
        }
    mysql_free_result(res);
    if (sc_db_rollback(&s->db, e))
        return -1;
    if (!now_us || !end.file[0]) {
        snprintf(e->msg, sizeof e->msg, "no time or no binary log end read");
        return -1;
    }
    sc_binlog_wm_add(&s->ckpt.wm, &end, sc_binlog_wm_candidate(now_us, stmt_age > trx_age ? stmt_age : trx_age));
    return 0;
}

static void op_watermark(void *io, const struct sc_binlog_pos *at)
{
    struct sc_binlog_source *s = io;
    if (!s->ckpt.wm_column)
        return;
    sc_binlog_wm_passed(&s->ckpt.wm, at);
    int64_t now = sc_now_ms();
    if (now < s->wm_at)
        return;
    s->wm_at = now + WM_EVERY_MS;
    struct sc_db_err e = {0};
    if (wm_sample(s, &e) == 0) {
        s->wm_warned = 0;
        return;
    }
    sc_db_rollback(&s->db, &(struct sc_db_err){0});
    if (!s->wm_warned)
        sc_warn("relay: the watermark of the checkpoint is not sampled (error %u: %s)%s: the outbox "
                "gauges, inspect and purge see rows published since as PENDING", e.code, e.msg,
                e.code == ER_NEED_PRIV ? "; grant PROCESS (sql/grants/relay_binlog.sql)" : "");
    s->wm_warned = 1;
}

static const struct sc_binlog_ops mariadb_ops = {
    .stream_open = op_stream_open,
    .stream_close = op_stream_close,
    .stream_is_open = op_stream_is_open,
    .stream_read = op_stream_read,
    .stream_tx = op_stream_tx,
    .read_rows = op_read_rows,
    .ckpt_acquire = op_ckpt_acquire,
    .ckpt_store = op_ckpt_store,
    .db_close = op_db_close,
    .now_ms = op_now_ms,
    .sleep_ms = op_sleep_ms,
    .gone = op_gone,
    .measure_lag = op_measure_lag,
    .watermark = op_watermark,
    .hold_rows = sc_binlog_src_hold_rows,
    .held_load = sc_binlog_src_held_load,
    .held_failed = sc_binlog_src_held_failed,
    .held_rows = sc_binlog_src_held_rows,
    .log_end = sc_binlog_src_log_end,
};

/* ---- the calls of struct sc_relay_ops ------------------------------------------ */

int sc_binlog_source_init(struct sc_binlog_source *s, const struct sc_config *cfg,
                          const char *worker_id)
{
    memset(s, 0, sizeof *s);
    s->cfg = cfg;
    s->worker_id = worker_id;
    /* the claim waits for rows, a heartbeat apart at most */
    int hb = cfg->amqp_heartbeat_s > 0 ? cfg->amqp_heartbeat_s * 500 : cfg->relay.poll_ms;
    int wait_ms = cfg->relay.poll_ms < hb ? cfg->relay.poll_ms : hb;
    s->server_id = sc_binlog_replica_id(worker_id);
    s->ckpt.db = &s->db;
    s->ckpt.owner = worker_id;
    s->ckpt.lease_ms = cfg->relay.lease_ms;
    return sc_binlog_core_init(&s->core, &mariadb_ops, s, worker_id, cfg->relay.batch, cfg->relay.lease_ms,
                               wait_ms, sc_relay_per_aggregate(&cfg->relay));
}

void sc_binlog_source_free(struct sc_binlog_source *s)
{
    if (s->core.holding && sc_db_connected(&s->db)) {
        struct sc_db_err e = {0};
        if (sc_binlog_ckpt_release(&s->ckpt, &e) == 0)
            sc_info("relay %s: lease of the checkpoint released", s->worker_id);
    }
    sc_binlog_stream_close(&s->stream);
    sc_db_close(&s->db);
    sc_binlog_core_free(&s->core);
}

int sc_binlog_db_open(void *io, struct sc_db_err *e)
{
    struct sc_binlog_source *s = io;
    if (sc_db_connect(&s->db, s->cfg, e) ||
        sc_db_query(&s->db, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", e) ||
        sc_db_settings_check(&s->db, e)) {
        sc_db_close(&s->db);
        return -1;
    }
    return 0;
}

void sc_binlog_db_close(void *io)
{
    struct sc_binlog_source *s = io;
    sc_binlog_core_db_closed(&s->core);
    sc_db_close(&s->db);
}

int sc_binlog_db_is_open(void *io)
{
    return sc_db_connected(&((struct sc_binlog_source *)io)->db);
}

int sc_binlog_rollback(void *io, struct sc_db_err *e)
{
    return sc_db_rollback(&((struct sc_binlog_source *)io)->db, e);
}

int sc_binlog_claim(void *io, struct sc_relay_row *rows, int max, struct sc_db_err *e)
{
    struct sc_binlog_source *s = io;
    int n = sc_binlog_core_claim(&s->core, rows, max, e);
    if (s->m && s->core.per_aggregate)
        atomic_store(&s->m->held_aggregates, (long long)s->core.held.n);
    return n;
}

int sc_binlog_held(void *io, const struct sc_relay_row *r)
{
    return sc_binlog_core_held(&((struct sc_binlog_source *)io)->core, r);
}

int sc_binlog_stale(void *io, const struct sc_relay_batch *b)
{
    return sc_binlog_core_stale(&((struct sc_binlog_source *)io)->core, b);
}

void sc_binlog_hold(void *io, const struct sc_relay_row *r)
{
    struct sc_binlog_source *s = io;
    sc_binlog_core_hold(&s->core, r);
    if (s->m && s->core.per_aggregate)
        atomic_store(&s->m->held_aggregates, (long long)s->core.held.n);
}

void sc_binlog_batch_done(void *io, const struct sc_relay_batch *b)
{
    sc_binlog_core_batch_done(&((struct sc_binlog_source *)io)->core, b);
}
