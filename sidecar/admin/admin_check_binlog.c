/* `sidecar check` with relay.source "binlog": what the reader needs of the
 * server (the binary log on, ROW events with every column, uncompressed:
 * neither MariaDB's log_bin_compress nor MySQL's
 * binlog_transaction_compression),
 * a replica id nobody else uses, the replication grants and PROCESS (the
 * watermark's sample; sql/grants/relay_binlog.sql), and a checkpoint the server can still
 * serve, with the retention left against the relay's lag. */
#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "relay/binlog_source.h"

/* The first cell of sql's first row into out; "" when NULL or an error. */
static int one(struct sc_db *db, const char *sql, char *out, size_t len)
{
    out[0] = 0;
    if (mysql_query(db->conn, sql))
        return -1;
    MYSQL_RES *res = mysql_store_result(db->conn);
    if (!res)
        return -1;
    MYSQL_ROW row = mysql_fetch_row(res);
    if (row && row[0])
        snprintf(out, len, "%s", row[0]);
    mysql_free_result(res);
    return 0;
}

static int refuse(const char *what)
{
    fprintf(stderr, "sidecar: relay.source binlog: %s\n", what);
    return 1;
}

/* 1 when the session's grants hold priv on *.* (or ALL PRIVILEGES there). */
static int granted(struct sc_db *db, const char *priv, const char *alias)
{
    if (mysql_query(db->conn, "SHOW GRANTS"))
        return 0;
    MYSQL_RES *res = mysql_store_result(db->conn);
    if (!res)
        return 0;
    MYSQL_ROW row;
    int found = 0;
    while ((row = mysql_fetch_row(res)))
        if (row[0] && strstr(row[0], " ON *.* ") &&
            (strstr(row[0], priv) || (alias && strstr(row[0], alias)) || strstr(row[0], "ALL PRIVILEGES")))
            found = 1;
    mysql_free_result(res);
    return found;
}

