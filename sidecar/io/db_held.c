/* consumer_held_key and consumer_held_event statements (db_held.h). Keys
 * are input: every value goes in escaped and quoted. */
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
    size_t cap = 1024 + 2 * strlen(consumer);
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
    /* Per key its held events not consumed, first first: the first row of
     * each key is what it is held behind. */
    size_t off = (size_t)snprintf(sql, cap, "SELECT e.order_key, e.event_id, "
                                  "COALESCE(k.replay_token, '') FROM consumer_held_event e JOIN "
                                  "consumer_held_key k ON k.consumer_name = e.consumer_name AND "
                                  "k.order_key = e.order_key WHERE e.consumer_name = %s AND NOT "
                                  "EXISTS (SELECT 1 FROM consumed_event c WHERE c.consumer_name = "
                                  "e.consumer_name AND c.event_id = e.event_id) AND e.order_key IN (",
                                  quoted(db->conn, q, consumer));
    for (int i = 0; i < n; i++)
        off += (size_t)snprintf(sql + off, cap - off, "%s%s", i ? ", " : "",
                                quoted(db->conn, q, keys[i]));
    snprintf(sql + off, cap - off, ") ORDER BY e.order_key, e.hold_seq");
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
            struct sc_held_row *h = &rows[i];
            if (h->found || !row[0] || strcmp(row[0], keys[i]) != 0)
                continue;
            h->found = 1;
            snprintf(h->held_behind, sizeof h->held_behind, "%s", row[1] ? row[1] : "");
            snprintf(h->replay_token, sizeof h->replay_token, "%s", row[2] ? row[2] : "");
        }
    mysql_free_result(res);
    /* The read opened a transaction (autocommit is off): end it, so the
     * batch's transaction does not start from this snapshot. */
    return sc_db_rollback(db, e);
}

static int rollback_fail(struct sc_db *db)
{
    struct sc_db_err r;
    sc_db_rollback(db, &r);
    return -1;
}

/* The first column of the first row of sql as a number; -1 when it fails. */
static long long scalar(struct sc_db *db, const char *sql, int *found, struct sc_db_err *e)
{
    MYSQL_RES *res = sc_db_select(db, sql, e);
    if (!res)
        return -1;
    MYSQL_ROW row = mysql_fetch_row(res);
    *found = row && row[0];
    long long v = *found ? strtoll(row[0], NULL, 10) : 0;
    mysql_free_result(res);
    return v;
}

