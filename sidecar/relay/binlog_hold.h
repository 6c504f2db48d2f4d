/* The core's held aggregates (binlog_hold.c), for binlog_core.c. */
#ifndef SC_BINLOG_HOLD_H
#define SC_BINLOG_HOLD_H

#include "binlog_core.h"

/* Marks the rows of held aggregates held before anything after them is
 * stored as done; they leave the batch (rows[0..n) compacted). Returns the
 * rows left, or -1 with e. */
int sc_binlog_hold_batch(struct sc_binlog_core *c, struct sc_relay_row *rows, int n, struct sc_db_err *e);
/* A row read back FAILED (failed) or held: its aggregate joins the set.
 * 0, or -1 with e. */
int sc_binlog_hold_found(struct sc_binlog_core *c, const struct sc_relay_row *got, int failed, struct sc_db_err *e);
/* The set read back from the table (lease taken, connection new). 0, or
 * -1 with e. */
int sc_binlog_hold_load(struct sc_binlog_core *c, struct sc_db_err *e);
/* The sweep, once due (SC_BINLOG_SWEEP_MS): held rows whose aggregate can
 * go on, read whole into rows. Returns their count, 0, or -1 with e. */
int sc_binlog_hold_release(struct sc_binlog_core *c, struct sc_relay_row *rows, int max, struct sc_db_err *e);

#endif
