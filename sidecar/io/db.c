#include "db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "url.h"

static void fill_err(struct sc_db_err *e, unsigned code, const char *state, const char *msg)
{
    e->code = code;
    snprintf(e->sqlstate, sizeof e->sqlstate, "%s", state ? state : "HY000");
    snprintf(e->msg, sizeof e->msg, "%s", msg ? msg : "");
    e->cls = sc_db_classify(code, msg);
}

void sc_db_last_error(const struct sc_db *db, struct sc_db_err *e)
{
    if (!db->conn) {
        fill_err(e, 2006, "HY000", "not connected");
        return;
    }
    fill_err(e, mysql_errno(db->conn), mysql_sqlstate(db->conn), mysql_error(db->conn));
}

void sc_db_stmt_error(MYSQL_STMT *st, struct sc_db_err *e)
{
    fill_err(e, mysql_stmt_errno(st), mysql_stmt_sqlstate(st), mysql_stmt_error(st));
}

/* rw_timeout_s bounds each read and write on the session: past it the
 * client gives up with 2013 and closes the connection. */
static int connect_one(struct sc_db *db, const struct sc_config *cfg, const char *url,
                       unsigned rw_timeout_s, struct sc_db_err *e)
{
    struct sc_mysql_url u;
    char err[256];
    memset(db, 0, sizeof *db);
    memset(e, 0, sizeof *e);
    if (sc_mysql_url_parse(url, &u, err, sizeof err)) {
        fill_err(e, 0, "HY000", err);
        e->cls = SC_DBERR_FAILURE;
        return -1;
    }
    if (!(db->conn = mysql_init(NULL))) {
        fill_err(e, 2008, "HY000", "mysql_init: out of memory");
        sc_mysql_url_free(&u);
        return -1;
    }
    /* A silent reconnect would drop the open transaction and turn autocommit
     * back on: later statements would commit on their own. */
    my_bool off = 0;
    unsigned connect_timeout = (unsigned)cfg->mysql_connect_timeout_s;
    unsigned rw_timeout = rw_timeout_s;
    mysql_options(db->conn, MYSQL_OPT_RECONNECT, &off);
    mysql_options(db->conn, MYSQL_OPT_CONNECT_TIMEOUT, &connect_timeout);
    mysql_options(db->conn, MYSQL_OPT_READ_TIMEOUT, &rw_timeout);
    mysql_options(db->conn, MYSQL_OPT_WRITE_TIMEOUT, &rw_timeout);
    mysql_options(db->conn, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    mysql_options(db->conn, MYSQL_INIT_COMMAND, "SET time_zone = '+00:00'");
    /* "localhost" in a URL means TCP to that host; a socket is asked for
     * with ?socket=PATH. */
    unsigned protocol = u.socket ? MYSQL_PROTOCOL_SOCKET : MYSQL_PROTOCOL_TCP;
    mysql_options(db->conn, MYSQL_OPT_PROTOCOL, &protocol);
    if (cfg->mysql_tls_ca) {
        /* TLS, and the server's certificate is checked against tls_ca and
         * the host name: a wrong CA or host is a refused connection. */
        my_bool verify = 1;
        mysql_options(db->conn, MYSQL_OPT_SSL_CA, cfg->mysql_tls_ca);
        if (cfg->mysql_tls_cert) {
            mysql_options(db->conn, MYSQL_OPT_SSL_CERT, cfg->mysql_tls_cert);
            mysql_options(db->conn, MYSQL_OPT_SSL_KEY, cfg->mysql_tls_key);
        }
        mysql_options(db->conn, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &verify);
    }

    if (!mysql_real_connect(db->conn, u.socket ? NULL : u.host, u.user, u.password, u.database,
                            u.port, u.socket, 0)) {
        sc_db_last_error(db, e);
        if (e->cls != SC_DBERR_CONNECTION)
            e->cls = SC_DBERR_CONNECTION; /* any failure to connect is retried */
        sc_mysql_url_free(&u);
        sc_db_close(db);
        return -1;
    }
    sc_mysql_url_free(&u);
    db->thread_id = mysql_thread_id(db->conn);

    char sql[200];
    /* lc_messages: a duplicate is recognised by the key name in the English
     * text of error 1062; a server set to another language must not turn
     * every duplicate into a failure. lock_wait_timeout bounds a wait for a
     * table's metadata lock (LOCK TABLES, DDL) as innodb_lock_wait_timeout
     * bounds a row lock's: its default is a day or a year, and the session
     * would otherwise sit until its read timeout. */
    snprintf(sql, sizeof sql, "SET SESSION innodb_lock_wait_timeout = %d, lock_wait_timeout = %d, "
             "time_zone = '+00:00', lc_messages = 'en_US'", cfg->mysql_lock_wait_timeout_s,
             cfg->mysql_lock_wait_timeout_s);
    if (sc_db_query(db, sql, e) || mysql_autocommit(db->conn, 0)) {
        if (!e->code)
            sc_db_last_error(db, e);
        sc_db_close(db);
        return -1;
    }

    return 0;
}

/* Where this thread's next connect starts: after the node it was last on. */
static _Thread_local size_t next_node;

size_t sc_db_rotation(void)
{
    return next_node;
}

void sc_db_set_rotation(size_t node)
{
    next_node = node;
}

int sc_db_connect(struct sc_db *db, const struct sc_config *cfg, struct sc_db_err *e)
{
    char *const single[1] = {cfg->mysql_url};
    char *const *urls = cfg->n_mysql_urls ? cfg->mysql_urls : single;
    size_t n = cfg->n_mysql_urls ? cfg->n_mysql_urls : 1;
    return sc_db_connect_urls(db, cfg, urls, n, e);
}

static int connect_nodes(struct sc_db *db, const struct sc_config *cfg, char *const *urls,
                         size_t n, unsigned rw_timeout_s, struct sc_db_err *e);

/* Reads may wait for a lock up to lock_wait_timeout; beyond that plus a
 * margin the server is considered gone (outcome unknown, never acked). */
static unsigned default_rw_timeout(const struct sc_config *cfg)
{
    return (unsigned)cfg->mysql_lock_wait_timeout_s + 30;
}

int sc_db_connect_urls(struct sc_db *db, const struct sc_config *cfg, char *const *urls, size_t n,
                       struct sc_db_err *e)
{
    return connect_nodes(db, cfg, urls, n, default_rw_timeout(cfg), e);
}

int sc_db_connect_tenant(struct sc_db *db, const struct sc_config *cfg, char *const *urls,
                         size_t n, struct sc_db_err *e)
{
    /* Shorter than mysql.url's: a tenant silent on an open session holds
     * every other tenant of its worker (and the worker's heartbeats) for
     * as long as one read waits. The config refuses a value that would cut
     * a lock wait short. */
    unsigned rw = cfg->tenants.read_timeout_s > 0 ? (unsigned)cfg->tenants.read_timeout_s
                                                  : default_rw_timeout(cfg);
    return connect_nodes(db, cfg, urls, n, rw, e);
}

static int connect_nodes(struct sc_db *db, const struct sc_config *cfg, char *const *urls,
                         size_t n, unsigned rw_timeout_s, struct sc_db_err *e)
{
    size_t start = next_node; /* next_node moves below: each node once */
    for (size_t k = 0; k < n; k++) {
        size_t i = (start + k) % n;
        char where[300];
        sc_url_endpoint(urls[i], where, sizeof where);
        if (connect_one(db, cfg, urls[i], rw_timeout_s, e) == 0) {
            next_node = i + 1;
            db->node = (int)i;
            db->cfg = cfg;
            snprintf(db->endpoint, sizeof db->endpoint, "%s", where);
            sc_metrics_endpoint(NULL, "mysql", (int)i, where);
            if (n > 1)
                sc_info("mysql: connected to node %zu of %zu (%s), thread %lu", i, n, where,
                        db->thread_id);
            return 0;
        }
        if (e->code == 0 && e->cls == SC_DBERR_FAILURE)
            return -1; /* a URL that cannot parse: no point in going on */
        if (n > 1 && k + 1 < n)
            sc_warn("mysql: node %zu (%s): error %u: %s; trying the next node", i, where, e->code,
                    e->msg);
        next_node = i + 1;
    }
    return -1;
}

MYSQL_STMT *sc_db_prepare(struct sc_db *db, const char *sql, struct sc_db_err *e)
{
    if (db->n_stmts == SC_DB_MAX_STMTS) {
        fill_err(e, 2008, "HY000", "too many prepared statements");
        return NULL;
    }
    MYSQL_STMT *st = mysql_stmt_init(db->conn);
    if (!st) {
        sc_db_last_error(db, e);
        return NULL;
    }
    if (mysql_stmt_prepare(st, sql, strlen(sql))) {
        sc_db_stmt_error(st, e);
        mysql_stmt_close(st);
        return NULL;
    }
    db->stmts[db->n_stmts++] = st;
    return st;
}

int sc_db_prepare_consumer(struct sc_db *db, struct sc_db_err *e)
{
    db->insert_consumed = sc_db_prepare(db,
        "INSERT INTO consumed_event (consumer_name, event_id, consumed_at) "
        "VALUES (?, ?, UTC_TIMESTAMP(6))", e);
    return db->insert_consumed ? 0 : -1;
}

void sc_db_close(struct sc_db *db)
{
    for (int i = 0; i < db->n_stmts; i++)
        mysql_stmt_close(db->stmts[i]);
    if (db->conn)
        mysql_close(db->conn);
    memset(db, 0, sizeof *db);
}

int sc_db_connected(const struct sc_db *db)
{
    return db->conn != NULL;
}

int sc_db_query(struct sc_db *db, const char *sql, struct sc_db_err *e)
{
    if (mysql_real_query(db->conn, sql, strlen(sql))) {
        sc_db_last_error(db, e);
        return -1;
    }
    MYSQL_RES *r = mysql_store_result(db->conn);
    if (r)
        mysql_free_result(r);
    else if (mysql_field_count(db->conn) != 0) {
        sc_db_last_error(db, e);
        return -1;
    }
    return 0;
}

MYSQL_RES *sc_db_select(struct sc_db *db, const char *sql, struct sc_db_err *e)
{
    MYSQL_RES *r = NULL;
    if (mysql_real_query(db->conn, sql, strlen(sql)) == 0)
        r = mysql_store_result(db->conn);
    if (!r)
        sc_db_last_error(db, e);
    return r;
}

int sc_db_commit(struct sc_db *db, struct sc_db_err *e)
{
    if (mysql_commit(db->conn)) {
        sc_db_last_error(db, e);
        return -1;
    }
    return 0;
}

int sc_db_rollback(struct sc_db *db, struct sc_db_err *e)
{
    if (mysql_rollback(db->conn)) {
        sc_db_last_error(db, e);
        return -1;
    }
    return 0;
}

int sc_db_insert_consumed(struct sc_db *db, const char *consumer, const char *event_id,
                          struct sc_db_err *e)
{
    MYSQL_BIND b[2];
    unsigned long lens[2] = {strlen(consumer), strlen(event_id)};
    memset(b, 0, sizeof b);
    b[0].buffer_type = MYSQL_TYPE_STRING;
    b[0].buffer = (void *)consumer;
    b[0].buffer_length = lens[0];
    b[0].length = &lens[0];
    b[1].buffer_type = MYSQL_TYPE_STRING;
    b[1].buffer = (void *)event_id;
    b[1].buffer_length = lens[1];
    b[1].length = &lens[1];
    if (mysql_stmt_bind_param(db->insert_consumed, b) || mysql_stmt_execute(db->insert_consumed)) {
        sc_db_stmt_error(db->insert_consumed, e);
        return -1;
    }
    return 0;
}

/* Builds "<head><row>, <row>..." or "<head>'a', 'b'...)" for the many-row
 * statements; ids are validated UUIDs, the consumer name is escaped. */
enum many { MANY_INSERT, MANY_DELETE, MANY_COUNT };

static int run_many(struct sc_db *db, const char *consumer, const char *const *ids, int n,
                    enum many what, long *count, struct sc_db_err *e)
{
    size_t clen = strlen(consumer);
    char *quoted = malloc(clen * 2 + 1);
    size_t row = clen * 2 + 36 + 40, len = 160 + clen * 2 + (size_t)n * row;
    char *sql = quoted ? malloc(len) : NULL;
    if (!sql) {
        free(quoted);
        snprintf(e->msg, sizeof e->msg, "out of memory");
        e->code = 2008;
        e->cls = SC_DBERR_FAILURE;
        return -1;
    }
    mysql_real_escape_string(db->conn, quoted, consumer, (unsigned long)clen);
    size_t off;
    if (what == MANY_INSERT) {
        off = (size_t)snprintf(sql, len,
            "INSERT INTO consumed_event (consumer_name, event_id, consumed_at) VALUES ");
        for (int i = 0; i < n; i++)
            off += (size_t)snprintf(sql + off, len - off, "%s('%s', '%s', UTC_TIMESTAMP(6))",
                                    i ? ", " : "", quoted, ids[i]);
    } else {
        off = (size_t)snprintf(sql, len, "%s FROM consumed_event WHERE consumer_name = '%s' AND "
                               "event_id IN (", what == MANY_DELETE ? "DELETE" : "SELECT COUNT(*)",
                               quoted);
        for (int i = 0; i < n; i++)
            off += (size_t)snprintf(sql + off, len - off, "%s'%s'", i ? ", " : "", ids[i]);
        snprintf(sql + off, len - off, ")");
    }
    int rc;
    if (what != MANY_COUNT) {
        rc = sc_db_query(db, sql, e);
    } else {
        MYSQL_RES *res = sc_db_select(db, sql, e);
        MYSQL_ROW r = res ? mysql_fetch_row(res) : NULL;
        rc = r && r[0] ? 0 : -1;
        if (rc == 0)
            *count = strtol(r[0], NULL, 10);
        else if (res)
            sc_db_last_error(db, e);
        if (res)
            mysql_free_result(res);
    }
    free(sql);
    free(quoted);
    return rc;
}

int sc_db_insert_consumed_many(struct sc_db *db, const char *consumer, const char *const *ids,
                               int n, struct sc_db_err *e)
{
    return run_many(db, consumer, ids, n, MANY_INSERT, NULL, e);
}

int sc_db_delete_consumed_many(struct sc_db *db, const char *consumer, const char *const *ids,
                               int n, struct sc_db_err *e)
{
    return n > 0 ? run_many(db, consumer, ids, n, MANY_DELETE, NULL, e) : 0;
}

int sc_db_count_consumed_many(struct sc_db *db, const char *consumer, const char *const *ids,
                              int n, long *count, struct sc_db_err *e)
{
    *count = 0;
    return n > 0 ? run_many(db, consumer, ids, n, MANY_COUNT, count, e) : 0;
}

int sc_db_in_transaction(const struct sc_db *db)
{
    unsigned status = db->conn->server_status;
    return (status & SERVER_STATUS_IN_TRANS) && !(status & SERVER_STATUS_AUTOCOMMIT);
}
