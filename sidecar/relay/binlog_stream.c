#include "binlog_stream.h"

#include <errmsg.h>
#include <ma_pvio.h>
#include <poll.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "binlog_events.h"
#include "log.h"

#define HEADER_LEN 19
#define CHECKSUM_LEN 4
#define TABLE_ID_LEN 6
/* The server's heartbeat interval when the binary log is idle, in ns: a
 * dead connection shows within a few of them. */
#define HEARTBEAT_NS "1000000000"

int sc_binlog_oldest(struct sc_db *db, char *out, size_t len, struct sc_db_err *e)
{
    MYSQL_RES *res = sc_db_select(db, "SHOW BINARY LOGS", e);
    if (!res)
        return -1;
    MYSQL_ROW row = mysql_fetch_row(res);
    out[0] = 0;
    if (row && row[0])
        snprintf(out, len, "%s", row[0]);
    mysql_free_result(res);
    if (!out[0]) {
        snprintf(e->msg, sizeof e->msg, "SHOW BINARY LOGS lists none: is log_bin on?");
        e->cls = SC_DBERR_FAILURE;
        return -1;
    }
    return 0;
}

/* 1 when file is one of the binary logs the server still has. */
static int file_exists(struct sc_db *db, const char *file, struct sc_db_err *e)
{
    MYSQL_RES *res = sc_db_select(db, "SHOW BINARY LOGS", e);
    if (!res)
        return -1;
    MYSQL_ROW row;
    int found = 0;
    while ((row = mysql_fetch_row(res)))
        if (row[0] && strcmp(row[0], file) == 0)
            found = 1;
    mysql_free_result(res);
    return found;
}

/* 1 when list (a GTID position: "d-s-n,d-s-n") holds gtid as one of its
 * members. */
static int gtid_listed(const char *list, const char *gtid)
{
    size_t n = strlen(gtid);
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == ',' || *p == '\n')
            p++;
        size_t member = strcspn(p, ","), m = member;
        while (m > 0 && (p[m - 1] == ' ' || p[m - 1] == '\n'))
            m--;
        if (m == n && strncmp(p, gtid, n) == 0)
            return 1;
        p += member;
    }
    return 0;
}

/* A file and offset name a place on one server only: another server (a
 * virtual IP or a DNS name moved on failover) or this one after RESET
 * MASTER may have a file of the same name where the same offset is another
 * transaction. MariaDB says which GTID position a place of its own log
 * stands at (BINLOG_GTID_POS): the checkpoint's GTID must be there. Returns
 * 1 when it is (or cannot be told: no GTID stored, a server without the
 * function), 0 with why in e, -1 with e. */
static int same_log(struct sc_db *db, const struct sc_binlog_pos *at, struct sc_db_err *e)
{
    if (!at->gtid[0])
        return 1;
    char file[2 * SC_BINLOG_FILE_MAX + 1], sql[2 * SC_BINLOG_FILE_MAX + 96];
    mysql_real_escape_string(db->conn, file, at->file, (unsigned long)strlen(at->file));
    snprintf(sql, sizeof sql, "SELECT BINLOG_GTID_POS('%s', %llu)", file, at->pos);
    MYSQL_RES *res = sc_db_select(db, sql, e);
    if (!res) {
        if (e->code == 1305 || e->code == 1064) { /* no such function: MySQL */
            *e = (struct sc_db_err){0};
            return 1;
        }
        return -1;
    }
    MYSQL_ROW row = mysql_fetch_row(res);
    char here[512];
    snprintf(here, sizeof here, "%s", row && row[0] ? row[0] : "");
    mysql_free_result(res);
    sc_db_rollback(db, &(struct sc_db_err){0});
    if (gtid_listed(here, at->gtid))
        return 1;
    snprintf(e->msg, sizeof e->msg,
             "the checkpoint's place %.80s:%llu was read after GTID %s, but this server's "
             "stands at GTID position '%.100s' there: the checkpoint was taken on another server (a "
             "failover behind the same address) or this server's binary logs were reset",
             at->file, at->pos, at->gtid, here[0] ? here : "(none)");
    e->cls = SC_DBERR_FAILURE;
    return 0;
}

