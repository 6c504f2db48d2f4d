/* A handler for the integration tests, steered by the event type:
 *   FLAKY         RETRY on the first two calls for an event id, then the effect
 *   ALWAYS_RETRY  RETRY every time (exhausts max_attempts)
 *   POISON        REJECT
 *   COMMITTER     runs COMMIT itself (a contract violation the sidecar catches)
 *   COMMIT_MORE   the effect, COMMIT, then a read that opens a new transaction:
 *                 the server says "in a transaction" again afterwards
 *   ROLLBACKER    the effect, then ROLLBACK, and answers OK
 *   SWALLOW_LOCK  locks t_locks rows 1 then 2; on any error returns OK with no
 *                 effect (swallows a deadlock that rolled the transaction back)
 *   AUTOCOMMIT_ON runs SET autocommit=1 (a contract violation), then the effect
 *   LOCK_WAIT     locks t_locks row 3 (held by the test): RETRY on a lock wait
 *   KEEP...       (any type starting so) a t_event_seen row of exactly what the
 *                 handler was given: every attribute, data_json and data_bytes
 *                 byte for byte, datacontenttype and original_id
 *   KEEP_BLOCKED...  RETRY while the file $SC_TEST_BLOCK_FILE exists, then KEEP
 *   KEEP_FLAKY<n>...  RETRY on the first n calls for an event id, then KEEP
 *   ORDERED       a t_order_seen row (subject, eventversion) whose AUTO_INCREMENT
 *                 number tells the order the effects were applied in
 *   ORDERED_BLOCKED  RETRY while the file $SC_TEST_BLOCK_FILE exists, then ORDERED
 *   CRASH         ends the process at once (exit 86), mid-batch, nothing committed
 *   anything else the sample effect: a notification_job row */
#include <mysql.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sidecar/handler.h"

#define MAX_TRACKED 4096

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char seen_ids[MAX_TRACKED][37];
static int seen_calls[MAX_TRACKED];
static int n_seen;

static int calls_for(const char *id)
{
    pthread_mutex_lock(&lock);
    int i;
    for (i = 0; i < n_seen && strcmp(seen_ids[i], id) != 0; i++)
        ;
    if (i == n_seen && n_seen < MAX_TRACKED)
        snprintf(seen_ids[n_seen++], 37, "%s", id);
    int calls = i < MAX_TRACKED ? ++seen_calls[i] : 1;
    pthread_mutex_unlock(&lock);
    return calls;
}

static sc_handler_status effect(struct st_mysql *conn, const struct sc_event *ev, char *reason,
                                size_t len)
{
    char sql[300];
    snprintf(sql, sizeof sql,
             "INSERT INTO notification_job (event_id, order_id, source_version, status, created_at) "
             "VALUES ('%s', %lld, %lld, 'PENDING', UTC_TIMESTAMP(6))",
             ev->id, ev->subject ? atoll(ev->subject) : 0LL, (long long)ev->eventversion);
    if (mysql_real_query(conn, sql, strlen(sql))) {
        snprintf(reason, len, "error %u: %s", mysql_errno(conn), mysql_error(conn));
        return SC_HANDLER_RETRY;
    }
    return SC_HANDLER_OK;
}

/* One row of t_event_seen with the event as the handler sees it (no unique
 * key: a second effect would show as a second row), the fields appended
 * behind struct_size included. */
