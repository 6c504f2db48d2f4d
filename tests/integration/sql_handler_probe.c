/* sql.so against the real server, driven directly (no consumer): what the
 * connection tells the sidecar after handle() returns.
 *
 *   1. a deadlock (1213) and a lock wait timeout (1205) in a statement are
 *      RETRY, and mysql_errno/mysql_sqlstate on the connection still name
 *      them afterwards (the sidecar reads them to tell a transaction the
 *      server rolled back from a statement it undid);
 *   2. a CALL whose procedure returns result sets leaves the connection in
 *      sync: several events in a row, and the sidecar's own next statement,
 *      all succeed; an error the procedure raises after a result set is a
 *      REJECT naming it, and the connection stays usable.
 *
 * Usage: sql_handler_probe SQL_SO. Connects as root through
 * SC_TEST_MYSQL_SOCKET to the database app (tests/servers). TAP output. */
#include <dlfcn.h>
#include <mysql.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sidecar/handler.h"
#include "tests/unit/tap.h"

static const char *sock;

static MYSQL *connect_root(void)
{
    MYSQL *m = mysql_init(NULL);
    if (!m || !mysql_real_connect(m, NULL, "root", NULL, "app", 0, sock, 0)) {
        printf("Bail out! cannot connect through %s: %s\n", sock, m ? mysql_error(m) : "oom");
        exit(1);
    }
    return m;
}

static int q(MYSQL *m, const char *sql)
{
    if (mysql_query(m, sql)) {
        printf("# %s: error %u: %s\n", sql, mysql_errno(m), mysql_error(m));
        return -1;
    }
    MYSQL_RES *r = mysql_store_result(m);
    if (r)
        mysql_free_result(r);
    return 0;
}

static long long scalar(MYSQL *m, const char *sql)
{
    long long v = -1;
    if (mysql_query(m, sql) == 0) {
        MYSQL_RES *r = mysql_store_result(m);
        MYSQL_ROW row = r ? mysql_fetch_row(r) : NULL;
        if (row && row[0])
            v = atoll(row[0]);
        if (r)
            mysql_free_result(r);
    }
    return v;
}

static void must(MYSQL *m, const char *sql)
{
    if (q(m, sql)) {
        printf("Bail out! setup failed\n");
        exit(1);
    }
}

struct blocker {
    MYSQL *m;
    const char *sql;
    unsigned err;
};

static void *run_blocked(void *arg)
{
    struct blocker *b = arg;
    b->err = mysql_query(b->m, b->sql) ? mysql_errno(b->m) : 0;
    MYSQL_RES *r = mysql_store_result(b->m);
    if (r)
        mysql_free_result(r);
    return NULL;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static const struct sc_handler_v1 *h;

static void *load(const char *path, const char *config)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    const struct sc_handler_v1 *(*get)(void) = NULL;
    if (lib)
        *(void **)&get = dlsym(lib, SC_HANDLER_SYMBOL);
    if (!get) {
        printf("Bail out! cannot load %s: %s\n", path, dlerror());
        exit(1);
    }
    h = get();
    void *state = NULL;
    char err[512];
    if (h->init(config, &state, err, sizeof err)) {
        printf("Bail out! init: %s\n", err);
        exit(1);
    }
    return state;
}

static struct sc_event event(const char *id, const char *type, const char *subject)
{
    struct sc_event ev = {.id = id, .type = type, .source = "PROBE", .subject = subject,
                          .data_json = "{}", .data_json_len = 2};
    return ev;
}

