/* Whether a COMMIT on a database node survives a crash. An ack is only as
 * durable as the COMMIT before it: once the broker has forgotten the
 * message, a committed effect the server loses is lost for good. So the
 * settings that decide it are read on every node, at start and at every
 * new session, and refused unless mysql.allow_unsafe_durability says
 * otherwise. */
#ifndef SC_DB_DURABILITY_H
#define SC_DB_DURABILITY_H

#include <stddef.h>

#include "db.h"
#include "db_settings.h"

/* The settings checked, each its own bit in sc_durability.unsafe and its own
 * `setting` label. */
enum sc_dur_setting {
    SC_DUR_FLUSH_LOG,       /* innodb_flush_log_at_trx_commit */
    SC_DUR_SYNC_BINLOG,     /* sync_binlog, with the binary log on */
    SC_DUR_PC_IGNORE_SB,    /* Galera's pc.ignore_sb */
    SC_DUR_PC_IGNORE_QUORUM, /* Galera's pc.ignore_quorum */
    SC_DUR_COUNT
};

extern const char *const sc_dur_setting_names[SC_DUR_COUNT];

struct sc_durability {
    unsigned unsafe;              /* 1u << setting for each one that is not durable */
    char value[SC_DUR_COUNT][24]; /* as read ("(unknown)" when it could not be) */
};

/* Judges the settings s of one node. Pure. */
void sc_durability_eval(const struct sc_db_settings *s, struct sc_durability *d);

/* "innodb_flush_log_at_trx_commit=2 (why); sync_binlog=0 (why)": each
 * setting d finds not durable, with what it costs and what to set. */
void sc_durability_describe(const struct sc_durability *d, char *out, size_t len);

/* A new session's check, on db (connected with its config, the policy) and
 * the settings s read on it: records the finding of db's node (the gauge
 * sidecar_unsafe_durability), and returns 0 when the node is durable or
 * mysql.allow_unsafe_durability lets the session run anyway (logged at
 * warn when at_start, or when the node's finding changed). Otherwise -1
 * with e filled (class SC_DBERR_NOT_DURABLE, the message naming each
 * setting) and the refusal counted (sidecar_durability_refused_total). */
int sc_db_durability_check(struct sc_db *db, const struct sc_db_settings *s, int at_start,
                           struct sc_db_err *e);

/* Reads the settings on db and checks them as above (a consumer's session). */
int sc_db_durability_session(struct sc_db *db, struct sc_db_err *e);

/* At start-up (consume, relay): every configured node that answers is
 * checked (*reached counts them). Returns 0, or 2 after logging each node
 * and setting refused (the process refuses to start). A node that does not
 * answer now is checked when a session first reaches it. */
int sc_db_durability_startup(const struct sc_config *cfg, size_t *reached);

#endif