int sc_db_held_hold(struct sc_db *db, const char *consumer, const char *key, const char *event_id,
                    const char *token, int64_t *seq, char *current, struct sc_db_err *e)
{
    char qc[300], qk[520], qe[80], qt[80], sql[2600];
    int found = 0;
    quoted(db->conn, qc, consumer);
    quoted(db->conn, qk, key);
    quoted(db->conn, qe, event_id);
    /* A copy of the key's current replay failing again ends the replay:
     * the copies behind it are held as they come. The key's row is locked
     * from here to COMMIT, so its numbers go out one at a time. */
    snprintf(sql, sizeof sql,
             "INSERT INTO consumer_held_key (consumer_name, order_key, held_at, hold_seq) VALUES "
             "(%s, %s, UTC_TIMESTAMP(6), 0) ON DUPLICATE KEY UPDATE replay_token = IF(%s <> '' AND replay_token <=> %s, NULL, "
             "replay_token)", qc, qk, quoted(db->conn, qt, token), qt);
    if (sc_db_query(db, sql, e))
        return rollback_fail(db);
    /* A key with nothing held has no replay in flight: a token left by a
     * consumer that died before its tidy-up would send this key's later
     * events round behind a replay that is over. */
    snprintf(sql, sizeof sql, "UPDATE consumer_held_key SET replay_token = NULL WHERE "
             "consumer_name = %s AND order_key = %s AND replay_token IS NOT NULL AND NOT EXISTS "
             "(SELECT 1 FROM consumer_held_event e WHERE e.consumer_name = %s AND e.order_key = %s "
             "AND NOT EXISTS (SELECT 1 FROM consumed_event c WHERE c.consumer_name = "
             "e.consumer_name AND c.event_id = e.event_id))", qc, qk, qc, qk);
    if (sc_db_query(db, sql, e))
        return rollback_fail(db);
    snprintf(sql, sizeof sql, "SELECT hold_seq FROM consumer_held_event WHERE consumer_name = %s "
             "AND order_key = %s AND event_id = %s", qc, qk, qe);
    long long have = scalar(db, sql, &found, e);
    if (have < 0)
        return rollback_fail(db);
    if (!found) {
        snprintf(sql, sizeof sql, "UPDATE consumer_held_key SET hold_seq = LAST_INSERT_ID(hold_seq "
                 "+ 1) WHERE consumer_name = %s AND order_key = %s", qc, qk);
        if (sc_db_query(db, sql, e))
            return rollback_fail(db);
        snprintf(sql, sizeof sql, "INSERT INTO consumer_held_event (consumer_name, order_key, "
                 "event_id, hold_seq, held_at) VALUES (%s, %s, %s, LAST_INSERT_ID(), "
                 "UTC_TIMESTAMP(6))", qc, qk, qe);
        if (sc_db_query(db, sql, e))
            return rollback_fail(db);
        have = scalar(db, "SELECT LAST_INSERT_ID()", &found, e);
        if (have < 0)
            return rollback_fail(db);
    }
    *seq = have;
    /* The row is locked since the upsert: a replay named before this hold
     * did not take this event, and one named after sees it. */
    snprintf(sql, sizeof sql, "SELECT COALESCE(replay_token, '') FROM consumer_held_key WHERE "
             "consumer_name = %s AND order_key = %s", qc, qk);
    MYSQL_RES *res = sc_db_select(db, sql, e);
    if (!res)
        return rollback_fail(db);
    MYSQL_ROW row = mysql_fetch_row(res);
    snprintf(current, 37, "%s", row && row[0] ? row[0] : "");
    mysql_free_result(res);
    return sc_db_commit(db, e) ? rollback_fail(db) : 0;
}

/* Takes the key's consumer_held_key row FOR UPDATE (qc, qk quoted).
 * Returns 0, or -1 with e set. */
static int lock_key(struct sc_db *db, const char *qc, const char *qk, struct sc_db_err *e)
{
    char sql[1200];
    snprintf(sql, sizeof sql, "SELECT hold_seq FROM consumer_held_key WHERE consumer_name = %s AND "
             "order_key = %s FOR UPDATE", qc, qk);
    MYSQL_RES *res = sc_db_select(db, sql, e);
    if (!res)
        return -1;
    mysql_free_result(res);
    return 0;
}

/* Forgets the key's held events that are consumed (they hold nothing):
 * part of the transaction it runs in. */
static int forget_consumed(struct sc_db *db, const char *qc, const char *qk, struct sc_db_err *e)
{
    char sql[1200];
    snprintf(sql, sizeof sql, "DELETE FROM consumer_held_event WHERE consumer_name = %s AND "
             "order_key = %s AND EXISTS (SELECT 1 FROM consumed_event c WHERE c.consumer_name = "
             "consumer_held_event.consumer_name AND c.event_id = consumer_held_event.event_id)",
             qc, qk);
    return sc_db_query(db, sql, e);
}

long sc_db_held_left(struct sc_db *db, const char *consumer, const char *key, char *first,
                     struct sc_db_err *e)
{
    char qc[300], qk[520], sql[1200];
    quoted(db->conn, qc, consumer);
    quoted(db->conn, qk, key);
    /* The key's row first, as a hold and a replay's naming take it: what
     * is read below is all there is until this commits. */
    if (lock_key(db, qc, qk, e) || forget_consumed(db, qc, qk, e))
        return rollback_fail(db);
    snprintf(sql, sizeof sql, "SELECT event_id FROM consumer_held_event WHERE consumer_name = %s "
             "AND order_key = %s ORDER BY hold_seq LIMIT 1", qc, qk);
    MYSQL_RES *res = sc_db_select(db, sql, e);
    if (!res)
        return rollback_fail(db);
    MYSQL_ROW row = mysql_fetch_row(res);
    long n = row != NULL;
    snprintf(first, 37, "%s", row && row[0] ? row[0] : "");
    mysql_free_result(res);
    /* Free: its replay is over, and the key's next hold has none in flight
     * (its later events are dead-lettered as held until the next replay). */
    snprintf(sql, sizeof sql, "UPDATE consumer_held_key SET replay_token = NULL WHERE "
             "consumer_name = %s AND order_key = %s", qc, qk);
    if (n == 0 && sc_db_query(db, sql, e))
        return rollback_fail(db);
    return sc_db_commit(db, e) ? rollback_fail(db) : n;
}

