/* The live schema against what this version needs: every table, column,
 * constraint and index the consumer and the relay use, each named with the
 * migration (sql/schema/NNN_*.sql) that brings it. */
#ifndef SC_SCHEMA_H
#define SC_SCHEMA_H

#include <stddef.h>

#include "io/db.h"

enum sc_schema_part {
    SC_SCHEMA_CONSUMER = 1, /* consumed_event and its identity constraint */
    SC_SCHEMA_RELAY = 2,    /* outbox_event, its claim indexes and statuses */
    SC_SCHEMA_RELAY_ORDER = 4, /* relay.ordering per_aggregate: ix_outbox_event_order */
    SC_SCHEMA_HOLD = 8,     /* consumer_held_key (an ordered consumer that holds keys) */
    SC_SCHEMA_RELAY_BINLOG = 16, /* relay.source binlog: relay_checkpoint */
    SC_SCHEMA_TENANT_COPY = 32, /* an ordered consumer with tenants: consumer_tenant_copy */
};

/* Checks the parts (a bitmask) on db's current database. Returns 0 when all
 * is there; 1 with what is missing and the migration to apply in why; -1
 * when the check itself failed (e filled: no privilege, connection lost). */
int sc_schema_check(struct sc_db *db, int parts, char *why, size_t why_len, struct sc_db_err *e);



struct sc_config;

/* At start-up: every node's durability settings (db_durability.h), then
 * one connection to the database; when it answers, its schema is checked.
 * Returns 0 (checked, or the database is not reachable now: the workers
 * retry as usual and the check is logged as not done), or 2 after logging
 * what is missing or not durable (the process refuses to start). */
int sc_schema_startup(const struct sc_config *cfg, int parts);

/* The relay's parts for its config (with the ordering index when asked for). */
int sc_schema_relay_parts(const struct sc_config *cfg);
#endif