static sc_handler_status keep(struct st_mysql *conn, const struct sc_event *ev, char *reason,
                              size_t len)
{
    static const char sql[] = "INSERT INTO t_event_seen (event_id, type, source, subject, time, "
                              "eventversion, data, data_bytes, datacontenttype, original_id) "
                              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
    MYSQL_STMT *st = mysql_stmt_init(conn);
    MYSQL_BIND b[10];
    memset(b, 0, sizeof b);
    int appended = SC_EVENT_HAS(ev, original_id);
    const char *text[] = {ev->id, ev->type, ev->source, ev->subject, ev->time};
    unsigned long lens[10];
    for (int i = 0; i < 5; i++) {
        lens[i] = text[i] ? strlen(text[i]) : 0;
        b[i].buffer_type = text[i] ? MYSQL_TYPE_STRING : MYSQL_TYPE_NULL;
        b[i].buffer = (void *)text[i];
        b[i].length = &lens[i];
    }
    long long version = ev->eventversion;
    b[5].buffer_type = ev->has_eventversion ? MYSQL_TYPE_LONGLONG : MYSQL_TYPE_NULL;
    b[5].buffer = &version;
    const void *blob[] = {ev->data_json, appended ? ev->data_bytes : NULL};
    size_t blob_len[] = {ev->data_json_len, appended ? ev->data_bytes_len : 0};
    for (int i = 0; i < 2; i++) {
        lens[6 + i] = blob[i] ? (unsigned long)blob_len[i] : 0;
        b[6 + i].buffer_type = blob[i] ? MYSQL_TYPE_BLOB : MYSQL_TYPE_NULL;
        b[6 + i].buffer = (void *)blob[i];
        b[6 + i].length = &lens[6 + i];
    }
    const char *more[] = {appended ? ev->datacontenttype : NULL, appended ? ev->original_id : NULL};
    for (int i = 0; i < 2; i++) {
        lens[8 + i] = more[i] ? strlen(more[i]) : 0;
        b[8 + i].buffer_type = more[i] ? MYSQL_TYPE_STRING : MYSQL_TYPE_NULL;
        b[8 + i].buffer = (void *)more[i];
        b[8 + i].length = &lens[8 + i];
    }
    int failed = !st || mysql_stmt_prepare(st, sql, sizeof sql - 1) || mysql_stmt_bind_param(st, b) ||
                 mysql_stmt_execute(st);
    if (failed)
        snprintf(reason, len, "keep: error %u: %s", st ? mysql_stmt_errno(st) : 0,
                 st ? mysql_stmt_error(st) : "out of memory");
    if (st)
        mysql_stmt_close(st);
    return failed ? SC_HANDLER_RETRY : SC_HANDLER_OK;
}

/* One t_order_seen row: (event_id, subject, eventversion) in apply order. */
static sc_handler_status ordered(struct st_mysql *conn, const struct sc_event *ev, char *reason,
                                 size_t len)
{
    char sql[400];
    snprintf(sql, sizeof sql, "INSERT INTO t_order_seen (event_id, subject, version) VALUES "
             "('%s', '%.100s', %lld)", ev->id, ev->subject ? ev->subject : "",
             (long long)ev->eventversion);
    if (mysql_real_query(conn, sql, strlen(sql))) {
        snprintf(reason, len, "ordered: error %u: %s", mysql_errno(conn), mysql_error(conn));
        return SC_HANDLER_RETRY;
    }
    return SC_HANDLER_OK;
}

