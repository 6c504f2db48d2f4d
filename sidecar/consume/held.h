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

/* The replay of key ended with replay_until consumed: releases the key (or
 * leaves it held behind what arrived meanwhile) and says so. Returns the
 * enum sc_held_release. */
int sc_held_release(struct worker *w, const char *key, const char *replay_until,
                    struct sc_db_err *e);

#endif
