#include "binlog_source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/db_settings.h"
#include "lifecycle.h"
#include "log.h"
#include "relay_db.h"
#include "relay_message.h"

/* A row named by the binary log is committed; the read-back takes a shared
 * lock, so a row whose transaction is logged but not yet committed in
 * InnoDB is waited for, never missed. One that is still absent after that
 * and READ_AGAIN more reads was deleted after its insert committed. */
#define READ_AGAIN 3
#define READ_AGAIN_MS 50
/* The read-back's text: its head and tail, and each id escaped (at most
 * 72 bytes), quoted and a comma apart. */
#define READ_SQL_MAX (1024 + (SC_BATCH_LIMIT + SC_BINLOG_SPILL) * 76)
/* An idle relay (other tables, DDL) stores its position at most this often. */
#define IDLE_STORE_MS 1000
#define LAG_EVERY_MS 5000

unsigned sc_binlog_replica_id(const char *worker_id)
{
    /* A replica's server_id must differ from every server's and replica's:
     * derived from the worker id (FNV-1a), in a range servers rarely use. */
    unsigned h = 2166136261u;
    for (const char *p = worker_id; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return 0x40000000u | (h & 0x3fffffffu);
}

int sc_binlog_source_init(struct sc_binlog_source *s, const struct sc_config *cfg,
                          const char *worker_id)
{
    memset(s, 0, sizeof *s);
    s->cfg = cfg;
    s->worker_id = worker_id;
    s->batch = cfg->relay.batch;
    s->lease_ms = cfg->relay.lease_ms;
    /* the claim waits for rows, a heartbeat apart at most */
    int hb = cfg->amqp_heartbeat_s > 0 ? cfg->amqp_heartbeat_s * 500 : cfg->relay.poll_ms;
    s->wait_ms = cfg->relay.poll_ms < hb ? cfg->relay.poll_ms : hb;
    s->server_id = sc_binlog_replica_id(worker_id);
    s->ckpt.db = &s->db;
    s->ckpt.owner = worker_id;
    s->ckpt.lease_ms = s->lease_ms;
    s->ids = calloc((size_t)s->batch + SC_BINLOG_SPILL, sizeof *s->ids);
    return s->ids ? 0 : -1;
}

void sc_binlog_source_free(struct sc_binlog_source *s)
{
    if (s->holding && sc_db_connected(&s->db)) {
        struct sc_db_err e = {0};
        if (sc_binlog_ckpt_release(&s->ckpt, &e) == 0)
            sc_info("relay %s: lease of the checkpoint released", s->worker_id);
    }
    sc_binlog_stream_close(&s->stream);
    sc_db_close(&s->db);
    free(s->ids);
    s->ids = NULL;
}

/* Back to the stored checkpoint: what was read after it is read again. */
static void rewind_stream(struct sc_binlog_source *s, const char *why)
{
    if (sc_binlog_stream_is_open(&s->stream) || s->n_ids || s->q_len) {
        s->rewinds++;
        sc_warn("relay: back to the checkpoint %s:%llu (%s); what follows it is published again",
                s->ckpt.stored.file[0] ? s->ckpt.stored.file : "(start)", s->ckpt.stored.pos, why);
    }
    sc_binlog_stream_close(&s->stream);
    s->n_ids = 0;
    s->q_len = 0;
    s->gen++;
    s->from = s->ckpt.stored;
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
    rewind_stream(s, "the database connection closed");
    sc_db_close(&s->db);
    s->holding = 0;
}

int sc_binlog_db_is_open(void *io)
{
    return sc_db_connected(&((struct sc_binlog_source *)io)->db);
}

int sc_binlog_rollback(void *io, struct sc_db_err *e)
{
    return sc_db_rollback(&((struct sc_binlog_source *)io)->db, e);
}

/* Holds the lease (taking it, or renewing it when half of it is gone).
 * Returns 1 held, 0 standby, -1 with e. */
static int hold_lease(struct sc_binlog_source *s, struct sc_db_err *e)
{
    int64_t now = sc_now_ms();
    if (s->holding && now < s->renew_at)
        return 1;
    int rc = s->holding ? sc_binlog_ckpt_store(&s->ckpt, NULL, e) : sc_binlog_ckpt_acquire(&s->ckpt, e);
    if (rc < 0)
        return -1;
    if (rc == 0) {
        if (s->holding)
            sc_warn("relay %s: another relay took the checkpoint's lease: standing by", s->worker_id);
        s->holding = 0;
        rewind_stream(s, "lease lost");
        return 0;
    }
    if (!s->holding) {
        sc_info("relay %s: active for outbox_event from %s:%llu%s%s", s->worker_id,
                s->ckpt.stored.file[0] ? s->ckpt.stored.file : "(the oldest binary log)",
                s->ckpt.stored.pos, s->ckpt.stored.gtid[0] ? ", GTID " : "", s->ckpt.stored.gtid);
        rewind_stream(s, "lease taken");
    }
    s->holding = 1;
    s->renew_at = now + s->lease_ms / 3;
    return 1;
}


/* Reads rows ids[0..n) back by key into rows, in the binary log's order,
 * dropping those no longer PENDING (published or refused before). Returns
 * the count, or -1 with e. */
static int read_back(struct sc_binlog_source *s, struct sc_relay_row *rows, int n, struct sc_db_err *e)
{
    static char sql[READ_SQL_MAX];
    char *status = calloc((size_t)n, 1); /* 0 unseen, 1 PENDING, 2 other */
    struct sc_relay_row *got = calloc((size_t)n, sizeof *got);
    int out = -1;
    if (!status || !got) {
        snprintf(e->msg, sizeof e->msg, "out of memory");
        e->cls = SC_DBERR_FAILURE;
        goto done;
    }
    for (int attempt = 0;; attempt++) {
        int len = snprintf(sql, sizeof sql,
                           "SELECT event_id, aggregate_type, aggregate_id, event_type, event_version, "
                           "payload, DATE_FORMAT(created_at, '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ'), "
                           "traceparent, tracestate, status FROM outbox_event WHERE event_id IN (");
        int asked = 0;
        for (int i = 0; i < n; i++) {
            if (status[i])
                continue;
            char id[2 * 36 + 1];
            mysql_real_escape_string(s->db.conn, id, s->ids[i], (unsigned long)strlen(s->ids[i]));
            len += snprintf(sql + len, sizeof sql - (size_t)len, "%s'%s'", asked ? "," : "", id);
            asked++;
        }
        if (asked == 0)
            break;
        snprintf(sql + len, sizeof sql - (size_t)len, ") LOCK IN SHARE MODE");
        MYSQL_RES *res = sc_db_select(&s->db, sql, e);
        if (!res)
            goto done;
        MYSQL_ROW row;
        while ((row = mysql_fetch_row(res))) {
            for (int i = 0; i < n; i++) {
                if (status[i] || !row[0] || strcmp(row[0], s->ids[i]) != 0)
                    continue;
                status[i] = row[9] && strcmp(row[9], "PENDING") == 0 ? 1 : 2;
                if (status[i] != 1)
                    break;
                /* an allocation failure leaves NULL fields, as before */
                (void)sc_relay_row_take(&got[i], row);
                break;
            }
        }
        mysql_free_result(res);
        if (sc_db_commit(&s->db, e))
            goto done;
        if (asked == 0 || attempt >= READ_AGAIN)
            break;
        int left = 0;
        for (int i = 0; i < n; i++)
            left += !status[i];
        if (!left)
            break;
        sc_sleep_ms(READ_AGAIN_MS);
    }
    out = 0;
    for (int i = 0; i < n; i++) {
        if (status[i] == 1) {
            rows[out++] = got[i];
            memset(&got[i], 0, sizeof got[i]);
        } else if (!status[i]) {
            s->missing++;
            sc_warn("relay: outbox_event %s is in the binary log but not in the table: deleted after "
                    "its insert committed; nothing to publish", s->ids[i]);
        }
    }
done:
    if (got)
        for (int i = 0; i < n; i++)
            sc_relay_row_clear(&got[i]);
    free(got);
    free(status);
    return out;
}

/* The lag gauges, every LAG_EVERY_MS: the binary logs from the position
 * on, less its offset, and the checkpoint's commit time behind now. With
 * nothing read and unsettled, the position is what the stream has read
 * (the relay's own checkpoint writes are all that follows an idle
 * checkpoint) and the lag in time is 0. */
static void measure_lag(struct sc_binlog_source *s)
{
    int64_t now = sc_now_ms();
    int settled = s->q_len == 0 && s->n_ids == 0 && sc_binlog_stream_is_open(&s->stream);
    const struct sc_binlog_pos *at = settled ? &s->stream.committed : &s->ckpt.stored;
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
    long long ms = !settled && s->ckpt.stored.when
                       ? (long long)time(NULL) * 1000 - (long long)s->ckpt.stored.when * 1000 : 0;
    atomic_store(&s->m->binlog_lag_ms, ms > 0 ? ms : 0);
}

/* The position a done batch may store: after the last transaction the
 * stream finished reading when the batch was cut. */
static void queue_done_at(struct sc_binlog_source *s)
{
    int k = (s->q_head + s->q_len) % SC_BINLOG_INFLIGHT;
    s->done_at[k].gen = s->gen;
    s->done_at[k].pos = s->stream.committed;
    s->q_len++;
}

int sc_binlog_claim(void *io, struct sc_relay_row *rows, int max, struct sc_db_err *e)
{
    struct sc_binlog_source *s = io;
    int held = hold_lease(s, e);
    if (held < 0)
        return -1;
    if (held == 0) {
        sc_sleep_ms(s->wait_ms); /* standing by: the claim is the core's only wait */
        return 0;
    }
    measure_lag(s);
    if (!sc_binlog_stream_is_open(&s->stream)) {
        enum sc_binlog_open o = sc_binlog_stream_open(&s->stream, s->cfg, &s->from, s->server_id, e);
        if (o == SC_BINLOG_GONE) {
            s->gone = 1;
            sc_error("relay: %s. Stopping, never skipping: publish the gap with relay.source \"poll\", "
                     "then reset the checkpoint (docs/operations.md, \"Binlog relay\")", e->msg);
            sc_request_stop();
            return 0;
        }
        if (o != SC_BINLOG_OPENED)
            return -1;
    }
    if (s->q_len >= SC_BINLOG_INFLIGHT)
        return 0; /* cannot happen with the core's two buffers */
    int n = sc_binlog_stream_read(&s->stream, s->ids, s->n_ids, max, max + SC_BINLOG_SPILL, s->wait_ms);
    if (n < 0) {
        snprintf(e->msg, sizeof e->msg, "%s", s->stream.err);
        e->cls = SC_DBERR_CONNECTION;
        rewind_stream(s, "the binary log stream failed");
        return -1;
    }
    s->n_ids = n;
    if (n == 0) {
        /* Only other tables, DDL or nothing: store the position when no
         * batch is out (one write per lease renewal at most). */
        int64_t now = sc_now_ms();
        if (s->q_len == 0 && now >= s->idle_store_at && s->stream.foreign &&
            (s->stream.committed.pos != s->ckpt.stored.pos ||
             strcmp(s->stream.committed.file, s->ckpt.stored.file) != 0)) {
            int rc = sc_binlog_ckpt_store(&s->ckpt, &s->stream.committed, e);
            if (rc < 0)
                return -1;
            s->idle_store_at = now + IDLE_STORE_MS;
            s->stream.foreign = 0;
            s->renew_at = now + s->lease_ms / 3;
        }
        return 0;
    }
    int take = n < max ? n : max;
    int got = read_back(s, rows, take, e);
    if (got < 0)
        return -1;
    memmove(s->ids, s->ids + take, (size_t)(n - take) * sizeof *s->ids);
    s->n_ids = n - take;
    if (got > 0)
        queue_done_at(s);
    return got;
}

int sc_binlog_mark_published(void *io, struct sc_relay_row *const *rows, int n,
                             unsigned char *marked, struct sc_db_err *e)
{
    (void)io;
    (void)rows;
    (void)e;
    memset(marked, 1, (size_t)n); /* the checkpoint says it, once per batch */
    return 0;
}

int sc_binlog_mark_failed(void *io, const struct sc_relay_row *row, struct sc_db_err *e)
{
    struct sc_binlog_source *s = io;
    char sql[200], id[2 * 36 + 1];
    mysql_real_escape_string(s->db.conn, id, row->event_id, (unsigned long)strlen(row->event_id));
    snprintf(sql, sizeof sql, "UPDATE outbox_event SET status = 'FAILED' WHERE event_id = '%s' "
             "AND status = 'PENDING'", id);
    if (sc_db_query(&s->db, sql, e)) {
        sc_db_rollback(&s->db, &(struct sc_db_err){0});
        return -1;
    }
    return sc_db_commit(&s->db, e) ? -1 : 1;
}

void sc_binlog_batch_done(void *io, const struct sc_relay_batch *b)
{
    struct sc_binlog_source *s = io;
    if (s->q_len == 0)
        return; /* rewound since: nothing of it may be stored */
    int k = s->q_head;
    s->q_head = (s->q_head + 1) % SC_BINLOG_INFLIGHT;
    s->q_len--;
    if (s->done_at[k].gen != s->gen)
        return;
    for (int i = 0; i < b->n; i++) {
        enum sc_relay_row_state st = b->rows[i].state;
        if (st != SC_ROW_PUBLISHED && st != SC_ROW_FAILED) {
            rewind_stream(s, sc_relay_row_state_name(st));
            return;
        }
    }
    struct sc_db_err e = {0};
    int rc = sc_binlog_ckpt_store(&s->ckpt, &s->done_at[k].pos, &e);
    if (rc == 1) {
        s->checkpoints++;
        s->renew_at = sc_now_ms() + s->lease_ms / 3;
        return;
    }
    if (rc == 0) {
        sc_warn("relay %s: the checkpoint's lease was lost before a batch could be stored; "
                "standing by (the batch is published again by the active relay)", s->worker_id);
        s->holding = 0;
    } else {
        sc_warn("relay: writing the checkpoint failed (error %u: %s); what follows the last one "
                "is published again", e.code, e.msg);
        sc_db_close(&s->db);
    }
    rewind_stream(s, "checkpoint not written");
}
