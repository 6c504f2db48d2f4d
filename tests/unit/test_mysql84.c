/* MySQL 8.4, which no package source here provides, emulated where the
 * sidecar depends on how it differs from MariaDB 10.11: its error texts and
 * codes fed to the sidecar's own classifier (the ladder), the variables it
 * returns for the settings check, and the text its JSON column gives back,
 * fed to the relay and the consumer's parser. Each text is quoted from
 * mysql/mysql-server, share/messages_to_clients.txt (the English message of
 * each symbol) unless a comment says otherwise; docs/testing.md lists the
 * sources. */
#include <stdlib.h>
#include <string.h>

#include "sidecar/config.h"
#include "sidecar/consume/order.h"
#include "sidecar/envelope/event.h"
#include "sidecar/handler.h"
#include "sidecar/io/db_durability.h"
#include "sidecar/io/db_error.h"
#include "sidecar/io/db_settings.h"
#include "sidecar/relay/relay_message.h"
#include "tap.h"

#define ID "4dc2061a-8b9e-44fe-b436-3ed01fc9eb6e"

/* One error as MySQL 8.4 sends it, and the class the ladder gives it. */
static void ladder(unsigned code, const char *text, enum sc_db_error_class want, const char *what)
{
    enum sc_db_error_class got = sc_db_classify(code, text);
    is_int(got, want, "%u %s: %s", code, what, sc_db_error_class_name(got));
}

static void errors(void)
{
    /* ER_DUP_ENTRY 1062 is sent with ER_DUP_ENTRY_WITH_KEY_NAME's text,
     * "Duplicate entry '%-.64s' for key '%-.385s'", the key qualified with
     * its table since 8.0.19 (mysql/mysql-server commit 045af147, WL#12589):
     * the entry value is cut at 64 characters, the key name is whole. */
    ladder(1062, "Duplicate entry 'notification-planner-" ID "' for key "
           "'consumed_event.uq_consumed_event_identity'", SC_DBERR_DUPLICATE,
           "on consumed_event.uq_consumed_event_identity is a duplicate");
    ladder(1062, "Duplicate entry 'a-consumer-name-longer-than-the-sixty-four-characters-mysql-kee' "
           "for key 'consumed_event.uq_consumed_event_identity'", SC_DBERR_DUPLICATE,
           "with the entry value cut at 64 characters still names the key");
    ladder(1062, "Duplicate entry '42' for key 'consumed_event.PRIMARY'", SC_DBERR_FAILURE,
           "on consumed_event.PRIMARY is a failure");
    ladder(1062, "Duplicate entry 't1-req-42' for key 'orders.uq_orders_tenant_request'",
           SC_DBERR_FAILURE, "on another table's key is a failure");
    /* ER_OPTION_PREVENTS_STATEMENT, "The MySQL server is running with the %s
     * option so it cannot execute this statement"; err_readonly() in
     * sql/auth/sql_authorization.cc passes "--super-read-only" to a user
     * with SUPER or CONNECTION_ADMIN, "--read-only" to any other, whichever
     * of read_only and super_read_only refused the statement. */
    ladder(1290, "The MySQL server is running with the --read-only option so it cannot execute "
           "this statement", SC_DBERR_NOT_WRITABLE, "read_only");
    ladder(1290, "The MySQL server is running with the --super-read-only option so it cannot "
           "execute this statement", SC_DBERR_NOT_WRITABLE, "super_read_only");
    ladder(1290, "The MySQL server is running with the --secure-file-priv option so it cannot "
           "execute this statement", SC_DBERR_FAILURE, "another option is a failure");
    /* ER_READ_ONLY_MODE 1836 (InnoDB in read-only mode), and
     * ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION 1792 (SQLSTATE 25006). */
    ladder(1836, "Running in read-only mode", SC_DBERR_NOT_WRITABLE, "InnoDB read-only");
    /* But a write on a server started with innodb_read_only fails with
     * ER_OPEN_AS_READONLY 1036, "Table '%-.192s' is read only", 1836 only its
     * warning: ha_innobase::write_row returns HA_ERR_TABLE_READONLY, which
     * handler::print_error turns into 1036 (storage/innobase/handler/
     * ha_innodb.cc, sql/handler.cc; MariaDB 10.11 answers the same, seen on
     * the suite's mariadbd). */
    ladder(1036, "Table 'consumed_event' is read only", SC_DBERR_NOT_WRITABLE,
           "innodb_read_only's write error");
    ok(sc_handler_error_is_transient(1036), "a handler retries 1036 too");
    ladder(1792, "Cannot execute statement in a READ ONLY transaction.", SC_DBERR_NOT_WRITABLE,
           "a READ ONLY transaction");
    /* ER_LOCK_WAIT_TIMEOUT 1205 and ER_LOCK_DEADLOCK 1213 (SQLSTATE 40001). */
    ladder(1205, "Lock wait timeout exceeded; try restarting transaction", SC_DBERR_LOCK_WAIT,
           "lock wait timeout");
    ladder(1213, "Deadlock found when trying to get lock; try restarting transaction",
           SC_DBERR_DEADLOCK, "deadlock");
    /* ER_LOCK_NOWAIT 3572: a NOWAIT locking read (WL#3597, WL#8919) aborts
     * the statement only, where MariaDB's NOWAIT answers 1205. The sidecar's
     * own claims use SKIP LOCKED, which never errs: locked rows are left out
     * of the result, and an empty claim is an idle poll. */
    ladder(3572, "Statement aborted because lock(s) could not be acquired immediately and NOWAIT "
           "is set.", SC_DBERR_LOCK_WAIT, "NOWAIT not granted is a lock wait");
    ok(sc_handler_error_is_transient(3572), "a handler retries 3572 (the handler ABI's list)");
    /* ER_CLIENT_INTERACTION_TIMEOUT 4031: MySQL 8 says why it closes an idle
     * session (wait_timeout) before the socket closes. */
    ladder(4031, "The client was disconnected by the server because of inactivity. See "
           "wait_timeout and interactive_timeout for configuring this behavior.",
           SC_DBERR_CONNECTION, "disconnected for inactivity");
    ok(sc_handler_error_is_transient(4031), "a handler retries 4031");
    /* The client library's own: CR_SERVER_GONE_ERROR 2006, CR_SERVER_LOST
     * 2013 (libmysqlclient's texts, include/errmsg.h / libmysql/errmsg.cc);
     * the code decides, whichever client wrote the text. */
    ladder(2006, "MySQL server has gone away", SC_DBERR_CONNECTION, "server gone");
    ladder(2013, "Lost connection to MySQL server during query", SC_DBERR_CONNECTION,
           "connection lost");
    /* ER_UNKNOWN_COM_ERROR 1047 from a Galera node outside the primary
     * component: the wsrep patch's text, the same on MySQL-wsrep and
     * Percona XtraDB Cluster as on MariaDB. */
    ladder(1047, "WSREP has not yet prepared node for application use", SC_DBERR_NOT_WRITABLE,
           "Galera node not ready");
    /* ER_QUERY_TIMEOUT 3024: a SELECT past max_execution_time. The sidecar
     * sets no such limit; a handler's SELECT that meets the server's is the
     * event's failure (retried by the handler's own answer), not an outage:
     * the same statement meets the same limit again. */
    ladder(3024, "Query execution was interrupted, maximum statement execution time exceeded",
           SC_DBERR_FAILURE, "max_execution_time exceeded is a failure");
}

