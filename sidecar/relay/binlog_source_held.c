/* The binlog source's statements on outbox_event rows, apart from the
 * read-back: the marks it writes (FAILED, held, PUBLISHED after a repair),
 * each guarded by owning the checkpoint's lease, and the reads of the held
 * aggregates (binlog_held.h) over ix_outbox_event_lease. */
#include "binlog_source_held.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relay_db.h"
#include "relay_message.h"

/* The largest statement: its head and tail, and each id escaped (at most
 * 72 bytes), quoted and a comma apart. */
#define IDS_SQL_MAX (1024 + (SC_BATCH_LIMIT + SC_BINLOG_SPILL) * 76)


/* "'id','id',..." of ids[0..n), escaped, into out (n * 76 bytes at most). */
static void id_list(struct sc_db *db, char (*ids)[37], int n, char *out, size_t len)
{
    size_t at = 0;
    out[0] = 0;
    for (int i = 0; i < n && at < len; i++) {
        char id[2 * 36 + 1];
        mysql_real_escape_string(db->conn, id, ids[i], (unsigned long)strlen(ids[i]));
        at += (size_t)snprintf(out + at, len - at, "%s'%s'", i ? "," : "", id);
    }
}

/* One UPDATE of the rows named in ids[0..n) (set, then "WHERE cond AND
 * event_id IN (...)"), committed, only while this relay owns the
 * checkpoint's lease (a relay that lost it may hold a batch read before a
 * repair: its FAILED mark would undo the repair). Returns the rows
 * changed, or -1 with e. */
static long long update_ids(struct sc_binlog_source *s, const char *set, const char *cond, char (*ids)[37],
                            int n, struct sc_db_err *e)
{
    static char sql[IDS_SQL_MAX];
    char owner[2 * 128 + 1];
    mysql_real_escape_string(s->db.conn, owner, s->worker_id, (unsigned long)strlen(s->worker_id));
    int len = snprintf(sql, sizeof sql, "UPDATE outbox_event SET %s WHERE %s AND EXISTS (SELECT 1 FROM "
                       "relay_checkpoint WHERE outbox = 'outbox_event' AND lease_owner = '%s') AND event_id IN (",
                       set, cond, owner);
    id_list(&s->db, ids, n, sql + len, sizeof sql - (size_t)len - 2);
    strcat(sql, ")");
    if (sc_db_query(&s->db, sql, e)) {
        sc_db_rollback(&s->db, &(struct sc_db_err){0});
        return -1;
    }
    long long changed = (long long)mysql_affected_rows(s->db.conn);
    return sc_db_commit(&s->db, e) ? -1 : changed;
}

/* The mark of a held row: lease_until set on a PENDING row, which the
 * binlog relay never leases otherwise (the poll relay takes it as an
 * expired lease: the recovery procedure publishes it). */
static void held_set(struct sc_binlog_source *s, char *out, size_t len)
{
    char owner[2 * 128 + 1];
    mysql_real_escape_string(s->db.conn, owner, s->worker_id, (unsigned long)strlen(s->worker_id));
    snprintf(out, len, "lease_owner = '%s', lease_until = UTC_TIMESTAMP(6)", owner);
}

int sc_binlog_src_hold_rows(void *io, char (*ids)[37], int n, struct sc_db_err *e)
{
    struct sc_binlog_source *s = io;
    char set[400];
    held_set(s, set, sizeof set);
    return update_ids(s, set, "status = 'PENDING'", ids, n, e) < 0 ? -1 : 0;
}

/* Adds (type, id, failed) of each row of sql's answer to h. */
static int add_aggregates(struct sc_binlog_source *s, const char *sql, struct sc_binlog_held *h,
                          struct sc_db_err *e)
{
    MYSQL_RES *res = sc_db_select(&s->db, sql, e);
    if (!res)
        return -1;
    MYSQL_ROW row;
    int oom = 0;
    while ((row = mysql_fetch_row(res))) {
        struct sc_binlog_held_agg *a =
            row[0] && row[1] ? sc_binlog_held_add(h, row[0], row[1], row[2] && strcmp(row[2], "1") == 0) : NULL;
        if (row[0] && row[1] && !a)
            oom = 1;
        if (a && row[3])
            sc_binlog_held_failed_at(a, row[3], 0);
    }
    mysql_free_result(res);
    sc_db_rollback(&s->db, &(struct sc_db_err){0});
    if (oom) {
        *e = (struct sc_db_err){.cls = SC_DBERR_FAILURE};
        snprintf(e->msg, sizeof e->msg, "out of memory holding aggregates");
        return -1;
    }
    return 0;
}

