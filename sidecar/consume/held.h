/* Held keys of an ordered consumer with "on_dead_letter": "hold" (the rows
 * are io/db_held.h's, reached through the batch seam). */
#ifndef SC_CONSUME_HELD_H
#define SC_CONSUME_HELD_H

#include "consume/worker.h"

/* 1 when k holds a key behind a dead-lettered event. */
int sc_held_mode(const struct sc_consumer_config *k);

/* Before the batch dls[0..n) runs: a delivery whose key is held gets
 * refused = "held behind <event_id>". Returns 0, or -1 with e filled (the
 * database could not tell: run nothing now). */
int sc_held_check(struct worker *w, struct delivery *dls, int n, struct sc_db_err *e);

/* A copy of the key's current replay was applied: says when the key is
 * free with it (its replay applied every held event). */
void sc_held_after_replayed(struct worker *w, const struct delivery *d,
                            const struct sc_log_fields *lf);

#endif