/* The rows MySQL 8.4 returns for the settings statement, with its defaults
 * (refman 8.4: log_bin on, sync_binlog 1, innodb_flush_log_at_trx_commit 1;
 * transaction_isolation only: tx_isolation went in 8.0.3, WL#9636). */
static void settings(void)
{
    struct sc_db_settings s;
    struct sc_durability d;
    char out[600];
    ok(strstr(sc_db_settings_sql, "'transaction_isolation'") != NULL &&
           strstr(sc_db_settings_sql, "@@") == NULL && strncmp(sc_db_settings_sql, "SHOW ", 5) == 0,
       "the settings are read by name through SHOW, never as @@tx_isolation");
    sc_db_settings_init(&s);
    sc_db_settings_take(&s, "binlog_format", "ROW");
    sc_db_settings_take(&s, "innodb_flush_log_at_trx_commit", "1");
    sc_db_settings_take(&s, "log_bin", "ON");
    sc_db_settings_take(&s, "sync_binlog", "1");
    sc_db_settings_take(&s, "transaction_isolation", "REPEATABLE-READ");
    is_str(s.isolation, "REPEATABLE-READ", "transaction_isolation read without tx_isolation");
    sc_durability_eval(&s, &d);
    is_int(d.unsafe, 0, "MySQL 8.4's defaults are durable (binary log on, synced)");
    ok(sc_db_settings_unsafe(&s, out, sizeof out) == 0, "and safe for the relay");
    sc_db_settings_take(&s, "sync_binlog", "0");
    sc_durability_eval(&s, &d);
    is_int(d.unsafe, 1u << SC_DUR_SYNC_BINLOG, "sync_binlog=0 with MySQL's default binary log is not");
    sc_db_settings_take(&s, "innodb_flush_log_at_trx_commit", "3");
    sc_durability_eval(&s, &d);
    ok(!(d.unsafe & (1u << SC_DUR_FLUSH_LOG)), "3 (MariaDB's, refused by MySQL's SET) is durable");
}

