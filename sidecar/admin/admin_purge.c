/* sidecar purge: delete bookkeeping past its retention in bounded batches
 * of short transactions. */
#include <ctype.h>
#include <errno.h>
#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin.h"
#include "io/db.h"
#include "io/db_watermark.h"
#include "lifecycle.h"
#include "tenant_discover.h"

/* The longest retention accepted: 100 years. Beyond it
 * `UTC_TIMESTAMP(6) - INTERVAL n SECOND` leaves the server's date range (a
 * NULL that silently matches nothing), and n * unit can overflow: 213503982334602d
 * wrapped to 61184 s, a 17-hour retention. */
#define SC_DURATION_MAX_S (36500LL * 86400)
#define SC_DURATION_TOO_LONG (-2)

/* Returns -1 when s is not a duration, SC_DURATION_TOO_LONG above
 * SC_DURATION_MAX_S. */
long long sc_parse_duration_s(const char *s)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE)
        return SC_DURATION_TOO_LONG;
    long long mult = 1;
    if (*end == 's')
        end++;
    else if (*end == 'm')
        mult = 60, end++;
    else if (*end == 'h')
        mult = 3600, end++;
    else if (*end == 'd')
        mult = 86400, end++;
    if (*end)
        return -1;
    /* Compared before multiplying: v * mult must not overflow. */
    if (v > SC_DURATION_MAX_S / mult)
        return SC_DURATION_TOO_LONG;
    return v * mult;
}

/* Deletes one bounded batch: the ids are read without locks, then deleted
 * by primary key, still past the cutoff, in a short transaction of its own.
 * Returns rows deleted, or -1. */
static long long purge_batch(struct sc_db *db, const char *select_sql, const char *delete_head,
                             const char *delete_tail, int dry_run, struct sc_db_err *e)
{
    MYSQL_RES *r = sc_db_select(db, select_sql, e);
    if (!r)
        return -1;
    long long n = (long long)mysql_num_rows(r);
    if (n == 0 || dry_run) {
        mysql_free_result(r);
        sc_db_rollback(db, e);
        return n;
    }
    size_t cap = (size_t)n * 40 + 512, off = 0;
    char *ids = malloc(cap);
    MYSQL_ROW row;
    while (ids && (row = mysql_fetch_row(r)))
        off += (size_t)snprintf(ids + off, cap - off, "%s'%s'", off ? "," : "", row[0]);
    mysql_free_result(r);
    char *sql = ids ? malloc(cap + 512) : NULL;
    if (!sql) {
        free(ids);
        return -1;
    }
    snprintf(sql, cap + 512, "%s%s%s", delete_head, ids, delete_tail);
    free(ids);
    long long deleted = -1;
    if (sc_db_query(db, sql, e) == 0) {
        deleted = (long long)mysql_affected_rows(db->conn);
        if (sc_db_commit(db, e))
            deleted = -1;
    }
    free(sql);
    return deleted;
}

static long long purge_table(struct sc_db *db, const char *what, const char *select_sql,
                             const char *delete_head, const char *delete_tail, int dry_run)
{
    long long total = 0;
    int batches = 0, deadlocks = 0, in_a_row = 0;
    while (!sc_stop_requested()) {
        struct sc_db_err e = {0};
        long long n = purge_batch(db, select_sql, delete_head, delete_tail, dry_run, &e);
        if (n < 0) {
            /* Give up only on 20 in a row: a long purge beside live
             * traffic may meet many over its run. */
            if ((e.cls == SC_DBERR_DEADLOCK || e.cls == SC_DBERR_LOCK_WAIT) && in_a_row < 20) {
                /* A live consumer touched a row being purged: that batch was
                 * rolled back whole; take it again. */
                deadlocks++;
                in_a_row++;
                sc_db_rollback(db, &e);
                continue;
            }
            fprintf(stderr, "sidecar purge: %s: error %u (SQLSTATE %s): %s\n", what, e.code,
                    e.sqlstate, e.msg);
            return -1;
        }
        total += n;
        batches++;
        in_a_row = 0;
        if (n == 0)
            break;
        struct timespec pause = {0, 5 * 1000000L}; /* let live traffic in between */
        nanosleep(&pause, NULL);
    }
    const char *stopped = sc_stop_requested() ? "; stopped by a signal before the end" : "";
    if (deadlocks)
        printf("%s: deleted %lld rows (%d batches, %d retried after a deadlock or lock wait%s)\n",
               what, total, batches, deadlocks, stopped);
    else
        printf("%s: deleted %lld rows (%d batches%s)\n", what, total, batches, stopped);
    return total;
}

