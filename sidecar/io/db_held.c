/* consumer_held_key statements (db_held.h). Keys are input: every value goes
 * in escaped and quoted. */
#include "io/db_held.h"

#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 'value' escaped into out (room: 2 * strlen + 3). */
static char *quoted(MYSQL *conn, char *out, const char *v)
{
    size_t n = strlen(v);
    out[0] = '\'';
    unsigned long len = mysql_real_escape_string(conn, out + 1, v, (unsigned long)n);
    out[len + 1] = '\'';
    out[len + 2] = 0;
    return out;
}

/* Runs sql, then COMMIT; ROLLBACK when either fails. */
static int run_commit(struct sc_db *db, const char *sql, struct sc_db_err *e)
{
    if (sc_db_query(db, sql, e) == 0 && sc_db_commit(db, e) == 0)
        return 0;
    struct sc_db_err r;
    sc_db_rollback(db, &r);
    return -1;
}

int sc_db_held_read(struct sc_db *db, const char *consumer, const char *const *keys, int n,
                    struct sc_held_row *rows, struct sc_db_err *e)
{
    memset(rows, 0, sizeof *rows * (size_t)n);
    if (n == 0)
        return 0;
    size_t cap = 512 + 2 * strlen(consumer);
    for (int i = 0; i < n; i++)
        cap += 2 * strlen(keys[i]) + 4;
    char *sql = malloc(cap), *q = malloc(cap);
    if (!sql || !q) {
        free(sql);
        free(q);
        *e = (struct sc_db_err){.code = 0, .cls = SC_DBERR_FAILURE};
        snprintf(e->msg, sizeof e->msg, "out of memory");
        return -1;
    }
    size_t off = (size_t)snprintf(sql, cap, "SELECT h.order_key, h.held_behind, "
                                  "COALESCE(h.replay_until, ''), COALESCE(h.held_in_replay, ''), "
                                  "h.replay_until IS NOT NULL AND EXISTS (SELECT 1 FROM "
                                  "consumed_event c WHERE c.consumer_name = h.consumer_name AND "
                                  "c.event_id = h.replay_until) FROM consumer_held_key h WHERE "
                                  "h.consumer_name = %s AND h.order_key IN (",
                                  quoted(db->conn, q, consumer));
    for (int i = 0; i < n; i++)
        off += (size_t)snprintf(sql + off, cap - off, "%s%s", i ? ", " : "",
                                quoted(db->conn, q, keys[i]));
    snprintf(sql + off, cap - off, ")");
    MYSQL_RES *res = sc_db_select(db, sql, e);
    free(sql);
    free(q);
    if (!res) {
        struct sc_db_err r;
        sc_db_rollback(db, &r);
        return -1;
    }
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(res)))
        for (int i = 0; i < n; i++) {
            if (!row[0] || strcmp(row[0], keys[i]) != 0)
                continue;
            struct sc_held_row *h = &rows[i];
            h->found = 1;
            snprintf(h->held_behind, sizeof h->held_behind, "%s", row[1] ? row[1] : "");
            snprintf(h->replay_until, sizeof h->replay_until, "%s", row[2] ? row[2] : "");
            snprintf(h->held_in_replay, sizeof h->held_in_replay, "%s", row[3] ? row[3] : "");
            h->replay_done = row[4] && strcmp(row[4], "1") == 0;
        }
    mysql_free_result(res);
    /* The read opened a transaction (autocommit is off): end it, so the
     * batch's transaction does not start from this snapshot. */
    return sc_db_rollback(db, e);
}

