/* The server settings the guarantees depend on: binary log format,
 * isolation level, the flush settings that make a COMMIT durable, and for
 * Galera whether wsrep is on, the node is in the primary component and a
 * minority may commit. Read per connection, since cluster nodes can differ. */
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
    int flush_log_at_trx_commit; /* innodb_flush_log_at_trx_commit, -1 when not read */
    long long sync_binlog;    /* -1 when not read */
    int wsrep_sync_wait;      /* reported only: it orders reads, it makes nothing durable */
    /* Galera's pc.ignore_sb and pc.ignore_quorum (a component without quorum
     * goes on committing), from two sources: wsrep_provider_options, and on
     * MariaDB 11.1+ with the provider plugin loaded its own variables
     * wsrep_provider_pc_ignore_sb / _quorum, the only ones SET changes
     * there. Either saying true makes it true: sc_db_pc_ignore_*(). */
    int opt_ignore_sb, opt_ignore_quorum, var_ignore_sb, var_ignore_quorum;
};

static inline int sc_db_pc_ignore_sb(const struct sc_db_settings *s)
{
    return s->opt_ignore_sb || s->var_ignore_sb;
}

static inline int sc_db_pc_ignore_quorum(const struct sc_db_settings *s)
{
    return s->opt_ignore_quorum || s->var_ignore_quorum;
}

/* The statement that reads the variables (transaction_isolation, and
 * tx_isolation, MariaDB 10's only name for it, which MySQL 8 removed: a name
 * SHOW does not know is simply not returned). */
extern const char sc_db_settings_sql[];

/* Takes one row of that statement (name, value) into s; s starts from
 * sc_db_settings_init. Pure: the unit tests feed it other servers' rows. */
void sc_db_settings_init(struct sc_db_settings *s);
void sc_db_settings_take(struct sc_db_settings *s, const char *name, const char *value);

/* Reads them on db (ends any transaction it opened). Returns 0, or -1 with
 * e filled. */
int sc_db_settings_read(struct sc_db *db, struct sc_db_settings *s, struct sc_db_err *e);

/* One line: "binlog_format=ROW log_bin=ON transaction_isolation=...
 * innodb_flush_log_at_trx_commit=1 sync_binlog=1 ..." (and the wsrep ones). */
void sc_db_settings_describe(const struct sc_db_settings *s, char *out, size_t len);

/* 0 when the relay is safe on a server with s; otherwise -1 and why names
 * the setting and what to set instead. */
int sc_db_settings_unsafe(const struct sc_db_settings *s, char *why, size_t len);

/* A caution worth printing that does not make the relay unsafe (one-node
 * Galera cluster, READ-UNCOMMITTED default); "" when none. */
void sc_db_settings_caution(const struct sc_db_settings *s, char *out, size_t len);

/* For a relay's connection: reads and refuses unsafe settings, those the
 * relay's claim needs and those a durable COMMIT needs (db_durability.h).
 * Returns 0, or -1 with e filled (e->cls SC_DBERR_FAILURE, or
 * SC_DBERR_NOT_DURABLE; the message names the setting). */
int sc_db_settings_check(struct sc_db *db, struct sc_db_err *e);

#endif
