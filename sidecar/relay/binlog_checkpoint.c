#include "binlog_checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "log.h"

#define ER_BAD_FIELD_WM 1054 /* unknown column */

#define OUTBOX "'outbox_event'"

static int escaped(struct sc_binlog_ckpt *k, char *out, size_t len, const char *s)
{
    if (strlen(s) * 2 + 1 > len)
        return -1;
    mysql_real_escape_string(k->db->conn, out, s, (unsigned long)strlen(s));
    return 0;
}

static int affected(struct sc_binlog_ckpt *k)
{
    return (int)mysql_affected_rows(k->db->conn);
}

int sc_binlog_ckpt_acquire(struct sc_binlog_ckpt *k, struct sc_db_err *e)
{
    char owner[300], sql[1024];
    if (escaped(k, owner, sizeof owner, k->owner))
        return -1;
    snprintf(sql, sizeof sql,
             "UPDATE relay_checkpoint SET lease_owner = '%s', "
             "lease_until = UTC_TIMESTAMP(6) + INTERVAL %d MICROSECOND, updated_at = UTC_TIMESTAMP(6) "
             "WHERE outbox = " OUTBOX " AND (lease_owner IS NULL OR lease_owner = '%s' OR "
             "lease_until < UTC_TIMESTAMP(6))", owner, k->lease_ms * 1000, owner);
    /* The row's creation commits on its own: INSERT IGNORE holds a shared
     * lock on the key it finds, and with the UPDATE after it in the same
     * transaction two relays would deadlock. */
    if (sc_db_query(k->db, "INSERT IGNORE INTO relay_checkpoint (outbox, updated_at) "
                           "VALUES (" OUTBOX ", UTC_TIMESTAMP(6))", e) ||
        sc_db_commit(k->db, e) || sc_db_query(k->db, sql, e))
        goto fail;
    if (affected(k) != 1)
        return sc_db_rollback(k->db, e) ? -1 : 0;
    MYSQL_RES *res = sc_db_select(k->db, "SELECT binlog_file, binlog_pos, IFNULL(gtid, '') "
                                         "FROM relay_checkpoint WHERE outbox = " OUTBOX, e);
    if (!res)
        goto fail;
    MYSQL_ROW row = mysql_fetch_row(res);
    memset(&k->stored, 0, sizeof k->stored);
    if (row) {
        snprintf(k->stored.file, sizeof k->stored.file, "%s", row[0] ? row[0] : "");
        k->stored.pos = row[1] ? strtoull(row[1], NULL, 10) : 0;
        snprintf(k->stored.gtid, sizeof k->stored.gtid, "%s", row[2] ? row[2] : "");
    }
    mysql_free_result(res);
    if (sc_db_commit(k->db, e))
        return -1;
    /* A schema without 014 keeps working, without a watermark. */
    res = sc_db_select(k->db, "SELECT published_created_before FROM relay_checkpoint LIMIT 0", e);
    if (res)
        mysql_free_result(res);
    else if (e->code != ER_BAD_FIELD_WM)
        goto fail;
    int had = k->wm_column;
    k->wm_column = res != NULL;
    if (had != k->wm_column && !k->wm_column)
        sc_warn("relay: relay_checkpoint has no published_created_before (apply "
                "sql/schema/014_relay_checkpoint_watermark.sql): the outbox gauges, inspect and "
                "purge see binlog-published rows as PENDING");
    memset(e, 0, sizeof *e);
    sc_db_rollback(k->db, e);
    return 1;
fail:
    sc_db_rollback(k->db, &(struct sc_db_err){0});
    return -1;
}

int sc_binlog_ckpt_store(struct sc_binlog_ckpt *k, const struct sc_binlog_pos *pos,
                         struct sc_db_err *e)
{
    const struct sc_binlog_pos *p = pos ? pos : &k->stored;
    char owner[300], file[2 * SC_BINLOG_FILE_MAX + 2], gtid[2 * SC_BINLOG_GTID_MAX + 2];
    char when[64] = "published_up_to";
    char wm[160] = "";
    char sql[2048];
    if (escaped(k, owner, sizeof owner, k->owner) || escaped(k, file, sizeof file, p->file) ||
        escaped(k, gtid, sizeof gtid, p->gtid))
        return -1;
    if (p->when)
        snprintf(when, sizeof when, "FROM_UNIXTIME(%u)", p->when);
    /* The position written is settled: the samples it has reached are
     * ready, and one column more of the same UPDATE stores the highest. */
    int64_t w = k->wm_column ? sc_binlog_wm_passed(&k->wm, p) : 0;
    if (w > k->wm_written) {
        char t[40];
        sc_binlog_wm_format(w, t, sizeof t);
        snprintf(wm, sizeof wm, "published_created_before = GREATEST(IFNULL(published_created_before, "
                                "'%s'), '%s'), ", t, t);
    }
    SC_FAULT("relay.before_checkpoint");
    snprintf(sql, sizeof sql,
             "UPDATE relay_checkpoint SET binlog_file = '%s', binlog_pos = %llu, gtid = NULLIF('%s', ''), "
             "published_up_to = %s, %slease_until = UTC_TIMESTAMP(6) + INTERVAL %d MICROSECOND, "
             "updated_at = UTC_TIMESTAMP(6) WHERE outbox = " OUTBOX " AND lease_owner = '%s'",
             file, p->pos, gtid, when, wm, k->lease_ms * 1000, owner);
    if (sc_db_query(k->db, sql, e)) {
        sc_db_rollback(k->db, &(struct sc_db_err){0});
        return -1;
    }
    int held = affected(k) == 1;
    if (sc_db_commit(k->db, e))
        return -1;
    if (held && pos)
        k->stored = *pos;
    if (held && w > k->wm_written)
        k->wm_written = w;
    return held;
}

int sc_binlog_ckpt_release(struct sc_binlog_ckpt *k, struct sc_db_err *e)
{
    char owner[300], sql[512];
    if (escaped(k, owner, sizeof owner, k->owner))
        return -1;
    snprintf(sql, sizeof sql,
             "UPDATE relay_checkpoint SET lease_until = UTC_TIMESTAMP(6) WHERE outbox = " OUTBOX
             " AND lease_owner = '%s'", owner);
    if (sc_db_query(k->db, sql, e)) {
        sc_db_rollback(k->db, &(struct sc_db_err){0});
        return -1;
    }
    return sc_db_commit(k->db, e);
}
