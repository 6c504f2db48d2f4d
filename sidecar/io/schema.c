/* What the code needs of the schema, asked of information_schema (which
 * shows a user only the tables it has a privilege on: each role checks its
 * own part). One row per requirement; the first one missing names the
 * migration that adds it. */
#include "io/schema.h"

#include "config.h"
#include "io/db_durability.h"
#include "log.h"

#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct need {
    int part;
    const char *what;      /* for the message */
    const char *sql;       /* SELECT COUNT(*) ...: the requirement holds when it is `want` */
    long want;
    const char *migration; /* sql/schema/ file that brings it */
};

#define COLUMNS(t, list)                                                                       \
    "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND "     \
    "TABLE_NAME = '" t "' AND COLUMN_NAME IN (" list ")"
#define INDEX(t, name, cols)                                                                   \
    "SELECT COUNT(*) FROM (SELECT GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX) AS c, "      \
    "MIN(NON_UNIQUE) AS nu FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = "          \
    "DATABASE() AND TABLE_NAME = '" t "' AND INDEX_NAME = '" name "') s WHERE s.c = '" cols "'"

static const struct need needs[] = {
    {SC_SCHEMA_CONSUMER, "table consumed_event with consumer_name, event_id, consumed_at",
     COLUMNS("consumed_event", "'consumer_name', 'event_id', 'consumed_at'"), 3,
     "002_consumed_event.sql"},
    {SC_SCHEMA_CONSUMER, "unique constraint uq_consumed_event_identity (consumer_name, event_id)",
     INDEX("consumed_event", "uq_consumed_event_identity", "consumer_name,event_id")
     " AND s.nu = 0", 1, "002_consumed_event.sql"},
    {SC_SCHEMA_HOLD, "table consumer_held_key (consumer_name, order_key, held_at, hold_seq)",
     COLUMNS("consumer_held_key", "'consumer_name', 'order_key', 'held_at', 'hold_seq'"), 4,
     "010_consumer_held_key.sql"},
    {SC_SCHEMA_HOLD, "consumer_held_key.replay_token and table consumer_held_event (consumer_name, "
     "order_key, event_id, hold_seq, held_at)",
     "SELECT (" COLUMNS("consumer_held_key", "'replay_token'") ") + (" COLUMNS(
         "consumer_held_event", "'consumer_name', 'order_key', 'event_id', 'hold_seq', 'held_at'")
     ")", 6, "011_consumer_held_event.sql"},
    {SC_SCHEMA_TENANT_COPY, "table consumer_tenant_copy (consumer_name, queue_name, tenant, "
     "event_id, copy_rank, mark, sent_at), where an ordered consumer with tenants keeps the copies "
     "it sent round",
     COLUMNS("consumer_tenant_copy", "'consumer_name', 'queue_name', 'tenant', 'event_id', "
             "'copy_rank', 'mark', 'sent_at'"), 7, "015_consumer_tenant_copy.sql"},
    {SC_SCHEMA_RELAY, "table outbox_event with every column the relay reads and writes",
     COLUMNS("outbox_event", "'event_id', 'aggregate_type', 'aggregate_id', 'event_type', "
             "'event_version', 'payload', 'status', 'lease_owner', 'lease_until', "
             "'publish_attempts', 'created_at', 'published_at'"), 12,
     "001_outbox_event.sql"},
    {SC_SCHEMA_RELAY, "index ix_outbox_event_claim (status, created_at, event_id)",
     INDEX("outbox_event", "ix_outbox_event_claim", "status,created_at,event_id"), 1,
     "001_outbox_event.sql"},
    {SC_SCHEMA_RELAY, "index ix_outbox_event_lease (status, lease_until)",
     INDEX("outbox_event", "ix_outbox_event_lease", "status,lease_until"), 1,
     "001_outbox_event.sql"},
    {SC_SCHEMA_RELAY_ORDER,
     "index ix_outbox_event_order (aggregate_type, aggregate_id, status, event_version, created_at, "
     "event_id), which relay.ordering \"per_aggregate\" claims by",
     INDEX("outbox_event", "ix_outbox_event_order",
           "aggregate_type,aggregate_id,status,event_version,created_at,event_id"), 1,
     "008_outbox_order.sql, then 012_outbox_order_version.sql"},
    /* information_schema.CHECK_CONSTRAINTS is hidden from a user with
     * column privileges only (MariaDB): the table's own definition is not. */
    {SC_SCHEMA_RELAY_BINLOG, "table relay_checkpoint (outbox, binlog_file, binlog_pos, gtid, "
     "published_up_to, lease_owner, lease_until)",
     COLUMNS("relay_checkpoint", "'outbox', 'binlog_file', 'binlog_pos', 'gtid', 'published_up_to', "
             "'lease_owner', 'lease_until'"), 7, "013_relay_checkpoint.sql"},
    {SC_SCHEMA_RELAY, "status FAILED allowed by ck_outbox_event_status",
     "SHOW CREATE TABLE outbox_event", 1, "005_outbox_failed.sql"},
    {SC_SCHEMA_RELAY, "outbox_event columns traceparent and tracestate (the trace context the "
     "relay publishes)",
     COLUMNS("outbox_event", "'traceparent', 'tracestate'"), 2, "009_outbox_trace.sql"},
};