/* 1 when the database has consumer_held_event (011), 0 when not, -1. */
static int held_table(struct sc_db *db, const char *pfx)
{
    struct sc_db_err e = {0};
    MYSQL_RES *r = sc_db_select(db, "SELECT COUNT(*) FROM information_schema.TABLES WHERE "
                                "TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'consumer_held_event'",
                                &e);
    if (!r) {
        fprintf(stderr, "sidecar purge: %sreading the schema: error %u: %s\n", pfx, e.code,
                e.msg);
        return -1;
    }
    MYSQL_ROW row = mysql_fetch_row(r);
    int n = row && row[0] && strcmp(row[0], "0") != 0;
    mysql_free_result(r);
    return n;
}

/* Purges one database: tenant's, or with tenant NULL mysql.url's (its
 * lines then without the "tenant NAME: " prefix, as before tenants). 0, or
 * 1 after saying what failed. */
static int purge_db(const struct sc_config *cfg, const char *tenant, long long older,
                    int dry_run)
{
    char pfx[96] = "", what[256];
    if (tenant)
        snprintf(pfx, sizeof pfx, "tenant %s: ", tenant);
    struct sc_db db;
    struct sc_db_err e = {0};
    fflush(stdout); /* each database's lines in order, beside stderr's */
    if (sc_admin_connect(&db, cfg, tenant, &e)) {
        fprintf(stderr, "sidecar purge: %smysql: error %u: %s\n", pfx, e.code, e.msg);
        return 1;
    }
    /* relay.source "binlog" leaves published rows PENDING: those created
     * before the checkpoint's watermark are published (sql/schema/014),
     * and their retention runs from created_at, the only time they have. */
    char w[SC_DB_WATERMARK_LEN], binlog_cond[300] = "";
    int has_w = sc_db_outbox_watermark(&db, w, sizeof w, &e);
    if (has_w < 0) {
        fprintf(stderr, "sidecar purge: %sreading relay_checkpoint: error %u: %s\n", pfx, e.code,
                e.msg);
        sc_db_close(&db);
        return 1;
    }
    sc_db_rollback(&db, &e); /* the read's transaction: the purge's start under READ COMMITTED */
    if (has_w)
        snprintf(binlog_cond, sizeof binlog_cond, "status = 'PENDING' AND lease_until IS NULL AND "
                 "created_at < '%s' AND created_at < UTC_TIMESTAMP(6) - INTERVAL %lld SECOND", w, older);
    if (dry_run) {
        char sql[1024];
        snprintf(sql, sizeof sql,
                 "SELECT (SELECT COUNT(*) FROM consumed_event WHERE consumed_at < UTC_TIMESTAMP(6) - "
                 "INTERVAL %lld SECOND), (SELECT COUNT(*) FROM outbox_event WHERE status = 'PUBLISHED' "
                 "AND published_at < UTC_TIMESTAMP(6) - INTERVAL %lld SECOND), "
                 "(SELECT COUNT(*) FROM outbox_event WHERE %s)", older, older,
                 has_w ? binlog_cond : "FALSE");
        MYSQL_RES *r = sc_db_select(&db, sql, &e);
        MYSQL_ROW row = r ? mysql_fetch_row(r) : NULL;
        if (row) {
            printf("%sconsumed_event: would delete %s rows\n%soutbox_event (PUBLISHED): would "
                   "delete %s rows\n", pfx, row[0], pfx, row[1]);
            if (has_w)
                printf("%soutbox_event (published by the binlog relay, created before %s): would "
                       "delete %s rows\n", pfx, w, row[2]);
        } else
            fprintf(stderr, "sidecar purge: %s%s\n", pfx, mysql_error(db.conn));
        if (r)
            mysql_free_result(r);
        sc_db_close(&db);
        return row ? 0 : 1;
    }
    /* No gap locks: the purge must not block live consumers' inserts. */
    sc_db_query(&db, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", &e);
    char sel[768], tail[256];
    int b = cfg->purge_batch;
    /* A held key's events that were applied stay consumed while the key is
     * held (held means: a held event not consumed), so their rows stay. */
    int held = held_table(&db, pfx);
    if (held < 0) {
        sc_db_close(&db);
        return 1;
    }
    snprintf(sel, sizeof sel,
             "SELECT c.id FROM consumed_event c WHERE c.consumed_at < UTC_TIMESTAMP(6) - INTERVAL "
             "%lld SECOND%s ORDER BY c.consumed_at LIMIT %d", older,
             held ? " AND NOT EXISTS (SELECT 1 FROM consumer_held_event h WHERE h.consumer_name = "
                    "c.consumer_name AND h.event_id = c.event_id)" : "", b);
    snprintf(tail, sizeof tail, ") AND consumed_at < UTC_TIMESTAMP(6) - INTERVAL %lld SECOND", older);
    snprintf(what, sizeof what, "%sconsumed_event", pfx);
    long long a = purge_table(&db, what, sel, "DELETE FROM consumed_event WHERE id IN (",
                              tail, 0);
    snprintf(sel, sizeof sel,
             "SELECT event_id FROM outbox_event WHERE status = 'PUBLISHED' AND published_at < "
             "UTC_TIMESTAMP(6) - INTERVAL %lld SECOND ORDER BY published_at LIMIT %d", older, b);
    snprintf(tail, sizeof tail,
             ") AND status = 'PUBLISHED' AND published_at < UTC_TIMESTAMP(6) - INTERVAL %lld SECOND",
             older);
    /* A signal stops the purge: the next table is not started. */
    snprintf(what, sizeof what, "%soutbox_event (PUBLISHED)", pfx);
    long long o = a < 0 ? -1 : sc_stop_requested() ? 0 : purge_table(&db, what, sel,
                                           "DELETE FROM outbox_event WHERE event_id IN (", tail, 0);
    long long p = 0;
    if (has_w && o >= 0 && !sc_stop_requested()) {
        snprintf(sel, sizeof sel, "SELECT event_id FROM outbox_event WHERE %s ORDER BY created_at "
                 "LIMIT %d", binlog_cond, b);
        snprintf(tail, sizeof tail, ") AND %s", binlog_cond);
        snprintf(what, sizeof what, "%soutbox_event (published by the binlog relay, created before "
                 "%s)", pfx, w);
        p = purge_table(&db, what, sel, "DELETE FROM outbox_event WHERE event_id IN (", tail, 0);
    }
    sc_db_close(&db);
    fflush(stdout);
    return a < 0 || o < 0 || p < 0 ? 1 : 0;
}

int sc_purge_run(const struct sc_config *cfg, int argc, char **argv)
{
    const char *tenant = NULL;
    if (sc_admin_take_tenant(cfg, "purge", &argc, argv, &tenant))
        return 2;
    long long older = -1;
    int dry_run = 0, force = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--older-than") == 0 && i + 1 < argc) {
            older = sc_parse_duration_s(argv[++i]);
            if (older == SC_DURATION_TOO_LONG) {
                fprintf(stderr, "sidecar purge: --older-than: '%s' is longer than the largest "
                                "retention accepted, %lldd (100 years)\n",
                        argv[i], (long long)SC_DURATION_MAX_S / 86400);
                return 2;
            }
            if (older < 0) {
                fprintf(stderr, "sidecar purge: --older-than: expected a duration like 90s, 45m, "
                                "36h or 7d, got '%s'\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--dry-run") == 0) {
            dry_run = 1;
        } else if (strcmp(argv[i], "--force") == 0) {
            force = 1;
        } else {
            fprintf(stderr, "sidecar purge: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (older < 0) {
        fprintf(stderr, "sidecar purge: --older-than DURATION is required\n");
        return 2;
    }
    /* A consumed_event row must outlive every redelivery of its event: the
     * delay queues, the broker's redelivery after a crash, a DLQ replay. */
    long long horizon_s = cfg->purge_horizon_s, retry_ms = 0;
    const char *why = "purge.redelivery_horizon_s (DLQ replays and redeliveries)";
    for (size_t i = 0; i < cfg->n_consumers; i++) {
        long long h = sc_config_retry_horizon_ms(&cfg->consumers[i]);
        if (h > retry_ms)
            retry_ms = h;
    }
    if ((retry_ms + 999) / 1000 > horizon_s) {
        horizon_s = (retry_ms + 999) / 1000;
        why = "the longest retry schedule of a consumer (retry_delays_ms over max_attempts)";
    }
    if (older < horizon_s && !force) {
        fprintf(stderr,
                "sidecar purge: refusing a retention of %llds: it is shorter than the redelivery "
                "horizon of %llds set by %s. A consumed_event row purged before its event's last "
                "redelivery lets that redelivery apply the effect a second time. Use --force if "
                "you know no such redelivery can come.\n",
                older, horizon_s, why);
        return 2;
    }
    if (tenant)
        return purge_db(cfg, tenant, older, dry_run);
    /* mysql.url's database as ever (the relay's outbox is there), then each
     * listed tenant's: one that fails is reported and the others go on. */
    int failed = purge_db(cfg, NULL, older, dry_run), n = 1;
    const char *first_failed = failed ? "mysql.url" : NULL;
    char **names = NULL;
    size_t n_names = 0;
    if (cfg->tenants.present && sc_tenant_names_all(cfg, &names, &n_names)) {
        failed++;
        if (!first_failed)
            first_failed = "tenants.discover";
    }
    for (size_t i = 0; i < n_names && !sc_stop_requested(); i++) {
        n++;
        if (purge_db(cfg, names[i], older, dry_run)) {
            if (!failed++)
                first_failed = names[i];
        }
    }
    if (cfg->tenants.present) {
        fflush(stderr);
        if (failed)
            printf("purge: %d databases (mysql.url and %d tenants), %d failed (the first: %s)\n",
                   n, n - 1, failed, first_failed);
        else
            printf("purge: %d databases (mysql.url and %d tenants), none failed\n", n, n - 1);
    }
    sc_tenant_names_free(names, n_names);
    return failed ? 1 : 0;
}
