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
                                  "COALESCE(h.replay_until, ''), "
                                  "h.replay_until IS NOT NULL AND EXISTS (SELECT 1 FROM "
                                  "consumed_event c WHERE c.consumer_name = h.consumer_name AND "
                                  "c.event_id = h.replay_until) FROM consumer_held_key h WHERE "
                                  "h.consumer_name = %s AND h.held_behind IS NOT NULL AND h.order_key IN (",
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
            h->replay_done = row[3] && strcmp(row[3], "1") == 0;
        }
    mysql_free_result(res);
    /* The read opened a transaction (autocommit is off): end it, so the
     * batch's transaction does not start from this snapshot. */
    return sc_db_rollback(db, e);
}

int sc_db_held_hold(struct sc_db *db, const char *consumer, const char *key, const char *event_id,
                    int replayed, int64_t prior_seq, int64_t *seq, struct sc_db_err *e)
{
    char qc[300], qk[520], qe[80], fresh[40], next[80], sql[2200];
    quoted(db->conn, qc, consumer);
    quoted(db->conn, qk, key);
    quoted(db->conn, qe, event_id);
    /* A dead letter that has its number (a replayed copy) keeps it: the
     * key's numbers then cover each of its dead letters once. */
    snprintf(fresh, sizeof fresh, "%lld", prior_seq > 0 ? (long long)prior_seq : 1LL);
    if (prior_seq > 0)
        snprintf(next, sizeof next, "LAST_INSERT_ID(GREATEST(hold_seq, %s))", fresh);
    else
        snprintf(next, sizeof next, "LAST_INSERT_ID(hold_seq + 1)");
    /* Assignments run left to right, each seeing the ones before it. A
     * replayed copy failing again during its replay ends the replay there;
     * any other dead letter arriving during a replay is noted, so the key
     * stays held behind it afterwards. LAST_INSERT_ID(expr) hands the number
     * back either way. */
    if (replayed)
        snprintf(sql, sizeof sql,
                 "INSERT INTO consumer_held_key (consumer_name, order_key, held_behind, held_at, "
                 "hold_seq) VALUES (%s, %s, %s, UTC_TIMESTAMP(6), LAST_INSERT_ID(%s)) ON DUPLICATE "
                 "KEY UPDATE held_at = IF(held_behind IS NULL OR replay_until IS NOT NULL, "
                 "UTC_TIMESTAMP(6), held_at), held_behind = IF(held_behind IS NULL OR "
                 "replay_until IS NOT NULL, %s, held_behind), held_in_replay = NULL, "
                 "replay_until = NULL, hold_seq = %s",
                 qc, qk, qe, fresh, qe, next);
    else
        snprintf(sql, sizeof sql,
                 "INSERT INTO consumer_held_key (consumer_name, order_key, held_behind, held_at, "
                 "hold_seq) VALUES (%s, %s, %s, UTC_TIMESTAMP(6), LAST_INSERT_ID(%s)) ON DUPLICATE "
                 "KEY UPDATE held_in_replay = IF(replay_until IS NULL, held_in_replay, "
                 "COALESCE(held_in_replay, %s)), held_at = IF(held_behind IS NULL, "
                 "UTC_TIMESTAMP(6), held_at), held_behind = COALESCE(held_behind, %s), "
                 "hold_seq = %s",
                 qc, qk, qe, fresh, qe, qe, next);
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

int sc_db_held_release(struct sc_db *db, const char *consumer, const char *key,
                       const char *replay_until, char *behind, struct sc_db_err *e)
{
    char qc[300], qk[520], qe[80], sql[1400];
    quoted(db->conn, qc, consumer);
    quoted(db->conn, qk, key);
    quoted(db->conn, qe, replay_until);
    snprintf(sql, sizeof sql, "SELECT COALESCE(held_in_replay, '') FROM consumer_held_key WHERE "
             "consumer_name = %s AND order_key = %s AND replay_until = %s FOR UPDATE", qc, qk, qe);
    MYSQL_RES *res = sc_db_select(db, sql, e);
    if (!res)
        goto fail;
    MYSQL_ROW row = mysql_fetch_row(res);
    int r = !row ? SC_HELD_NOT_ENDED : row[0] && row[0][0] ? SC_HELD_STAYS : SC_HELD_RELEASED;
    snprintf(behind, 37, "%s", row && row[0] ? row[0] : "");
    mysql_free_result(res);
    /* held_in_replay NULL: the key goes free; else it stays held behind
     * what arrived during the replay. */
    snprintf(sql, sizeof sql, "UPDATE consumer_held_key SET held_behind = held_in_replay, "
             "held_at = UTC_TIMESTAMP(6), replay_until = NULL, held_in_replay = NULL WHERE "
             "consumer_name = %s AND order_key = %s AND replay_until = %s", qc, qk, qe);
    if ((r != SC_HELD_NOT_ENDED && sc_db_query(db, sql, e)) || sc_db_commit(db, e))
        goto fail;
    return r;
fail:;
    struct sc_db_err rb;
    sc_db_rollback(db, &rb);
    return -1;
}

/* The key's row, locked until the transaction ends: 1 found, 0 none, -1
 * (rolled back). qc, qk get consumer and key quoted (room 300, 520). */
static int lock_row(struct sc_db *db, const char *consumer, const char *key, char *qc, char *qk,
                    struct sc_held_state *st, struct sc_db_err *e)
{
    char sql[1000];
    quoted(db->conn, qc, consumer);
    quoted(db->conn, qk, key);
    snprintf(sql, sizeof sql, "SELECT COALESCE(h.held_behind, ''), h.hold_seq, "
             "COALESCE(h.replay_until, ''), h.replay_until IS NOT NULL AND EXISTS (SELECT 1 FROM "
             "consumed_event c WHERE c.consumer_name = h.consumer_name AND c.event_id = "
             "h.replay_until) FROM consumer_held_key h WHERE h.consumer_name = %s AND "
             "h.order_key = %s FOR UPDATE", qc, qk);
    MYSQL_RES *res = sc_db_select(db, sql, e);
    if (!res) {
        struct sc_db_err r;
        sc_db_rollback(db, &r);
        return -1;
    }
    MYSQL_ROW row = mysql_fetch_row(res);
    memset(st, 0, sizeof *st);
    if (row) {
        snprintf(st->held_behind, sizeof st->held_behind, "%s", row[0] ? row[0] : "");
        st->hold_seq = row[1] ? strtoll(row[1], NULL, 10) : 0;
        snprintf(st->replay_until, sizeof st->replay_until, "%s", row[2] ? row[2] : "");
        st->replay_done = row[3] && strcmp(row[3], "1") == 0;
    }
    mysql_free_result(res);
    return row ? 1 : 0;
}

static int rollback_fail(struct sc_db *db)
{
    struct sc_db_err r;
    sc_db_rollback(db, &r);
    return -1;
}

enum sc_replay_open sc_db_held_open_replay(struct sc_db *db, const char *consumer, const char *key,
                                           struct sc_held_state *st, struct sc_db_err *e)
{
    char qc[300], qk[520], sql[1200];
    int found = lock_row(db, consumer, key, qc, qk, st, e);
    if (found < 0)
        return -1;
    enum sc_replay_open r = SC_REPLAY_OPENED;
    if (!found || !st->held_behind[0])
        r = SC_REPLAY_NOT_HELD;
    else if (st->replay_until[0] && strcmp(st->replay_until, SC_REPLAY_PENDING) != 0 &&
             !st->replay_done)
        r = SC_REPLAY_IN_FLIGHT; /* its copies are on their way: a second one would cut it */
    if (r == SC_REPLAY_OPENED) {
        /* A pending mark left by another replay (running, or one that
         * died before it named its last copy) is taken over: whichever
         * closes second finds the mark changed and stops. */
        snprintf(sql, sizeof sql, "UPDATE consumer_held_key SET replay_until = '%s' WHERE "
                 "consumer_name = %s AND order_key = %s", SC_REPLAY_PENDING, qc, qk);
        if (sc_db_query(db, sql, e))
            return rollback_fail(db);
    }
    if (sc_db_commit(db, e))
        return rollback_fail(db);
    return r;
}

enum sc_replay_close sc_db_held_close_replay(struct sc_db *db, const char *consumer,
                                             const char *key, int64_t seen_seq,
                                             const char *last_id, struct sc_held_state *st,
                                             struct sc_db_err *e)
{
    char qc[300], qk[520], qe[80], sql[1400];
    int found = lock_row(db, consumer, key, qc, qk, st, e);
    if (found < 0)
        return -1;
    if (!found || strcmp(st->replay_until, SC_REPLAY_PENDING) != 0) {
        sc_db_rollback(db, e);
        return SC_REPLAY_TAKEN;
    }
    /* Every dead letter of the key has its number (given out before the
     * dead letter is published, one at a time per key): the browse saw all
     * of them only if it saw the highest. */
    enum sc_replay_close r = seen_seq >= st->hold_seq && last_id ? SC_REPLAY_NAMED
                                                                  : SC_REPLAY_INCOMPLETE;
    if (r == SC_REPLAY_NAMED)
        /* What was noted as arriving during the replay is among the copies
         * now; what arrives from here on is noted again. */
        snprintf(sql, sizeof sql, "UPDATE consumer_held_key SET replay_until = %s, "
                 "held_in_replay = NULL WHERE consumer_name = %s AND order_key = %s",
                 quoted(db->conn, qe, last_id), qc, qk);
    else
        snprintf(sql, sizeof sql, "UPDATE consumer_held_key SET replay_until = NULL WHERE "
                 "consumer_name = %s AND order_key = %s", qc, qk);
    if (sc_db_query(db, sql, e) || sc_db_commit(db, e))
        return rollback_fail(db);
    return r;
}

int sc_db_held_release_now(struct sc_db *db, const char *consumer, const char *key,
                           struct sc_held_state *st, struct sc_db_err *e)
{
    char qc[300], qk[520], sql[1200];
    int found = lock_row(db, consumer, key, qc, qk, st, e);
    if (found < 0)
        return -1;
    int held = found && st->held_behind[0];
    snprintf(sql, sizeof sql, "UPDATE consumer_held_key SET held_behind = NULL, held_at = "
             "UTC_TIMESTAMP(6), replay_until = NULL, held_in_replay = NULL WHERE consumer_name = "
             "%s AND order_key = %s", qc, qk);
    if ((held && sc_db_query(db, sql, e)) || sc_db_commit(db, e))
        return rollback_fail(db);
    return held;
}