int main(int argc, char **argv)
{
    if (argc != 2 || !(sock = getenv("SC_TEST_MYSQL_SOCKET"))) {
        printf("Bail out! usage: SC_TEST_MYSQL_SOCKET=... %s SQL_SO\n", argv[0]);
        return 1;
    }
    MYSQL *setup = connect_root();
    must(setup, "DROP TABLE IF EXISTS probe_lock");
    must(setup, "DROP TABLE IF EXISTS probe_heavy");
    must(setup, "DROP TABLE IF EXISTS probe_call");
    must(setup, "DROP PROCEDURE IF EXISTS probe_call_rows");
    must(setup, "DROP PROCEDURE IF EXISTS probe_call_fails");
    must(setup, "CREATE TABLE probe_lock (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB");
    must(setup, "INSERT INTO probe_lock VALUES (1, 0), (2, 0)");
    must(setup, "CREATE TABLE probe_heavy (id INT PRIMARY KEY) ENGINE=InnoDB");
    must(setup, "CREATE TABLE probe_call (event_id CHAR(36) PRIMARY KEY, n INT NOT NULL) "
                "ENGINE=InnoDB");
    /* Two result sets, then the status: the shape that left results unread. */
    must(setup, "CREATE PROCEDURE probe_call_rows(IN eid CHAR(36)) BEGIN "
                "INSERT INTO probe_call VALUES (eid, 1); "
                "SELECT event_id FROM probe_call WHERE event_id = eid; "
                "SELECT COUNT(*) AS n FROM probe_call; END");
    must(setup, "CREATE PROCEDURE probe_call_fails(IN eid CHAR(36)) BEGIN "
                "SELECT eid; "
                "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the procedure'; END");

    void *state = load(argv[1],
        "{\"events\":{"
        "\"BUMP\":[{\"sql\":\"UPDATE probe_lock SET v = v + 1 WHERE id = ?\","
        "\"params\":[\"subject:int\"]}],"
        "\"CALL\":[{\"sql\":\"CALL probe_call_rows(?)\",\"params\":[\"id\"]},"
        "{\"sql\":\"UPDATE probe_call SET n = n + 1 WHERE event_id = ?\",\"params\":[\"id\"]}],"
        "\"CALL_FAILS\":[{\"sql\":\"CALL probe_call_fails(?)\",\"params\":[\"id\"]}]}}");
    char reason[600];

    /* ---- 1205: the lock wait timeout stays readable ---- */
    MYSQL *hc = connect_root(); /* the handler's connection, as the worker's */
    MYSQL *other = connect_root();
    must(hc, "SET SESSION innodb_lock_wait_timeout = 1");
    must(other, "BEGIN");
    must(other, "UPDATE probe_lock SET v = v + 1 WHERE id = 1");
    must(hc, "BEGIN");
    struct sc_event ev = event("00000000-0000-4000-8000-000000000001", "BUMP", "1");
    reason[0] = 0;
    sc_handler_status st = h->handle(state, hc, &ev, reason, sizeof reason);
    is_int(st, SC_HANDLER_RETRY, "a lock wait timeout is RETRY (%s)", reason);
    is_int(mysql_errno(hc), 1205, "after handle() returns, mysql_errno(conn) is 1205");
    is_str(mysql_sqlstate(hc), "HY000", "and mysql_sqlstate(conn) is HY000");
    ok(strstr(mysql_error(hc), "Lock wait timeout") != NULL,
       "and mysql_error(conn) is the lock wait message (%s)", mysql_error(hc));
    must(other, "ROLLBACK");
    must(hc, "ROLLBACK");
    /* The statements are prepared again after a RETRY: the next event works. */
    must(hc, "BEGIN");
    reason[0] = 0;
    st = h->handle(state, hc, &ev, reason, sizeof reason);
    is_int(st, SC_HANDLER_OK, "the next event on the same connection applies (%s)", reason);
    must(hc, "ROLLBACK");

    /* ---- 1213: the deadlock stays readable ---- */
    /* other holds row 2 and is the heavier transaction (InnoDB rolls back
     * the lighter one), then waits for row 1, held by the handler's
     * transaction; the handler's statement then asks for row 2. */
    must(other, "BEGIN");
    must(other, "INSERT INTO probe_heavy SELECT seq FROM seq_1_to_200");
    must(other, "UPDATE probe_lock SET v = v + 1 WHERE id = 2");
    must(hc, "SET SESSION innodb_lock_wait_timeout = 30");
    must(hc, "BEGIN");
    must(hc, "UPDATE probe_lock SET v = v + 1 WHERE id = 1");
    struct blocker b = {other, "UPDATE probe_lock SET v = v + 1 WHERE id = 1", 0};
    pthread_t t;
    pthread_create(&t, NULL, run_blocked, &b);
    sleep_ms(300); /* other is waiting for row 1 */
    ev = event("00000000-0000-4000-8000-000000000002", "BUMP", "2");
    reason[0] = 0;
    st = h->handle(state, hc, &ev, reason, sizeof reason);
    unsigned code = mysql_errno(hc);
    char sqlstate[6];
    snprintf(sqlstate, sizeof sqlstate, "%s", mysql_sqlstate(hc));
    pthread_join(t, NULL);
    is_int(st, SC_HANDLER_RETRY, "a deadlock is RETRY (%s)", reason);
    is_int(code, 1213, "after handle() returns, mysql_errno(conn) is 1213");
    is_str(sqlstate, "40001", "and mysql_sqlstate(conn) is 40001");
    is_int(b.err, 0, "the other transaction went on (it was not the victim)");
    q(other, "ROLLBACK");
    q(hc, "ROLLBACK");

    /* ---- CALL: results drained, connection in sync ---- */
    must(hc, "BEGIN");
    int applied = 0, in_sync = 0;
    for (int i = 0; i < 5; i++) {
        char id[37];
        snprintf(id, sizeof id, "00000000-0000-4000-8000-0000000001%02d", i);
        ev = event(id, "CALL", NULL);
        reason[0] = 0;
        st = h->handle(state, hc, &ev, reason, sizeof reason);
        if (st == SC_HANDLER_OK)
            applied++;
        else
            printf("# event %d: status %d: %s\n", i, st, reason);
        /* what the sidecar runs next on this connection (a claim, a savepoint) */
        if (q(hc, "SAVEPOINT probe_next") == 0)
            in_sync++;
    }
    is_int(applied, 5, "five events in a row through a CALL that returns two result sets: all OK");
    is_int(in_sync, 5, "after each, the connection takes the next statement (no 2014)");
    is_int(scalar(hc, "SELECT COUNT(*) FROM probe_call WHERE n = 2"), 5,
           "each event's CALL and the statement after it took effect");
    ev = event("00000000-0000-4000-8000-000000000200", "CALL_FAILS", NULL);
    reason[0] = 0;
    st = h->handle(state, hc, &ev, reason, sizeof reason);
    ok(st == SC_HANDLER_REJECT && strstr(reason, "refused by the procedure") &&
           strstr(reason, "45000"),
       "an error the procedure raises after a result set is a REJECT naming it (%s)", reason);
    is_int(scalar(hc, "SELECT 7"), 7, "and the connection is still in sync");
    must(hc, "ROLLBACK");

    h->shutdown(state);
    mysql_close(hc);
    mysql_close(other);
    must(setup, "DROP TABLE probe_lock");
    must(setup, "DROP TABLE probe_heavy");
    must(setup, "DROP TABLE probe_call");
    must(setup, "DROP PROCEDURE probe_call_rows");
    must(setup, "DROP PROCEDURE probe_call_fails");
    mysql_close(setup);
    return done();
}