static int stream_setup(struct sc_binlog_stream *s, struct sc_db_err *e)
{
    MYSQL_RES *res = sc_db_select(&s->db,
                                  "SELECT DATABASE(), (SELECT ordinal_position - 1 FROM "
                                  "information_schema.columns WHERE table_schema = DATABASE() AND "
                                  "table_name = 'outbox_event' AND column_name = 'event_id')", e);
    if (!res)
        return -1;
    MYSQL_ROW row = mysql_fetch_row(res);
    int okay = row && row[0] && row[1];
    if (okay) {
        snprintf(s->schema, sizeof s->schema, "%s", row[0]);
        s->key_col = atoi(row[1]);
    }
    mysql_free_result(res);
    if (!okay) {
        snprintf(e->msg, sizeof e->msg, "no outbox_event.event_id in the connection's database");
        e->cls = SC_DBERR_FAILURE;
        return -1;
    }
    /* The events as the server logs them, checksums included, and
     * MariaDB's GTID events. Every event then ends in a checksum, the fake
     * rotate that starts the stream too (before any format description
     * tells libmariadb so): which is why the length is cut here. */
    res = sc_db_select(&s->db, "SELECT @@global.binlog_checksum", e);
    if (!res)
        return -1;
    row = mysql_fetch_row(res);
    s->checksum = row && row[0] && strcmp(row[0], "NONE") != 0;
    mysql_free_result(res);
    return sc_db_query(&s->db,
                       "SET @master_binlog_checksum = @@global.binlog_checksum, "
                       "@mariadb_slave_capability = 4, @master_heartbeat_period = " HEARTBEAT_NS, e) ||
           sc_db_commit(&s->db, e);
}

enum sc_binlog_open sc_binlog_stream_open(struct sc_binlog_stream *s, const struct sc_config *cfg,
                                          const struct sc_binlog_pos *from, unsigned server_id,
                                          struct sc_db_err *e)
{
    sc_binlog_stream_close(s);
    if (sc_db_connect(&s->db, cfg, e) || stream_setup(s, e))
        goto fail;
    struct sc_binlog_pos start = *from;
    if (!start.file[0]) {
        if (sc_binlog_oldest(&s->db, start.file, sizeof start.file, e))
            goto fail;
        start.pos = 4;
        sc_info("relay: no checkpoint yet: reading from the oldest binary log, %s", start.file);
    } else {
        int there = file_exists(&s->db, start.file, e);
        if (there < 0)
            goto fail;
        if (!there) {
            snprintf(e->msg, sizeof e->msg,
                     "the checkpoint's binary log %s (position %llu) is gone: the server purged it "
                     "before the relay read it", start.file, start.pos);
            e->cls = SC_DBERR_FAILURE;
            sc_binlog_stream_close(s);
            return SC_BINLOG_GONE;
        }
        int same = same_log(&s->db, &start, e);
        if (same < 0)
            goto fail;
        if (!same) {
            sc_binlog_stream_close(s);
            return SC_BINLOG_GONE;
        }
    }
    s->rpl = mariadb_rpl_init(s->db.conn);
    if (!s->rpl) {
        snprintf(e->msg, sizeof e->msg, "mariadb_rpl_init: %s", mysql_error(s->db.conn));
        e->cls = SC_DBERR_FAILURE;
        goto fail;
    }
    mariadb_rpl_optionsv(s->rpl, MARIADB_RPL_FILENAME, start.file, strlen(start.file));
    mariadb_rpl_optionsv(s->rpl, MARIADB_RPL_START, (unsigned long)start.pos);
    mariadb_rpl_optionsv(s->rpl, MARIADB_RPL_SERVER_ID, server_id);
    mariadb_rpl_optionsv(s->rpl, MARIADB_RPL_FLAGS, 0);
    if (mariadb_rpl_open(s->rpl)) {
        snprintf(e->msg, sizeof e->msg, "COM_BINLOG_DUMP from %s:%llu: %s", start.file, start.pos,
                 mysql_error(s->db.conn));
        e->code = mysql_errno(s->db.conn);
        e->cls = SC_DBERR_FAILURE;
        goto fail;
    }
    sc_binlog_tx_start(&s->tx, &start);
    s->end = start.pos;
    s->have_table = 0;
    return SC_BINLOG_OPENED;
fail:
    sc_binlog_stream_close(s);
    return SC_BINLOG_OPEN_FAILED;
}

void sc_binlog_stream_close(struct sc_binlog_stream *s)
{
    if (s->ev) {
        mariadb_free_rpl_event(s->ev);
        s->ev = NULL;
    }
    if (s->rpl) {
        mariadb_rpl_close(s->rpl);
        s->rpl = NULL;
    }
    sc_db_close(&s->db);
}

int sc_binlog_stream_is_open(const struct sc_binlog_stream *s)
{
    return s->rpl != NULL;
}

/* 1 when an event can be read without blocking for wait_ms. The client
 * reads ahead (up to 16 KiB) into its connection's cache: an event already
 * there leaves the socket empty, and polling it would wait for the next
 * commit (or wait_ms) to hand over one that has arrived. */
