/* One aggregate's events (the business key aggregate_type + aggregate_id),
 * in order, each with its outbox status and, per consumer, whether and when
 * it was consumed: `sidecar inspect --aggregate TYPE ID` and the console. */
#ifndef SC_ADMIN_AGGREGATE_H
#define SC_ADMIN_AGGREGATE_H

#include <jansson.h>

#include "config.h"
#include "io/db.h"

/* The most events one page holds. */
#define SC_AGGREGATE_PAGE_MAX 200

/* The consumer names to look events up for: every configured consumer, then
 * those consumed_event knows (one loose scan of its unique index), at most
 * 100 in all. A JSON array of strings, or NULL with e filled. */
json_t *sc_consumer_names_json(struct sc_db *db, const struct sc_config *cfg,
                               struct sc_db_err *e);

/* The consumed_event rows of ids for each consumer in names: an object
 * {event_id: {consumer: consumed_at | null}}; n_ids <= SC_AGGREGATE_PAGE_MAX.
 * One indexed statement per consumer (uq_consumed_event_identity). A
 * consumer the config does not name is kept only when it consumed one of
 * ids (a database that has seen many consumers does not list them all);
 * *kept (when not NULL) gets the names kept, in order. NULL with e filled on
 * a database error. */
json_t *sc_consumption_json(struct sc_db *db, const struct sc_config *cfg, const json_t *names,
                            const char *const *ids, int n_ids, json_t **kept,
                            struct sc_db_err *e);

/* One page of the aggregate's events, oldest first (created_at, event_id),
 * after the cursor `after` (NULL: from the first), at most limit (1 to
 * SC_AGGREGATE_PAGE_MAX): {"aggregate_type", "aggregate_id", "consumers":
 * [...], "events": [{event_id, event_type, event_version, status,
 * created_at, published_at, publish_attempts, lease_owner, lease_until,
 * consumed: {consumer: consumed_at | null}}], "next": cursor | null}.
 * NULL with e filled on a database error. */
json_t *sc_aggregate_json(struct sc_db *db, const struct sc_config *cfg, const json_t *names,
                          const char *type, const char *id, const char *after, int limit,
                          struct sc_db_err *e);

/* inspect --aggregate TYPE ID [--json], in tenant's database (NULL:
 * mysql.url's): 0 when the aggregate has events, 1 when it has none (or the
 * database failed), 2 on bad usage. */
int sc_inspect_aggregate_run(const struct sc_config *cfg, const char *tenant, int argc,
                             char **argv);

#endif