int sc_db_held_hold(struct sc_db *db, const char *consumer, const char *key, const char *event_id,
                    int replayed, int64_t *seq, struct sc_db_err *e)
{
    char qc[300], qk[520], qe[80], sql[1400];
    quoted(db->conn, qc, consumer);
    quoted(db->conn, qk, key);
    quoted(db->conn, qe, event_id);
    /* LAST_INSERT_ID(expr) hands the new sequence number back either way. */
    snprintf(sql, sizeof sql,
             "INSERT INTO consumer_held_key (consumer_name, order_key, held_behind, held_at, "
             "hold_seq) VALUES (%s, %s, %s, UTC_TIMESTAMP(6), LAST_INSERT_ID(1)) ON DUPLICATE "
             "KEY UPDATE hold_seq = LAST_INSERT_ID(hold_seq + 1)%s",
             qc, qk, qe, replayed ? ", held_behind = IF(replay_until IS NULL, held_behind, "
                                    "VALUES(held_behind)), held_in_replay = NULL, "
                                    "replay_until = NULL" : "");
    if (sc_db_query(db, sql, e))
        goto fail;
    MYSQL_RES *res = sc_db_select(db, "SELECT LAST_INSERT_ID()", e);
    if (!res)
        goto fail;
    MYSQL_ROW row = mysql_fetch_row(res);
    *seq = row && row[0] ? strtoll(row[0], NULL, 10) : 0;
    mysql_free_result(res);
    if (sc_db_commit(db, e) == 0)
        return 0;
fail:;
    struct sc_db_err r;
    sc_db_rollback(db, &r);
    return -1;
}

int sc_db_held_in_replay(struct sc_db *db, const char *consumer, const char *key,
                         const char *event_id, struct sc_db_err *e)
{
    char qc[300], qk[520], qe[80], sql[1200];
    snprintf(sql, sizeof sql, "UPDATE consumer_held_key SET held_in_replay = "
             "COALESCE(held_in_replay, %s) WHERE consumer_name = %s AND order_key = %s AND "
             "replay_until IS NOT NULL", quoted(db->conn, qe, event_id),
             quoted(db->conn, qc, consumer), quoted(db->conn, qk, key));
    return run_commit(db, sql, e);
}

int sc_db_held_release(struct sc_db *db, const char *consumer, const char *key,
                       const char *event_id, struct sc_db_err *e)
{
    char qc[300], qk[520], qe[80], which[200], sql[1400];
    quoted(db->conn, qc, consumer);
    quoted(db->conn, qk, key);
    if (event_id)
        snprintf(which, sizeof which, "replay_until = %s", quoted(db->conn, qe, event_id));
    else
        snprintf(which, sizeof which, "replay_until IS NOT NULL");
    snprintf(sql, sizeof sql, "DELETE FROM consumer_held_key WHERE consumer_name = %s AND "
             "order_key = %s AND %s AND held_in_replay IS NULL", qc, qk, which);
    if (sc_db_query(db, sql, e))
        goto fail;
    snprintf(sql, sizeof sql, "UPDATE consumer_held_key SET held_behind = held_in_replay, "
             "held_at = UTC_TIMESTAMP(6), replay_until = NULL, held_in_replay = NULL WHERE "
             "consumer_name = %s AND order_key = %s AND %s AND held_in_replay IS NOT NULL", qc,
             qk, which);
    if (sc_db_query(db, sql, e) == 0 && sc_db_commit(db, e) == 0)
        return 0;
fail:;
    struct sc_db_err r;
    sc_db_rollback(db, &r);
    return -1;
}

int sc_db_held_start_replay(struct sc_db *db, const char *consumer, const char *key,
                            const char *event_id, struct sc_db_err *e)
{
    char qc[300], qk[520], qe[80], sql[1200];
    quoted(db->conn, qc, consumer);
    quoted(db->conn, qk, key);
    snprintf(sql, sizeof sql, "SELECT 1 FROM consumer_held_key WHERE consumer_name = %s AND "
             "order_key = %s FOR UPDATE", qc, qk);
    MYSQL_RES *res = sc_db_select(db, sql, e);
    if (!res)
        goto fail;
    MYSQL_ROW row = mysql_fetch_row(res);
    int state = row ? 1 : 0;
    mysql_free_result(res);
    if (state == 1) {
        /* "pending" opens a replay: what the consumer held before belongs
         * to it; the last event's id closes it, keeping what came since. */
        int opening = strcmp(event_id, "pending") == 0;
        snprintf(sql, sizeof sql, "UPDATE consumer_held_key SET replay_until = %s%s WHERE "
                 "consumer_name = %s AND order_key = %s", quoted(db->conn, qe, event_id),
                 opening ? ", held_in_replay = NULL" : "", qc, qk);
        if (sc_db_query(db, sql, e))
            goto fail;
    }
    if (sc_db_commit(db, e))
        goto fail;
    return state;
fail:;
    struct sc_db_err r;
    sc_db_rollback(db, &r);
    return -1;
}