static int readable(struct sc_binlog_stream *s, int wait_ms)
{
    if (s->db.conn->net.read_pos && s->db.conn->net.remain_in_buf > 0)
        return 1;
    const MARIADB_PVIO *pvio = s->db.conn->net.pvio;
    if (pvio && pvio->cache && pvio->cache_pos < pvio->cache + pvio->cache_size)
        return 1;
    struct pollfd pfd = {.fd = (int)mysql_get_socket(s->db.conn), .events = POLLIN};
    return poll(&pfd, 1, wait_ms) > 0;
}

struct keys {
    char (*ids)[37];
    int n, max;
};

static int on_key(void *ctx, const char *v, size_t n)
{
    struct keys *k = ctx;
    if (n == 0 || n > 36 || k->n >= k->max)
        return -1;
    memcpy(k->ids[k->n], v, n);
    k->ids[k->n][n] = 0;
    k->n++;
    return 0;
}

/* An event that may hold outbox rows the reader cannot read: never passed
 * over, and never read again with hope (the relay stops). */
static int unreadable(struct sc_binlog_stream *s, const MARIADB_RPL_EVENT *ev, const char *why)
{
    /* Where the event before it ended: its own length can be another
     * than on disk (libmariadb 3.4 hands over some compressed events
     * uncompressed), so its end less its length may not be its start. */
    unsigned long long at = s->ev_start;
    if (at == 0 || (ev->next_event_pos && at >= ev->next_event_pos))
        at = ev->next_event_pos >= ev->event_length ? ev->next_event_pos - ev->event_length : 0;
    snprintf(s->err, sizeof s->err, "the binary log holds at %s:%llu an event of type %u (%s), which may "
             "carry outbox_event's rows and which the relay cannot read (%s)", s->tx.file, at,
             (unsigned)ev->event_type, sc_binlog_event_name(ev->event_type), why);
    s->unreadable = 1;
    sc_binlog_stream_close(s);
    return -1;
}

static int fail(struct sc_binlog_stream *s, const char *what)
{
    snprintf(s->err, sizeof s->err, "%s", what);
    sc_binlog_stream_close(s);
    return -1;
}

/* 1 when the client library's error code says an event cannot be read,
 * however often it is fetched again. */
static int client_cannot_read(unsigned code)
{
    return code == CR_UNKNOWN_BINLOG_EVENT || code == CR_ERR_BINLOG_UNCOMPRESS ||
           code == CR_ERR_UNSUPPORTED_BINLOG_FORMAT;
}

