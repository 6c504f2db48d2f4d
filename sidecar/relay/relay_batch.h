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

/* Marks the refused rows FAILED (or unsent) and the acked rows PUBLISHED.
 * Returns the number acked. */
int sc_relay_batch_mark(struct sc_relay_core *c, struct sc_relay_batch *b);

#endif