/* Both reads are ranges of ix_outbox_event_lease (status, lease_until):
 * the FAILED rows and the held ones, a few beside the table. */
int sc_binlog_src_held_load(void *io, struct sc_binlog_held *h, struct sc_db_err *e)
{
    return add_aggregates(io, "SELECT aggregate_type, aggregate_id, MAX(status = 'FAILED'), "
                              "DATE_FORMAT(MIN(IF(status = 'FAILED', created_at, NULL)), "
                              "'%Y-%m-%dT%H:%i:%s.%fZ') FROM outbox_event "
                              "FORCE INDEX (ix_outbox_event_lease) WHERE status = 'FAILED' OR "
                              "(status = 'PENDING' AND lease_until IS NOT NULL) "
                              "GROUP BY aggregate_type, aggregate_id", h, e);
}

int sc_binlog_src_log_end(void *io, struct sc_binlog_pos *end, struct sc_db_err *e)
{
    struct sc_binlog_source *s = io;
    MYSQL_RES *res = sc_db_select(&s->db, "SHOW BINARY LOGS", e);
    if (!res)
        return -1;
    memset(end, 0, sizeof *end);
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(res)))
        if (row[0] && row[1]) {
            snprintf(end->file, sizeof end->file, "%s", row[0]);
            end->pos = strtoull(row[1], NULL, 10);
        }
    mysql_free_result(res);
    sc_db_rollback(&s->db, &(struct sc_db_err){0});
    return 0;
}

int sc_binlog_src_held_failed(void *io, struct sc_binlog_held *h, struct sc_db_err *e)
{
    struct sc_binlog_held_agg **list = malloc((h->n ? h->n : 1) * sizeof *list);
    if (!list) {
        *e = (struct sc_db_err){.cls = SC_DBERR_FAILURE};
        snprintf(e->msg, sizeof e->msg, "out of memory");
        return -1;
    }
    size_t n = sc_binlog_held_list(h, list, h->n);
    struct sc_binlog_held_agg *saved = calloc(n ? n : 1, sizeof *saved);
    for (size_t k = 0; k < n; k++) {
        if (saved)
            saved[k] = *list[k];
        list[k]->failed = 0;
        list[k]->first_time[0] = 0;
    }
    int rc = add_aggregates(io, "SELECT aggregate_type, aggregate_id, 1, DATE_FORMAT(MIN(created_at), "
                                "'%Y-%m-%dT%H:%i:%s.%fZ') FROM outbox_event FORCE INDEX "
                                "(ix_outbox_event_lease) WHERE status = 'FAILED' GROUP BY aggregate_type, "
                                "aggregate_id", h, e);
    if (rc && saved) /* unknown: as they were */
        for (size_t k = 0; k < n; k++) {
            list[k]->failed = saved[k].failed;
            memcpy(list[k]->first_time, saved[k].first_time, sizeof saved[k].first_time);
            list[k]->first_version = saved[k].first_version;
        }
    free(saved);
    free(list);
    return rc;
}