static struct sc_relay_row row(const char *payload)
{
    struct sc_relay_row r;
    memset(&r, 0, sizeof r);
    strcpy(r.event_id, ID);
    r.aggregate_type = strdup("ORDER");
    r.aggregate_id = strdup("1001");
    r.event_type = strdup("ORDER_ACCEPTED");
    r.payload = strdup(payload);
    strcpy(r.time, "2026-12-01T10:00:00.000001Z");
    r.version = 1;
    return r;
}

/* What the relay and the consumer assume of a payload read back: that it is
 * one JSON value, without repeated names, passed on as the server returns
 * it. MySQL's JSON column returns its own normal form (refman 8.4, "The
 * JSON Data Type": duplicate keys are discarded, the last one kept; keys
 * are sorted; sql-common/json_dom.cc orders them by length, then byte by
 * byte, and prints ", " and ": "; numbers with a fraction are doubles). */
static void json(void)
{
    static const struct sc_relay_params structured = {.exchange = "orders", .max_message_bytes = 1 << 24};
    /* As the producer wrote it (and as MariaDB returns it, byte for byte). */
    const char *written = "{\"orderId\":1001,\"total\":12.50,\"customer\":{\"name\":\"Ren\\u00e9e\","
                          "\"id\":\"c-7\"},\"items\":[1,2],\"orderId\":1002}";
    /* As MySQL 8.4 returns it. */
    const char *mysql = "{\"items\": [1, 2], \"total\": 12.5, \"orderId\": 1002, "
                        "\"customer\": {\"id\": \"c-7\", \"name\": \"Ren\xc3\xa9" "e\"}}";
    char why[256] = "", reason[256] = "";
    struct sc_publish m;
    struct sc_parsed_event e;

    struct sc_relay_row r = row(written);
    is_int(sc_relay_message_build(&r, &structured, &m, why, sizeof why), SC_RELAY_INVALID,
           "MariaDB's verbatim text with a repeated name is refused (%s)", why);
    sc_relay_row_clear(&r);

    why[0] = 0;
    r = row(mysql);
    is_int(sc_relay_message_build(&r, &structured, &m, why, sizeof why), SC_RELAY_BUILT,
           "MySQL's normal form of the same input is published (%s)", why);
    ok(sc_event_parse(m.body.bytes, m.body.len, ID, 36, &e, reason, sizeof reason) == 0,
       "and read by the consumer (%s)", reason);
    is_str(e.ev.data_json, mysql, "data is MySQL's text exactly, never re-encoded back");
    ok(strstr(e.ev.data_json, "1002") && !strstr(e.ev.data_json, "1001"),
       "the last of the repeated keys is what consumers get");
    sc_event_free(&e);

    /* An ordering key from a number is the number as the server wrote it. */
    struct sc_consumer_config k;
    memset(&k, 0, sizeof k);
    k.envelope = "cloudevents";
    k.max_message_bytes = 1 << 20;
    k.ordering = (struct sc_ordering_config){.present = 1, .key = "data/total", .partitions = 1};
    amqp_envelope_t env;
    memset(&env, 0, sizeof env);
    env.message.body.bytes = m.body.bytes;
    env.message.body.len = m.body.len;
    char key[SC_ORDER_KEY_MAX + 1];
    ok(sc_order_key(&k, &env, key, sizeof key, why, sizeof why) == SC_ORDER_KEYED &&
           strcmp(key, "12.5") == 0,
       "a data/ ordering key is MySQL's digits (%s): one server's text for every event of a key",
       key);
    sc_relay_row_clear(&r);

    /* A number beyond a double's digits comes back rounded (MySQL keeps
     * int64, uint64 or double); the relay passes the rounded text on. */
    r = row("{\"n\": 1.2345678901234568e29}");
    is_int(sc_relay_message_build(&r, &structured, &m, why, sizeof why), SC_RELAY_BUILT,
           "a rounded big number is published as MySQL wrote it");
    ok(sc_event_parse(m.body.bytes, m.body.len, ID, 36, &e, reason, sizeof reason) == 0 &&
           strcmp(e.ev.data_json, "{\"n\": 1.2345678901234568e29}") == 0,
       "the consumer gets that text (%s)", reason);
    sc_event_free(&e);
    sc_relay_row_clear(&r);
}

int main(void)
{
    errors();
    settings();
    json();
    return done();
}
