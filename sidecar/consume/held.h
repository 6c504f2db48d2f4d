/* Held keys of an ordered consumer with "on_dead_letter": "hold" (the rows
 * are io/db_held.h's, reached through the batch seam). */
#ifndef SC_CONSUME_HELD_H
#define SC_CONSUME_HELD_H

#include "consume/order.h"
#include "consume/worker.h"

/* 1 when k holds a key behind a dead-lettered event. */
int sc_held_mode(const struct sc_consumer_config *k);

/* Before the batch dls[0..n) runs: a delivery whose key is held gets
 * refused = "held behind <event_id>" (replay_in_flight set when the key's
 * replay is). Returns 0, or -1 with e filled (the database could not tell:
 * run nothing now). */
int sc_held_check(struct worker *w, struct delivery *dls, int n, struct sc_db_err *e);

/* After sc_held_check, the batch dls[0..n) of the slots idx[0..n) of o: a
 * delivery held while its key's replay is in flight waits in hand for the
 * replay (not run, not recorded, not acked) and leaves the batch, as long
 * as its queue has room for the replay's copies to come in and the replay
 * applied one of its key's copies within SC_REPLAY_WAIT_MS; one that cannot
 * wait is held (and goes behind the replay). Returns how many deliveries are
 * left in the batch (dls and idx compacted). */
int sc_held_wait(const struct sc_consumer_config *k, struct sc_order *o, int *idx,
                 struct delivery *dls, int n, int64_t now_ms);

/* A copy of the key's current replay was applied: says when the key is
 * free with it (its replay applied every held event), and marks d so. */
void sc_held_after_replayed(struct worker *w, struct delivery *d,
                            const struct sc_log_fields *lf);

#endif
