/* The server settings the guarantees depend on: binary log format,
 * isolation level, and for Galera whether wsrep is on and the node is in
 * the primary component. Read per connection, since cluster nodes can
 * differ. */
#ifndef SC_DB_SETTINGS_H
#define SC_DB_SETTINGS_H

#include <stddef.h>

#include "db.h"

struct sc_db_settings {
    char binlog_format[32];   /* "" when the server has none */
    int log_bin;              /* 1 on, 0 off */
    char isolation[32];       /* this session's transaction isolation */
    int wsrep_on;             /* 1 on a Galera node with replication on */
    int cluster_size;         /* wsrep_cluster_size, 0 when not Galera */
    char cluster_status[32];  /* wsrep_cluster_status: "Primary" when writable */
};

/* Reads them on db (ends any transaction it opened). Returns 0, or -1 with
 * e filled. */
int sc_db_settings_read(struct sc_db *db, struct sc_db_settings *s, struct sc_db_err *e);

/* One line: "binlog_format=ROW log_bin=ON transaction_isolation=... ". */
void sc_db_settings_describe(const struct sc_db_settings *s, char *out, size_t len);

/* 0 when the relay is safe on a server with s; otherwise -1 and why names
 * the setting and what to set instead. */
int sc_db_settings_unsafe(const struct sc_db_settings *s, char *why, size_t len);

/* A caution worth printing that does not make the relay unsafe (one-node
 * Galera cluster, READ-UNCOMMITTED default); "" when none. */
void sc_db_settings_caution(const struct sc_db_settings *s, char *out, size_t len);

/* For a relay's connection: reads and refuses unsafe settings. Returns 0,
 * or -1 with e filled (e->cls SC_DBERR_FAILURE, the message names the
 * setting). */
int sc_db_settings_check(struct sc_db *db, struct sc_db_err *e);

#endif