int sc_binlog_src_held_rows(void *io, const char *type, const char *id, const char *before,
                        struct sc_relay_row *rows, int max, struct sc_db_err *e)
{
    struct sc_binlog_source *s = io;
    char *sql = NULL, *t = NULL, *a = NULL;
    int n = -1;
    if (type) {
        size_t tl = strlen(type), il = strlen(id);
        t = malloc(2 * tl + 1);
        a = malloc(2 * il + 1);
        sql = t && a ? malloc(2 * tl + 2 * il + 600) : NULL;
        if (sql) {
            mysql_real_escape_string(s->db.conn, t, type, (unsigned long)tl);
            mysql_real_escape_string(s->db.conn, a, id, (unsigned long)il);
        }
    } else {
        sql = malloc(600);
    }
    if (!sql) {
        *e = (struct sc_db_err){.cls = SC_DBERR_FAILURE};
        snprintf(e->msg, sizeof e->msg, "out of memory");
        goto done;
    }
    int len = sprintf(sql, "SELECT event_id, aggregate_type, aggregate_id, event_type, event_version, payload, "
                           "DATE_FORMAT(created_at, '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ'), traceparent, tracestate "
                           "FROM outbox_event WHERE ");
    if (type)
        len += sprintf(sql + len, "aggregate_type = '%s' AND aggregate_id = '%s' AND ", t, a);
    if (before && strlen(before) >= 26) /* 2026-12-01T10:00:00.000123Z: a DATETIME(6) literal */
        len += sprintf(sql + len, "created_at < '%.10s %.15s' AND ", before, before + 11);
    sprintf(sql + len, "status = 'PENDING' AND lease_until IS NOT NULL "
                       "ORDER BY created_at, event_version, event_id LIMIT %d", max);
    MYSQL_RES *res = sc_db_select(&s->db, sql, e);
    if (!res)
        goto done;
    MYSQL_ROW row;
    int oom = 0;
    n = 0;
    while (n < max && (row = mysql_fetch_row(res)))
        oom |= sc_relay_row_take(&rows[n++], row);
    mysql_free_result(res);
    sc_db_rollback(&s->db, &(struct sc_db_err){0});
    if (oom) {
        for (int i = 0; i < n; i++)
            sc_relay_row_clear(&rows[i]);
        *e = (struct sc_db_err){.cls = SC_DBERR_FAILURE};
        snprintf(e->msg, sizeof e->msg, "out of memory reading held rows");
        n = -1;
    }
done:
    free(sql);
    free(t);
    free(a);
    return n;
}

/* Rows of a stream batch: the checkpoint says it, once per batch. Held
 * rows published after their aggregate's repair are behind the checkpoint:
 * each is marked PUBLISHED. */
int sc_binlog_mark_published(void *io, struct sc_relay_row *const *rows, int n,
                             unsigned char *marked, struct sc_db_err *e)
{
    struct sc_binlog_source *s = io;
    memset(marked, 1, (size_t)n);
    char (*ids)[37] = NULL;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!rows[i]->released)
            continue;
        if (!ids && !(ids = calloc((size_t)n, sizeof *ids))) {
            *e = (struct sc_db_err){.cls = SC_DBERR_FAILURE};
            snprintf(e->msg, sizeof e->msg, "out of memory");
            return -1;
        }
        memcpy(ids[k++], rows[i]->event_id, sizeof ids[0]);
    }
    long long rc = k ? update_ids(s, "status = 'PUBLISHED', published_at = UTC_TIMESTAMP(6), lease_owner = NULL, "
                                     "lease_until = NULL", "status = 'PENDING'", ids, k, e)
                     : 0;
    free(ids);
    return rc < 0 ? -1 : 0;
}

/* FAILED with the held mark (binlog_held.h): set back to PENDING by the
 * repair, the row is held, and published by the sweep. */
int sc_binlog_mark_failed(void *io, const struct sc_relay_row *row, struct sc_db_err *e)
{
    struct sc_binlog_source *s = io;
    char set[400], ids[1][37];
    memcpy(ids[0], row->event_id, sizeof ids[0]);
    held_set(s, set, sizeof set);
    strcat(set, ", status = 'FAILED'");
    /* A stream row has no mark yet: one with a mark is a repaired row, and
     * this copy of it was read before the repair. */
    long long changed = update_ids(s, set, row->released ? "status = 'PENDING' AND lease_until IS NOT NULL"
                                                         : "status = 'PENDING' AND lease_until IS NULL",
                                   ids, 1, e);
    return changed < 0 ? -1 : changed > 0; /* 0: another relay holds the lease (or marked it) */
}

int sc_binlog_mark_held(void *io, struct sc_relay_row *const *rows, int n, struct sc_db_err *e)
{
    struct sc_binlog_source *s = io;
    char (*ids)[37] = calloc((size_t)n, sizeof *ids);
    if (!ids) {
        *e = (struct sc_db_err){.cls = SC_DBERR_FAILURE};
        snprintf(e->msg, sizeof e->msg, "out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++)
        memcpy(ids[i], rows[i]->event_id, sizeof ids[0]);
    int rc = sc_binlog_src_hold_rows(s, ids, n, e);
    free(ids);
    return rc;
}