/* 1 when the CHECK named ck_outbox_event_status in a CREATE TABLE text
 * admits 'FAILED'. */
static long failed_allowed(const char *create)
{
    const char *ck = create ? strstr(create, "`ck_outbox_event_status`") : NULL;
    if (!ck)
        return 0;
    const char *end = strstr(ck, "\n");
    const char *failed = strstr(ck, "'FAILED'");
    return failed && (!end || failed < end);
}

static int count(struct sc_db *db, const char *sql, long *n, struct sc_db_err *e)
{
    MYSQL_RES *res = sc_db_select(db, sql, e);
    if (!res)
        return -1;
    MYSQL_ROW row = mysql_fetch_row(res);
    if (strncmp(sql, "SHOW CREATE TABLE", 17) == 0)
        *n = row && row[1] ? failed_allowed(row[1]) : 0;
    else
        *n = row && row[0] ? strtol(row[0], NULL, 10) : 0;
    mysql_free_result(res);
    return 0;
}

int sc_schema_check(struct sc_db *db, int parts, char *why, size_t why_len, struct sc_db_err *e)
{
    for (size_t i = 0; i < sizeof needs / sizeof needs[0]; i++) {
        const struct need *nd = &needs[i];
        long n = 0;
        if (!(parts & nd->part))
            continue;
        if (count(db, nd->sql, &n, e))
            return -1;
        if (n != nd->want) {
            snprintf(why, why_len, "the database lacks %s: apply sql/schema/%s (docs/upgrading.md)",
                     nd->what, nd->migration);
            return 1;
        }
    }
    /* The checks read information_schema inside the session's transaction:
     * end it so the first claim starts a fresh one. */
    return sc_db_rollback(db, e) ? -1 : 0;
}

int sc_schema_startup(const struct sc_config *cfg, int parts)
{
    size_t reached = 0;
    if (sc_db_durability_startup(cfg, &reached))
        return 2;
    struct sc_db db = {0};
    struct sc_db_err e = {0};
    char why[512];
    size_t rotation = sc_db_rotation();
    /* No node answered just now: another round of connect timeouts would
     * only delay the start. */
    int failed = reached ? sc_db_connect(&db, cfg, &e) : -1;
    sc_db_set_rotation(rotation);
    if (!reached) {
        sc_log(SC_LOG_WARN, NULL, "schema not checked at start: database not reachable; it is "
               "checked by `sidecar check`");
        return 0;
    }
    if (failed) {
        sc_log(SC_LOG_WARN, NULL, "schema not checked at start: database not reachable (error %u: "
               "%s); it is checked by `sidecar check`", e.code, e.msg);
        return 0;
    }
    int rc = sc_schema_check(&db, parts, why, sizeof why, &e);
    sc_db_close(&db);
    if (rc == 1) {
        sc_log(SC_LOG_ERROR, NULL, "%s", why);
        return 2;
    }
    if (rc < 0)
        sc_log(SC_LOG_WARN, NULL, "schema not checked at start: error %u: %s", e.code, e.msg);
    return 0;
}

int sc_schema_relay_parts(const struct sc_config *cfg)
{
    return SC_SCHEMA_RELAY | (sc_relay_per_aggregate(&cfg->relay) ? SC_SCHEMA_RELAY_ORDER : 0) |
           (sc_relay_binlog(&cfg->relay) ? SC_SCHEMA_RELAY_BINLOG : 0);
}
