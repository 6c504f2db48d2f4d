/* The effects of an event, read where each consumer's inspect_effects
 * says they are (for `sidecar inspect`). */
#ifndef SC_ADMIN_EFFECTS_H
#define SC_ADMIN_EFFECTS_H

#include <jansson.h>

#include "config.h"
#include "io/db.h"

/* The most rows shown per effect table; more are counted as "more". */
#define SC_EFFECT_ROWS_SHOWN 20

/* One entry per inspect_effects entry of every consumer, in config order:
 * {consumer, table, rows: [{column: value}], more} where the event id
 * (canonical) matched, or {consumer, table, error: {code, sqlstate,
 * message}} when the query failed. Integer columns are JSON integers, every
 * other value the server's text (cut at 256 bytes), SQL NULL null. Sets
 * *gone when the connection was lost: entries after that are left out.
 * Returns a new array, or NULL when out of memory. */
json_t *sc_inspect_effects_json(struct sc_db *db, const struct sc_config *cfg,
                                const char *event_id, int *gone);

#endif
