/* The producer library (libsidecar_outbox) under callers that break its
 * transaction, for test_producer_txn.py:
 *
 *   outbox_probe SCENARIO TAG
 *
 * connects as root through SC_TEST_MYSQL_SOCKET to app, runs one
 * sc_outbox_write whose event has aggregate_id TAG and whose business
 * callback inserts probe_biz(tag = TAG) (plus what the scenario adds), and
 * prints {"outcome":..,"code":..,"message":..}. Scenarios:
 *   normal        the business insert only
 *   open          the caller has BEGIN + its own row (tag TAG-caller) open,
 *                 and rolls it back after the call
 *   autocommit0   the same with SET autocommit = 0 instead of BEGIN
 *   ddl           business insert, then CREATE TABLE (an implicit commit)
 *   ddl_fail      the same, then the callback fails
 *   commit        business insert, then COMMIT
 *   fail          business insert twice: 1062 on probe_biz
 *   deadlock      business insert, then a deadlock with a second
 *                 connection (the server rolls the transaction back) */
#include <mysql.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sidecar/outbox.h"

static const char *scenario, *tag;
static MYSQL *other;

static MYSQL *connect_root(void)
{
    MYSQL *m = mysql_init(NULL);
    if (!m || !mysql_real_connect(m, NULL, "root", NULL, "app", 0, getenv("SC_TEST_MYSQL_SOCKET"), 0)) {
        fprintf(stderr, "outbox_probe: cannot connect: %s\n", m ? mysql_error(m) : "oom");
        exit(2);
    }
    return m;
}

static void must(MYSQL *m, const char *sql)
{
    if (mysql_query(m, sql)) {
        fprintf(stderr, "outbox_probe: %s: %s\n", sql, mysql_error(m));
        exit(2);
    }
    MYSQL_RES *r = mysql_store_result(m);
    if (r)
        mysql_free_result(r);
}

static int insert_biz(MYSQL *conn, const char *t, struct sc_outbox_error *err)
{
    char *q = sc_outbox_quote(conn, t);
    char sql[300];
    snprintf(sql, sizeof sql, "INSERT INTO probe_biz (tag) VALUES (%s)", q);
    free(q);
    return sc_outbox_exec(conn, sql, err);
}

static void *blocked_update(void *arg)
{
    (void)arg;
    mysql_query(other, "UPDATE probe_lock SET v = v + 1 WHERE id = 1"); /* waits for the business */
    MYSQL_RES *r = mysql_store_result(other);
    if (r)
        mysql_free_result(r);
    return NULL;
}

static int business(MYSQL *conn, void *arg, struct sc_outbox_event *ev, struct sc_outbox_error *err)
{
    (void)arg;
    (void)ev;
    if (insert_biz(conn, tag, err))
        return -1;
    if (strcmp(scenario, "ddl") == 0 || strcmp(scenario, "ddl_fail") == 0) {
        if (sc_outbox_exec(conn, "CREATE TABLE IF NOT EXISTS probe_ddl (x INT)", err))
            return -1;
        if (strcmp(scenario, "ddl_fail") == 0) {
            snprintf(err->message, sizeof err->message, "the business callback failed after DDL");
            return -1;
        }
    } else if (strcmp(scenario, "commit") == 0) {
        return sc_outbox_exec(conn, "COMMIT", err);
    } else if (strcmp(scenario, "fail") == 0) {
        return insert_biz(conn, tag, err);
    } else if (strcmp(scenario, "deadlock") == 0) {
        /* other holds row 2 and is heavier; it waits for row 1, held here */
        if (sc_outbox_exec(conn, "UPDATE probe_lock SET v = v + 1 WHERE id = 1", err))
            return -1;
        pthread_t t;
        pthread_create(&t, NULL, blocked_update, NULL);
        struct timespec ts = {0, 300 * 1000000L};
        nanosleep(&ts, NULL);
        int rc = sc_outbox_exec(conn, "UPDATE probe_lock SET v = v + 1 WHERE id = 2", err);
        pthread_join(t, NULL);
        must(other, "ROLLBACK");
        return rc;
    }
    return 0;
}

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

int main(int argc, char **argv)
{
    if (argc != 3 || !getenv("SC_TEST_MYSQL_SOCKET")) {
        fprintf(stderr, "usage: SC_TEST_MYSQL_SOCKET=... outbox_probe SCENARIO TAG\n");
        return 2;
    }
    scenario = argv[1];
    tag = argv[2];
    MYSQL *conn = connect_root();
    if (strcmp(scenario, "deadlock") == 0) {
        other = connect_root();
        must(other, "BEGIN");
        must(other, "INSERT INTO probe_heavy SELECT seq FROM seq_1_to_300");
        must(other, "UPDATE probe_lock SET v = v + 1 WHERE id = 2");
    }
    char caller[128];
    snprintf(caller, sizeof caller, "%s-caller", tag);
    struct sc_outbox_error cerr;
    if (strcmp(scenario, "open") == 0) {
        must(conn, "BEGIN");
        insert_biz(conn, caller, &cerr);
    } else if (strcmp(scenario, "autocommit0") == 0) {
        must(conn, "SET autocommit = 0");
        insert_biz(conn, caller, &cerr);
    }
    struct sc_outbox_event ev = {.aggregate_type = "PROBE", .event_type = "PROBE_EVENT",
                                 .event_version = 1, .payload_json = "{\"probe\":true}"};
    sc_outbox_new_event_id(ev.event_id);
    snprintf(ev.aggregate_id, sizeof ev.aggregate_id, "%s", tag);
    struct sc_outbox_error err;
    enum sc_outbox_outcome oc = sc_outbox_write(conn, business, NULL, &ev, &err);
    if (strcmp(scenario, "open") == 0 || strcmp(scenario, "autocommit0") == 0)
        must(conn, "ROLLBACK"); /* the caller's own decision about its transaction */
    printf("{\"outcome\":");
    json_str(sc_outbox_outcome_name(oc));
    printf(",\"code\":%u,\"message\":", err.code);
    json_str(err.message);
    printf("}\n");
    mysql_close(conn);
    if (other)
        mysql_close(other);
    return 0;
}
