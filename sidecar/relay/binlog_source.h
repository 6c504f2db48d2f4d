/* relay.source "binlog": the calls of struct sc_relay_ops over the binary
 * log. The claim reads the next outbox_event inserts from the stream
 * (binlog_stream.c) and reads their rows back by key; a confirmed batch
 * writes the checkpoint (binlog_checkpoint.c) instead of marking its rows;
 * any row of a batch that is not settled (nacked, unconfirmed, unsent)
 * sends the stream back to the checkpoint, so it is published again and
 * nothing after it is ever stored as done. Those decisions are
 * binlog_core.c's; this file is its ops over MariaDB. */
#ifndef SC_BINLOG_SOURCE_H
#define SC_BINLOG_SOURCE_H

#include "binlog_checkpoint.h"
#include "binlog_core.h"
#include "binlog_stream.h"
#include "metrics.h"
#include "relay_core.h"

struct sc_binlog_source {
    const struct sc_config *cfg;
    const char *worker_id;
    unsigned server_id;
    struct sc_db db; /* read-back, FAILED marks, checkpoint */
    struct sc_binlog_stream stream;
    struct sc_binlog_ckpt ckpt;
    struct sc_binlog_core core; /* the decisions (binlog_core.c) */
    struct sc_relay_metrics *m; /* the lag gauges; NULL in tests */
    int64_t lag_at;             /* the next lag measurement */
    int64_t wm_at;              /* the next watermark sample */
    int wm_warned;              /* a failed sample was logged: once until one works */
};

/* The server_id the relay's replication connection announces. */
unsigned sc_binlog_replica_id(const char *worker_id);

int sc_binlog_source_init(struct sc_binlog_source *s, const struct sc_config *cfg,
                          const char *worker_id);
void sc_binlog_source_free(struct sc_binlog_source *s);

/* The calls of struct sc_relay_ops (same contracts; io is the source). */

int sc_binlog_db_open(void *io, struct sc_db_err *e);
void sc_binlog_db_close(void *io);
int sc_binlog_db_is_open(void *io);
int sc_binlog_claim(void *io, struct sc_relay_row *rows, int max, struct sc_db_err *e);
int sc_binlog_mark_published(void *io, struct sc_relay_row *const *rows, int n,
                             unsigned char *marked, struct sc_db_err *e);
int sc_binlog_mark_failed(void *io, const struct sc_relay_row *row, struct sc_db_err *e);
int sc_binlog_rollback(void *io, struct sc_db_err *e);
int sc_binlog_mark_held(void *io, struct sc_relay_row *const *rows, int n, struct sc_db_err *e);
int sc_binlog_held(void *io, const struct sc_relay_row *r);
void sc_binlog_hold(void *io, const struct sc_relay_row *r);
int sc_binlog_stale(void *io, const struct sc_relay_batch *b);
void sc_binlog_batch_done(void *io, const struct sc_relay_batch *b);

#endif
