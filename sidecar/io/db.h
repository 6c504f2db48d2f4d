/* MySQL/MariaDB connection wrapper: connect with safe session settings,
 * prepared statements, and error capture with classification. */
#ifndef SC_DB_H
#define SC_DB_H

#include <mysql.h>
#include <stddef.h>

#include "config.h"
#include "db_error.h"

struct sc_db_err {
    unsigned code;
    char sqlstate[6];
    char msg[512];
    enum sc_db_error_class cls;
};

#define SC_DB_MAX_STMTS 8

struct sc_db {
    MYSQL *conn;
    MYSQL_STMT *insert_consumed;   /* after sc_db_prepare_consumer */
    MYSQL_STMT *stmts[SC_DB_MAX_STMTS]; /* every prepared statement, closed with the connection */
    int n_stmts;
    unsigned long thread_id;
    int node;                      /* index in cfg->mysql_urls of the server */
    char endpoint[300];            /* its host:port, for logs and metrics */
    const struct sc_config *cfg;   /* what it was connected with (the durability
                                      policy of its sessions) */
};

/* Connects (autocommit off, session time zone UTC, bounded lock waits, no
 * silent reconnect). With several mysql.url nodes it tries each once, in
 * turn, starting after the node this thread was last connected to (so a
 * reconnect after a failure goes to the next node). Returns 0, or -1 with e
 * filled (the last node's error). */
int sc_db_connect(struct sc_db *db, const struct sc_config *cfg, struct sc_db_err *e);

/* The same with the nodes urls[0..n) instead of mysql.url (a tenant's
 * database: tenants.database_url with the tenant's name in it). */
int sc_db_connect_urls(struct sc_db *db, const struct sc_config *cfg, char *const *urls, size_t n,
                       struct sc_db_err *e);

/* The same for a tenant's session of consume or relay: its reads and
 * writes time out after tenants.read_timeout_s instead of
 * mysql.lock_wait_timeout_s + 30 (the tools keep the longer bound: a
 * migration's DDL may run long). */
int sc_db_connect_tenant(struct sc_db *db, const struct sc_config *cfg, char *const *urls,
                         size_t n, struct sc_db_err *e);

/* Where this thread's next sc_db_connect starts, and setting it back: a
 * probe connection (the start-up schema check) must not move the node the
 * daemon's own first connect tries. */
size_t sc_db_rotation(void);
void sc_db_set_rotation(size_t node);

/* Prepares sql on the connection; the statement lives until sc_db_close.
 * Returns NULL with e filled on failure. */
MYSQL_STMT *sc_db_prepare(struct sc_db *db, const char *sql, struct sc_db_err *e);

/* Prepares the consumer's INSERT into consumed_event. */
int sc_db_prepare_consumer(struct sc_db *db, struct sc_db_err *e);

/* Fills e from a statement's last error. */
void sc_db_stmt_error(MYSQL_STMT *st, struct sc_db_err *e);
void sc_db_close(struct sc_db *db);
int sc_db_connected(const struct sc_db *db);

/* Each returns 0, or -1 with e filled and classified. */
int sc_db_query(struct sc_db *db, const char *sql, struct sc_db_err *e);

/* Runs a statement that returns rows and stores them: the result (free it
 * with mysql_free_result), or NULL with e filled. */
MYSQL_RES *sc_db_select(struct sc_db *db, const char *sql, struct sc_db_err *e);
int sc_db_commit(struct sc_db *db, struct sc_db_err *e);
int sc_db_rollback(struct sc_db *db, struct sc_db_err *e);

/* INSERT consumed_event(consumer_name, event_id, consumed_at = now, UTC). A
 * duplicate shows as e->cls == SC_DBERR_DUPLICATE. */
int sc_db_insert_consumed(struct sc_db *db, const char *consumer, const char *event_id,
                          struct sc_db_err *e);

/* One multi-row INSERT of n claims for consumer (ids are validated UUIDs).
 * All or nothing: on any error, 1062 included, no row was inserted. */
int sc_db_insert_consumed_many(struct sc_db *db, const char *consumer, const char *const *ids,
                               int n, struct sc_db_err *e);

/* DELETE the claims of ids for consumer, in one statement (inside the
 * batch's transaction: undoes claims of events a batch handler refused). */
int sc_db_delete_consumed_many(struct sc_db *db, const char *consumer, const char *const *ids,
                               int n, struct sc_db_err *e);

/* SELECT COUNT(*) of the claims of ids for consumer, in one statement on the
 * connection (so inside its open transaction). */
int sc_db_count_consumed_many(struct sc_db *db, const char *consumer, const char *const *ids,
                              int n, long *count, struct sc_db_err *e);

/* 1 while the server reports an open transaction and autocommit off. */
int sc_db_in_transaction(const struct sc_db *db);

/* Fills e from the connection's last error (for the handler's statements). */
void sc_db_last_error(const struct sc_db *db, struct sc_db_err *e);

#endif
