/* consumer_tenant_copy statements (db_copies.h). Names and ids are input:
 * every value goes in escaped and quoted. */
#include "io/db_copies.h"

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

static int oom(struct sc_db_err *e)
{
    *e = (struct sc_db_err){.code = 0, .cls = SC_DBERR_FAILURE};
    snprintf(e->msg, sizeof e->msg, "out of memory");
    return -1;
}

/* "consumer_name = .. AND queue_name = .. AND tenant = .." into out. */
static void owner(MYSQL *conn, char *out, size_t cap, const char *consumer, const char *queue,
                  const char *tenant)
{
    char c[2 * 128 + 3], q[2 * 300 + 3], t[2 * 64 + 3];
    snprintf(out, cap, "consumer_name = %s AND queue_name = %s AND tenant = %s",
             quoted(conn, c, consumer), quoted(conn, q, queue), quoted(conn, t, tenant));
}

static int end(struct sc_db *db, int rc, struct sc_db_err *e)
{
    struct sc_db_err r;
    if (rc) {
        sc_db_rollback(db, &r);
        return -1;
    }
    return sc_db_commit(db, e);
}

int sc_db_copy_put(struct sc_db *db, const char *consumer, const char *queue, const char *tenant,
                   const char *event_id, int64_t rank, const char *mark, int move,
                   struct sc_db_err *e)
{
    if (strlen(consumer) > 128 || strlen(queue) > 300 || strlen(tenant) > 64 ||
        strlen(event_id) > 36 || strlen(mark) > 96)
        return oom(e);
    char c[2 * 128 + 3], q[2 * 300 + 3], t[2 * 64 + 3], id[2 * 36 + 3], m[2 * 96 + 3];
    char sql[2048];
    snprintf(sql, sizeof sql,
             "INSERT INTO consumer_tenant_copy (consumer_name, queue_name, tenant, event_id, "
             "copy_rank, mark, sent_at) VALUES (%s, %s, %s, %s, %lld, %s, UTC_TIMESTAMP(6)) "
             "ON DUPLICATE KEY UPDATE %s",
             quoted(db->conn, c, consumer), quoted(db->conn, q, queue), quoted(db->conn, t, tenant),
             quoted(db->conn, id, event_id), (long long)rank, quoted(db->conn, m, mark),
             move ? "copy_rank = VALUES(copy_rank), mark = VALUES(mark)" : "copy_rank = copy_rank");
    return end(db, sc_db_query(db, sql, e), e);
}

int sc_db_copy_renumber(struct sc_db *db, const char *consumer, const char *queue,
                        const char *tenant, const struct sc_copy_row *rows, int n,
                        struct sc_db_err *e)
{
    if (strlen(consumer) > 128 || strlen(queue) > 300 || strlen(tenant) > 64)
        return oom(e);
    char who[2048];
    owner(db->conn, who, sizeof who, consumer, queue, tenant);
    for (int i = 0; i < n; i++) {
        char id[2 * 36 + 3], m[2 * 96 + 3], sql[4096];
        if (strlen(rows[i].event_id) > 36 || strlen(rows[i].mark) > 96)
            return end(db, -1, e);
        snprintf(sql, sizeof sql, "UPDATE consumer_tenant_copy SET copy_rank = %lld, mark = %s "
                 "WHERE %s AND event_id = %s", (long long)rows[i].rank,
                 quoted(db->conn, m, rows[i].mark), who, quoted(db->conn, id, rows[i].event_id));
        if (sc_db_query(db, sql, e))
            return end(db, -1, e);
    }
    return end(db, 0, e);
}

int sc_db_copy_delete(struct sc_db *db, const char *consumer, const char *queue,
                      const char *tenant, const char *const *ids, int n, struct sc_db_err *e)
{
    if (n == 0)
        return 0;
    if (strlen(consumer) > 128 || strlen(queue) > 300 || strlen(tenant) > 64)
        return oom(e);
    size_t cap = 2048 + (size_t)n * (2 * 36 + 6);
    char *sql = malloc(cap);
    if (!sql)
        return oom(e);
    size_t off = (size_t)snprintf(sql, cap, "DELETE FROM consumer_tenant_copy WHERE ");
    owner(db->conn, sql + off, cap - off, consumer, queue, tenant);
    off += strlen(sql + off);
    off += (size_t)snprintf(sql + off, cap - off, " AND event_id IN (");
    for (int i = 0; i < n; i++) {
        char id[2 * 36 + 3];
        if (strlen(ids[i]) > 36) {
            free(sql);
            return oom(e);
        }
        off += (size_t)snprintf(sql + off, cap - off, "%s%s", i ? ", " : "",
                                quoted(db->conn, id, ids[i]));
    }
    snprintf(sql + off, cap - off, ")");
    int rc = sc_db_query(db, sql, e);
    free(sql);
    return end(db, rc, e);
}

int sc_db_copy_delete_rank(struct sc_db *db, const char *consumer, const char *queue,
                           const char *tenant, int64_t rank, struct sc_db_err *e)
{
    if (strlen(consumer) > 128 || strlen(queue) > 300 || strlen(tenant) > 64)
        return oom(e);
    char sql[2048];
    size_t off = (size_t)snprintf(sql, sizeof sql, "DELETE FROM consumer_tenant_copy WHERE ");
    owner(db->conn, sql + off, sizeof sql - off, consumer, queue, tenant);
    off += strlen(sql + off);
    snprintf(sql + off, sizeof sql - off, " AND copy_rank = %lld", (long long)rank);
    return end(db, sc_db_query(db, sql, e), e);
}

int sc_db_copy_load(struct sc_db *db, const char *consumer, const char *queue, const char *tenant,
                    int cap, struct sc_copy_row **rows, int *n, struct sc_db_err *e)
{
    *rows = NULL;
    *n = 0;
    if (strlen(consumer) > 128 || strlen(queue) > 300 || strlen(tenant) > 64)
        return oom(e);
    char sql[2048];
    size_t off = (size_t)snprintf(sql, sizeof sql, "SELECT event_id, copy_rank, mark FROM "
                                  "consumer_tenant_copy WHERE ");
    owner(db->conn, sql + off, sizeof sql - off, consumer, queue, tenant);
    off += strlen(sql + off);
    snprintf(sql + off, sizeof sql - off, " ORDER BY copy_rank LIMIT %d", cap);
    MYSQL_RES *res = sc_db_select(db, sql, e);
    if (!res)
        return end(db, -1, e);
    size_t got = (size_t)mysql_num_rows(res);
    struct sc_copy_row *v = got ? calloc(got, sizeof *v) : NULL;
    if (got && !v) {
        mysql_free_result(res);
        end(db, -1, e);
        return oom(e);
    }
    MYSQL_ROW row;
    int k = 0;
    while ((row = mysql_fetch_row(res))) {
        if (!row[0] || !row[1] || !row[2])
            continue;
        snprintf(v[k].event_id, sizeof v[k].event_id, "%s", row[0]);
        v[k].rank = strtoll(row[1], NULL, 10);
        snprintf(v[k].mark, sizeof v[k].mark, "%s", row[2]);
        k++;
    }
    mysql_free_result(res);
    *rows = v;
    *n = k;
    /* The read opened a transaction (autocommit is off): end it (the rows
     * are read either way). */
    struct sc_db_err r;
    sc_db_rollback(db, &r);
    return 0;
}