int sc_check_binlog(struct sc_db *db, const struct sc_config *cfg)
{
    char v[512];
    int rc = 0;
    if (one(db, "SELECT @@GLOBAL.log_bin", v, sizeof v) || strcmp(v, "1") != 0)
        return refuse("log_bin is off: start the server with --log-bin (or use relay.source poll)");
    if (one(db, "SELECT @@GLOBAL.binlog_format", v, sizeof v) || strcmp(v, "ROW") != 0) {
        char m[600];
        snprintf(m, sizeof m, "binlog_format is %s: the reader needs ROW", v[0] ? v : "unknown");
        rc |= refuse(m);
    }
    if (one(db, "SELECT @@GLOBAL.binlog_row_image", v, sizeof v) == 0 && strcmp(v, "MINIMAL") == 0)
        rc |= refuse("binlog_row_image is MINIMAL: the reader needs event_id in every row (FULL or NOBLOB)");
    if (one(db, "SELECT @@GLOBAL.log_bin_compress", v, sizeof v) == 0 && strcmp(v, "1") == 0)
        rc |= refuse("log_bin_compress is on: the reader decodes uncompressed row events only");
    /* MySQL 8.0.20+: each transaction one compressed event, rows inside */
    if (one(db, "SELECT @@GLOBAL.binlog_transaction_compression", v, sizeof v) == 0 &&
        (strcmp(v, "1") == 0 || strcmp(v, "ON") == 0))
        rc |= refuse("binlog_transaction_compression is ON: the reader cannot read a compressed "
                     "transaction (TRANSACTION_PAYLOAD_EVENT), and stops at the first one");
    char sid[64];
    one(db, "SELECT @@GLOBAL.server_id", sid, sizeof sid);
    if (strcmp(sid, "0") == 0)
        rc |= refuse("server_id is 0: a server without one serves no replica");
    if (cfg->relay.worker_id) {
        unsigned mine = sc_binlog_replica_id(cfg->relay.worker_id);
        int clash = (unsigned)strtoul(sid, NULL, 10) == mine;
        if (mysql_query(db->conn, "SHOW SLAVE HOSTS") == 0 || mysql_query(db->conn, "SHOW REPLICAS") == 0) {
            MYSQL_RES *res = mysql_store_result(db->conn);
            MYSQL_ROW row;
            while (res && (row = mysql_fetch_row(res)))
                clash |= row[0] && (unsigned)strtoul(row[0], NULL, 10) == mine;
            if (res)
                mysql_free_result(res);
        }
        if (clash) {
            char m[200];
            snprintf(m, sizeof m, "the relay's replica server_id %u (from relay.worker_id) is in use", mine);
            rc |= refuse(m);
        } else {
            printf("mysql: relay binlog: replica server_id %u is free (server %s)\n", mine, sid);
        }
    }
    if (!granted(db, "REPLICATION SLAVE", NULL))
        rc |= refuse("the user lacks REPLICATION SLAVE ON *.* (sql/grants/relay_binlog.sql)");
    if (!granted(db, "REPLICATION CLIENT", "BINLOG MONITOR"))
        rc |= refuse("the user lacks REPLICATION CLIENT (BINLOG MONITOR) ON *.* (sql/grants/relay_binlog.sql)");
    if (!granted(db, "PROCESS", NULL))
        rc |= refuse("the user lacks PROCESS ON *.* (sql/grants/relay_binlog.sql): without it the "
                     "checkpoint's watermark is never sampled, and every row it publishes stays "
                     "pending to the outbox gauges, inspect and purge");
    /* The columns it writes: a FAILED row and the rows held behind it get a
     * lease, a repaired row PUBLISHED. Checked by the statement, changing no row. */
    if (mysql_query(db->conn, "UPDATE outbox_event SET status = status, lease_owner = lease_owner, "
                              "lease_until = lease_until, published_at = published_at WHERE 1 = 0") == 0) {
        mysql_query(db->conn, "ROLLBACK");
    } else if (mysql_errno(db->conn) == 1143 || mysql_errno(db->conn) == 1142) {
        rc |= refuse("the user lacks UPDATE (status, lease_owner, lease_until, published_at) ON "
                     "outbox_event (sql/grants/relay_binlog.sql): a FAILED row could not be marked, "
                     "and its batch would be read again and again");
    }
    if (mysql_query(db->conn, "SELECT published_created_before FROM relay_checkpoint LIMIT 0") == 0) {
        MYSQL_RES *res = mysql_store_result(db->conn);
        if (res)
            mysql_free_result(res);
    } else if (mysql_errno(db->conn) == 1054) {
        printf("mysql: relay binlog: relay_checkpoint has no watermark column: apply "
               "sql/schema/014_relay_checkpoint_watermark.sql, or the outbox gauges, inspect and "
               "purge see every row the relay publishes as PENDING\n");
    }
    char file[300], lag[64], keep[64];
    if (one(db, "SELECT binlog_file FROM relay_checkpoint WHERE outbox = 'outbox_event'", file,
            sizeof file) == 0 && file[0]) {
        int there = 0;
        if (mysql_query(db->conn, "SHOW BINARY LOGS") == 0) {
            MYSQL_RES *res = mysql_store_result(db->conn);
            MYSQL_ROW row;
            while (res && (row = mysql_fetch_row(res)))
                there |= row[0] && strcmp(row[0], file) == 0;
            if (res)
                mysql_free_result(res);
        }
        if (!there) {
            char m[600];
            snprintf(m, sizeof m, "the checkpoint's binary log %s is gone: see docs/operations.md "
                     "(publish the gap by polling, then move the checkpoint)", file);
            rc |= refuse(m);
        }
        one(db, "SELECT IFNULL(TIMESTAMPDIFF(SECOND, published_up_to, UTC_TIMESTAMP()), -1) "
                "FROM relay_checkpoint WHERE outbox = 'outbox_event'", lag, sizeof lag);
        one(db, "SELECT @@GLOBAL.binlog_expire_logs_seconds", keep, sizeof keep);
        long l = atol(lag), k = atol(keep);
        printf("mysql: relay binlog: checkpoint in %s, %ld s behind, binary logs kept %s\n", file, l,
               k > 0 ? keep : "until purged by hand");
        if (k > 0 && l > k / 2) {
            char m[300];
            snprintf(m, sizeof m, "the relay is %ld s behind and binary logs are kept %ld s: the "
                     "server purges what the relay has not read before it catches up", l, k);
            rc |= refuse(m);
        }
    }
    if (!rc)
        printf("mysql: relay binlog: log_bin on, ROW events, grants for reading the binary log\n");
    return rc;
}