static sc_handler_status handle(void *state, struct st_mysql *conn, const struct sc_event *ev,
                                char *reason, size_t len)
{
    (void)state;
    int calls = calls_for(ev->id);
    if (strcmp(ev->type, "ORDERED_BLOCKED") == 0) {
        const char *block = getenv("SC_TEST_BLOCK_FILE");
        if (block && access(block, F_OK) == 0) {
            snprintf(reason, len, "blocked while %s exists (call %d)", block, calls);
            return SC_HANDLER_RETRY;
        }
        return ordered(conn, ev, reason, len);
    }
    if (strcmp(ev->type, "ORDERED") == 0)
        return ordered(conn, ev, reason, len);
    if (strncmp(ev->type, "KEEP_BLOCKED", 12) == 0) {
        const char *block = getenv("SC_TEST_BLOCK_FILE");
        if (block && access(block, F_OK) == 0) {
            snprintf(reason, len, "blocked while %s exists (call %d)", block, calls);
            return SC_HANDLER_RETRY;
        }
    }
    if (strncmp(ev->type, "KEEP_FLAKY", 10) == 0 && calls <= atoi(ev->type + 10)) {
        snprintf(reason, len, "flaky call %d", calls);
        return SC_HANDLER_RETRY;
    }
    if (strncmp(ev->type, "KEEP", 4) == 0)
        return keep(conn, ev, reason, len);
    if (strcmp(ev->type, "FLAKY") == 0 && calls <= 2) {
        snprintf(reason, len, "flaky call %d", calls);
        return SC_HANDLER_RETRY;
    }
    if (strcmp(ev->type, "ALWAYS_RETRY") == 0) {
        snprintf(reason, len, "always retry, call %d", calls);
        return SC_HANDLER_RETRY;
    }
    if (strcmp(ev->type, "KILL_SESSION") == 0) {
        /* A statement the server ends the session for, every time. */
        char sql[64];
        snprintf(sql, sizeof sql, "KILL CONNECTION %lu", mysql_thread_id(conn));
        mysql_real_query(conn, sql, strlen(sql));
        snprintf(reason, len, "killed its own session (call %d): error %u: %s", calls,
                 mysql_errno(conn), mysql_error(conn));
        return SC_HANDLER_RETRY;
    }
    if (strcmp(ev->type, "CRASH") == 0)
        _exit(86); /* a poison that takes the process down, like a crash */
    if (strcmp(ev->type, "POISON") == 0) {
        snprintf(reason, len, "poison event");
        return SC_HANDLER_REJECT;
    }
    if (strcmp(ev->type, "LOCK_AB") == 0 || strcmp(ev->type, "LOCK_BA") == 0) {
        /* Takes two row locks in opposite orders on two workers: InnoDB
         * picks a deadlock victim, whose whole transaction is rolled back. */
        int ab = ev->type[5] == 'A';
        char sql[128];
        for (int step = 0; step < 2; step++) {
            snprintf(sql, sizeof sql, "SELECT id FROM t_locks WHERE id = %d FOR UPDATE",
                     (step == 0) == ab ? 1 : 2);
            if (mysql_real_query(conn, sql, strlen(sql))) {
                snprintf(reason, len, "lock: error %u: %s", mysql_errno(conn), mysql_error(conn));
                return SC_HANDLER_RETRY;
            }
            MYSQL_RES *r = mysql_store_result(conn);
            if (r)
                mysql_free_result(r);
            if (step == 0 && calls == 1)
                mysql_real_query(conn, "DO SLEEP(0.5)", 13);
        }
        return effect(conn, ev, reason, len);
    }
    if (strcmp(ev->type, "SWALLOW_LOCK") == 0) {
        const char *const locks[] = {"SELECT id FROM t_locks WHERE id = 1 FOR UPDATE",
                                     "SELECT id FROM t_locks WHERE id = 2 FOR UPDATE"};
        for (int step = 0; step < 2; step++) {
            if (mysql_real_query(conn, locks[step], strlen(locks[step])))
                return SC_HANDLER_OK; /* the bug under test: the error is ignored */
            MYSQL_RES *r = mysql_store_result(conn);
            if (r)
                mysql_free_result(r);
        }
        return effect(conn, ev, reason, len);
    }
    if (strcmp(ev->type, "AUTOCOMMIT_ON") == 0) {
        mysql_real_query(conn, "SET autocommit = 1", 18);
        return effect(conn, ev, reason, len);
    }
    if (strcmp(ev->type, "LOCK_WAIT") == 0) {
        const char *sql = "SELECT id FROM t_locks WHERE id = 3 FOR UPDATE";
        if (mysql_real_query(conn, sql, strlen(sql))) {
            snprintf(reason, len, "lock wait: error %u: %s", mysql_errno(conn), mysql_error(conn));
            return SC_HANDLER_RETRY;
        }
        MYSQL_RES *r = mysql_store_result(conn);
        if (r)
            mysql_free_result(r);
        return effect(conn, ev, reason, len);
    }
    if (strcmp(ev->type, "COMMIT_MORE") == 0) {
        sc_handler_status st = effect(conn, ev, reason, len);
        mysql_commit(conn);
        const char *read = "SELECT COUNT(*) FROM notification_job";
        if (mysql_real_query(conn, read, strlen(read)) == 0) {
            MYSQL_RES *r = mysql_store_result(conn);
            if (r)
                mysql_free_result(r);
        }
        return st;
    }
    if (strcmp(ev->type, "ROLLBACKER") == 0) {
        effect(conn, ev, reason, len);
        mysql_rollback(conn);
        return SC_HANDLER_OK;
    }
    if (strcmp(ev->type, "COMMITTER") == 0) {
        sc_handler_status st = effect(conn, ev, reason, len);
        mysql_commit(conn);
        return st;
    }
    return effect(conn, ev, reason, len);
}

static const struct sc_handler_v1 test_handler = {
    .abi_version = SC_HANDLER_ABI_VERSION,
    .struct_size = sizeof(struct sc_handler_v1),
    .name = "test_handler",
    .handle = handle,
};

__attribute__((visibility("default"))) const struct sc_handler_v1 *sc_handler_v1(void)
{
    return &test_handler;
}