/* One event. Returns 0, or -1 with s->err set. */
static int handle(struct sc_binlog_stream *s, MARIADB_RPL_EVENT *ev, struct keys *k)
{
    const unsigned char *body = ev->raw_data + ev->raw_data_ofs + HEADER_LEN;
    size_t tail = s->checksum ? CHECKSUM_LEN : 0;
    if (ev->event_length < HEADER_LEN + tail ||
        ev->raw_data_ofs + ev->event_length > ev->raw_data_size)
        return fail(s, "a binary log event is shorter than its header");
    size_t len = ev->event_length - HEADER_LEN - tail;
    s->bytes_read += ev->event_length;
    switch (ev->event_type) {
    case ROTATE_EVENT: {
        /* Read here, not from libmariadb's parse: its position (8 bytes)
         * and the file's name (the rest of the body). */
        if (len < 8 || len - 8 > SC_BINLOG_FILE_MAX || len == 8)
            return fail(s, "a rotate event could not be decoded");
        unsigned long long at = 0;
        for (int i = 7; i >= 0; i--)
            at = at << 8 | body[i];
        sc_binlog_tx_rotate(&s->tx, (const char *)body + 8, len - 8, at);
        s->have_table = 0; /* a new file: its transactions map their tables again */
        return 0;
    }
    case GTID_EVENT: {
        char gtid[SC_BINLOG_GTID_MAX + 1];
        snprintf(gtid, sizeof gtid, "%u-%u-%llu", ev->event.gtid.domain_id, ev->server_id,
                 (unsigned long long)ev->event.gtid.sequence_nr);
        sc_binlog_tx_gtid(&s->tx, gtid, (ev->event.gtid.flags & FL_STANDALONE) != 0);
        return 0;
    }
    case XID_EVENT:
        sc_binlog_tx_xid(&s->tx, ev->next_event_pos, ev->timestamp);
        return 0;
    case QUERY_EVENT: {
        const MARIADB_STRING *q = &ev->event.query.statement;
        sc_binlog_tx_query(&s->tx, q->str, q->length, ev->next_event_pos, ev->timestamp);
        return 0;
    }
    case TABLE_MAP_EVENT: {
        struct sc_binlog_table t;
        enum sc_binlog_decode d = sc_binlog_table_map(body, len, TABLE_ID_LEN, &t);
        if (d == SC_BINLOG_UNSUPPORTED)
            return 0; /* more columns than outbox_event can have: another table */
        if (d != SC_BINLOG_OK)
            return fail(s, d == SC_BINLOG_TRUNCATED ? "a TABLE_MAP event could not be decoded: truncated"
                                                   : "a TABLE_MAP event could not be decoded: impossible value");
        /* Ids are reused after a restart and by other tables: only the
         * latest map of an id counts. */
        sc_binlog_tx_table(&s->tx, t.name);
        if (strcmp(t.db, s->schema) == 0 && strcmp(t.name, "outbox_event") == 0) {
            s->table = t;
            s->have_table = 1;
        } else if (s->have_table && t.table_id == s->table.table_id) {
            s->have_table = 0;
        }
        return 0;
    }
    case WRITE_ROWS_EVENT_V1:
    case WRITE_ROWS_EVENT:
    case WRITE_ROWS_COMPRESSED_EVENT_V1:
    case WRITE_ROWS_COMPRESSED_EVENT: {
        uint64_t id;
        if (!s->have_table || sc_binlog_rows_table(body, len, TABLE_ID_LEN, &id) != SC_BINLOG_OK ||
            id != s->table.table_id)
            return 0; /* another table's rows */
        if (ev->event_type == WRITE_ROWS_COMPRESSED_EVENT_V1 || ev->event_type == WRITE_ROWS_COMPRESSED_EVENT)
            return unreadable(s, ev, sc_binlog_event_remedy(ev->event_type));
        int before = k->n;
        enum sc_binlog_decode d = sc_binlog_write_rows(body, len, TABLE_ID_LEN,
                                                       ev->event_type == WRITE_ROWS_EVENT, &s->table,
                                                       s->key_col, on_key, k);
        if (d != SC_BINLOG_OK) {
            snprintf(s->err, sizeof s->err, "an outbox_event WRITE_ROWS event at %s:%u could not be "
                     "decoded: %s", s->tx.file, ev->next_event_pos, sc_binlog_decode_name(d));
            sc_binlog_stream_close(s);
            return -1;
        }
        s->rows_seen += (unsigned long long)(k->n - before);
        return 0;
    }
    default:
        /* heartbeats, format descriptions, updates and deletes: passed
         * over; anything that may hold an insert stops the relay */
        if (sc_binlog_event_kind(ev->event_type, ev->flags) == SC_BINLOG_EV_UNREADABLE)
            return unreadable(s, ev, sc_binlog_event_remedy(ev->event_type));
        return 0;
    }
}

int sc_binlog_stream_event(struct sc_binlog_stream *s, MARIADB_RPL_EVENT *ev, char (*ids)[37], int have,
                           int cap)
{
    struct keys k = {ids, have, cap};
    s->err[0] = 0;
    s->unreadable = 0;
    return handle(s, ev, &k) ? -1 : k.n;
}

int sc_binlog_stream_read(struct sc_binlog_stream *s, char (*ids)[37], int have, int max, int cap,
                          int wait_ms)
{
    struct keys k = {ids, have, cap};
    s->err[0] = 0;
    s->unreadable = 0;
    if (!s->rpl)
        return fail(s, "the binary log stream is closed");
    while (k.n < max) {
        if (!readable(s, k.n > 0 ? 0 : wait_ms))
            break;
        /* A fresh event each time: on a failure libmariadb frees the event
         * it was handed, which would leave s->ev dangling. */
        if (s->ev)
            mariadb_free_rpl_event(s->ev);
        s->ev = NULL;
        MARIADB_RPL_EVENT *ev = mariadb_rpl_fetch(s->rpl, NULL);
        if (!ev) {
            unsigned code = mariadb_rpl_errno(s->rpl);
            if (client_cannot_read(code)) {
                /* libmariadb refuses an event it does not know (and that
                 * the server did not mark ignorable) or cannot uncompress */
                snprintf(s->err, sizeof s->err, "the binary log holds after %s:%llu an event the client "
                         "library cannot read (error %u: %s), which may carry outbox_event's rows",
                         s->tx.file, s->end, code, mariadb_rpl_error(s->rpl));
                s->unreadable = 1;
            } else {
                snprintf(s->err, sizeof s->err, "reading the binary log: %s",
                         mysql_errno(s->db.conn) || !code ? mysql_error(s->db.conn) : mariadb_rpl_error(s->rpl));
            }
            sc_binlog_stream_close(s);
            return -1;
        }
        s->ev = ev;
        s->ev_start = s->end;
        if (ev->next_event_pos)
            s->end = ev->next_event_pos;
        if (handle(s, ev, &k))
            return -1;
    }
    return k.n;
}
