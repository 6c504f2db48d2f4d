/* The binlog relay's row in relay_checkpoint: its lease (one active relay
 * per outbox) and its position, one UPDATE per confirmed batch. */
#ifndef SC_BINLOG_CHECKPOINT_H
#define SC_BINLOG_CHECKPOINT_H

#include "binlog_stream.h"
#include "binlog_watermark.h"
#include "io/db.h"

struct sc_binlog_ckpt {
    struct sc_db *db;
    const char *owner;
    int lease_ms;
    struct sc_binlog_pos stored; /* what the row holds, as last written or read */
    struct sc_binlog_wm wm;      /* the watermark's samples, and the W ready to store */
    int wm_column;               /* relay_checkpoint has published_created_before (014) */
    int64_t wm_written;          /* the W the last write stored (0: none yet) */
};

/* Takes the lease when it is free, expired or already ours, and reads the
 * position (and whether the row has a watermark column). Returns 1 when held, 0 when another relay holds it, -1 with e. */
int sc_binlog_ckpt_acquire(struct sc_binlog_ckpt *k, struct sc_db_err *e);

/* Stores pos (NULL: the stored one again) and extends the lease, under the
 * lease, with the watermark that pos has made ready when it moved (never
 * back). Returns 1 when written, 0 when the lease is lost, -1 with e. */
int sc_binlog_ckpt_store(struct sc_binlog_ckpt *k, const struct sc_binlog_pos *pos,
                         struct sc_db_err *e);

/* Ends this relay's lease now (a clean stop): a standby takes over at its
 * next try instead of after lease_ms. Returns 0, or -1 with e. */
int sc_binlog_ckpt_release(struct sc_binlog_ckpt *k, struct sc_db_err *e);

#endif