int sc_db_held_lock_events(struct sc_db *db, const char *consumer, const char *key,
                           struct sc_held_event **out, int *n, struct sc_db_err *e)
{
    char qc[300], qk[520], sql[1400];
    *out = NULL;
    *n = 0;
    quoted(db->conn, qc, consumer);
    quoted(db->conn, qk, key);
    /* The key's row locked: no hold of the key commits until the replay
     * is named, so what is read here is all there is. */
    if (lock_key(db, qc, qk, e))
        return rollback_fail(db);
    snprintf(sql, sizeof sql, "SELECT e.event_id, e.hold_seq FROM consumer_held_event e WHERE "
             "e.consumer_name = %s AND e.order_key = %s AND NOT EXISTS (SELECT 1 FROM "
             "consumed_event c WHERE c.consumer_name = e.consumer_name AND c.event_id = "
             "e.event_id) ORDER BY e.hold_seq", qc, qk);
    MYSQL_RES *res = sc_db_select(db, sql, e);
    if (!res)
        return rollback_fail(db);
    my_ulonglong rows = mysql_num_rows(res);
    if (rows && !(*out = calloc((size_t)rows, sizeof **out))) {
        mysql_free_result(res);
        *e = (struct sc_db_err){.cls = SC_DBERR_FAILURE};
        snprintf(e->msg, sizeof e->msg, "out of memory");
        return rollback_fail(db);
    }
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(res))) {
        struct sc_held_event *h = &(*out)[(*n)++];
        snprintf(h->event_id, sizeof h->event_id, "%s", row[0] ? row[0] : "");
        h->seq = row[1] ? strtoll(row[1], NULL, 10) : 0;
    }
    mysql_free_result(res);
    return 0;
}

int sc_db_held_name_replay(struct sc_db *db, const char *consumer, const char *key,
                           const char *token, struct sc_db_err *e)
{
    char qc[300], qk[520], qt[80], sql[1400];
    quoted(db->conn, qc, consumer);
    quoted(db->conn, qk, key);
    snprintf(sql, sizeof sql, "UPDATE consumer_held_key SET replay_token = %s WHERE "
             "consumer_name = %s AND order_key = %s", quoted(db->conn, qt, token), qc, qk);
    if (sc_db_query(db, sql, e))
        return rollback_fail(db);
    if (forget_consumed(db, qc, qk, e))
        return rollback_fail(db);
    return sc_db_commit(db, e) ? rollback_fail(db) : 0;
}

long sc_db_held_release(struct sc_db *db, const char *consumer, const char *key,
                        struct sc_db_err *e)
{
    struct sc_held_event *evs;
    int n;
    char qc[300], qk[520], sql[1200];
    if (sc_db_held_lock_events(db, consumer, key, &evs, &n, e))
        return -1;
    free(evs);
    quoted(db->conn, qc, consumer);
    quoted(db->conn, qk, key);
    snprintf(sql, sizeof sql, "DELETE FROM consumer_held_event WHERE consumer_name = %s AND "
             "order_key = %s", qc, qk);
    if (sc_db_query(db, sql, e))
        return rollback_fail(db);
    snprintf(sql, sizeof sql, "UPDATE consumer_held_key SET replay_token = NULL WHERE "
             "consumer_name = %s AND order_key = %s", qc, qk);
    if (sc_db_query(db, sql, e) || sc_db_commit(db, e))
        return rollback_fail(db);
    return n;
}
