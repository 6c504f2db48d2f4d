/* Operator commands: inspect an event, purge old bookkeeping, handle the
 * dead-letter queues. Each takes the arguments after `-c FILE` and returns
 * the exit status. */
#ifndef SC_ADMIN_H
#define SC_ADMIN_H

#include "config.h"

/* inspect EVENT_ID [--json]: 0 when something is known of the id and every
 * query ran, 1 when nothing is or a query failed (the report names the
 * table and the error), 2 on bad usage. */
int sc_inspect_run(const struct sc_config *cfg, int argc, char **argv);

/* purge --older-than DURATION [--dry-run] [--force] */
int sc_purge_run(const struct sc_config *cfg, int argc, char **argv);

/* dlq list|show|replay|release CONSUMER [--id EVENT_ID | --all | --key KEY]: EVENT_ID as the
 * logs show it (any UUID spelling, or a plain message id). replay: 0 when
 * every matching message was replayed and removed from the DLQ. */
int sc_dlq_run(const struct sc_config *cfg, int argc, char **argv);

/* check: loads the handlers, connects to both servers, declares the
 * topology. 0 when everything answered, 1 otherwise, 2 when a handler is
 * refused. */
int sc_check_run(const struct sc_config *cfg);

/* check, with tenants: each tenant of tenants.list, or only the one named,
 * reached and its schema checked. 0, 1 when one cannot be reached, 2 when a
 * schema lacks what the consumers need. */
int sc_check_tenants(const struct sc_config *cfg, const char *only);

/* check's part for relay.source "binlog" on a connection to the primary.
 * Prints what holds; returns 0, or 1 after naming on stderr each thing that
 * stops the relay. */
struct sc_db;
int sc_check_binlog(struct sc_db *db, const struct sc_config *cfg);

/* --tenant NAME for the tools: refused (2, after saying why on stderr)
 * without a tenants section or when tenants.names refuses NAME; else 0. */
int sc_admin_tenant_ok(const struct sc_config *cfg, const char *cmd, const char *tenant);

/* Takes `--tenant NAME` out of argv (argc shrinks), checked as above:
 * *tenant is NAME, or NULL when not given. 0, or 2 after saying why. */
int sc_admin_take_tenant(const struct sc_config *cfg, const char *cmd, int *argc, char **argv,
                         const char **tenant);

/* Connects to tenant's database (every tenants.database_url node with
 * {tenant} replaced), or with tenant NULL to mysql.url's. As sc_db_connect. */
struct sc_db;
struct sc_db_err;
int sc_admin_connect(struct sc_db *db, const struct sc_config *cfg, const char *tenant,
                     struct sc_db_err *e);

/* migrate [--tenant NAME | --all] [--schema DIR]: applies every
 * sql/schema file to mysql.url's database, NAME's, or each tenant of
 * tenants.list. 0 when every database was brought current, 1 when one
 * failed, 2 on bad usage. */
int sc_migrate_run(const struct sc_config *cfg, int argc, char **argv);

/* Parses 90s, 45m, 36h, 7d (or a plain number of seconds). -1 when bad. */
long long sc_parse_duration_s(const char *s);

#endif
