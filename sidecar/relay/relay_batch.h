/* One batch through its rows' states: built and sent, confirms taken,
 * marked. Each row's state changes in one place (relay_batch.c row_to). */
#ifndef SC_RELAY_BATCH_H
#define SC_RELAY_BATCH_H

#include "relay_core.h"

/* Starts a batch of n rows claimed at claim_started (ops->now_ms before the
 * claim statement): every per-row and per-batch field. */
void sc_relay_batch_begin(struct sc_relay_core *c, struct sc_relay_batch *b, int n,
                          int64_t claim_started);
/* Frees rows[0..n) and empties the batch. */
void sc_relay_batch_end(struct sc_relay_batch *b, int n);

/* Builds the messages, marks the rows that break a rule FAILED and sends
 * the rest without waiting; leaves b->n_msgs = the messages sent. */
void sc_relay_batch_send(struct sc_relay_core *c, struct sc_relay_batch *b);

/* Waits up to confirm_timeout_ms for the confirms of the messages sent and
 * moves each sent row to ACKED, NACKED, RETURNED or UNCONFIRMED. */
void sc_relay_batch_collect(struct sc_relay_core *c, struct sc_relay_batch *b);

/* Marks the rows basic.publish refused FAILED (each its own transaction:
 * rare) when the connection proved alive, else leaves them unsent. */
void sc_relay_batch_settle(struct sc_relay_core *c, struct sc_relay_batch *b);

/* Fills acked[] with the batch's ACKED rows (to be marked PUBLISHED);
 * returns how many. */
int sc_relay_batch_acked(struct sc_relay_batch *b, struct sc_relay_row **acked);

/* Moves the acked rows to the state the round's transaction gave them
 * (marked[] is read only for SC_ROUND_DONE). */
void sc_relay_batch_marked(struct sc_relay_core *c, struct sc_relay_row *const *acked, int n,
                           const unsigned char *marked, enum sc_relay_round outcome);

#endif
