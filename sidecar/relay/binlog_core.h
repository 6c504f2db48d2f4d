/* The binlog source's decisions, apart from the database and the clock:
 * the lease on the checkpoint, which outbox inserts make the next batch
 * (read from the stream, then read back by key, waited for and never
 * skipped), what position a batch may store once it is settled, and the
 * rewind to the stored checkpoint on a nack, a timeout, a stream error or
 * a checkpoint not written. Every effect goes through struct
 * sc_binlog_ops, so the same code runs over MariaDB (binlog_source.c) and
 * over the simulation's stand-ins (tests/unit/sim_relay_binlog.c). */
#ifndef SC_BINLOG_CORE_H
#define SC_BINLOG_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "binlog_held.h"
#include "binlog_tx.h"
#include "io/db.h"
#include "relay_core.h"

#define SC_BINLOG_INFLIGHT 4 /* batches claimed and not done: the core holds two */
/* Room past the batch for the rest of one rows event (about 8 KiB of rows
 * of at least ~80 bytes each). */
#define SC_BINLOG_SPILL 512
/* A row named by the binary log is committed; the read-back takes a shared
 * lock, so a row whose transaction is logged but not yet committed in
 * InnoDB is waited for, never missed. One that is still absent after that
 * and READ_AGAIN more reads was deleted after its insert committed. */
#define SC_BINLOG_READ_AGAIN 3
#define SC_BINLOG_READ_AGAIN_MS 50
/* An idle relay (other tables, DDL) stores its position at most this often. */
#define SC_BINLOG_IDLE_STORE_MS 1000
/* Held aggregates are looked at again (a FAILED row repaired?) this often. */
#define SC_BINLOG_SWEEP_MS 1000

/* What the read-back found of a row (read_rows' status[i]). */
enum sc_binlog_found {
    SC_FOUND_NOT_YET = 0, /* absent */
    SC_FOUND_PENDING,     /* to publish */
    SC_FOUND_OTHER,       /* PUBLISHED or PUBLISHING: published already */
    SC_FOUND_FAILED,      /* FAILED: its aggregate is held (binlog_held.h) */
    SC_FOUND_HELD,        /* PENDING with lease_until set: held, or a FAILED row repaired */
};

/* stream_read's answer for an event that may hold outbox rows the reader
 * cannot read: reading it again cannot help, and passing over it would
 * skip them, so the relay stops (as gone). */
#define SC_BINLOG_READ_STOP (-2)

enum sc_binlog_open {
    SC_BINLOG_OPENED = 0,
    SC_BINLOG_OPEN_FAILED, /* e says why; try again later */
    SC_BINLOG_GONE,        /* the position is older than the oldest binary log: never skip */
};

/* Database calls return as struct sc_relay_ops's do: 0 or a count, or -1
 * with e filled. */
struct sc_binlog_ops {
    /* Starts the stream at from (empty file: the oldest binary log). */
    enum sc_binlog_open (*stream_open)(void *io, const struct sc_binlog_pos *from, struct sc_db_err *e);
    void (*stream_close)(void *io);
    int (*stream_is_open)(void *io);
    /* As sc_binlog_stream_read: outbox_event ids appended to ids[have..].
     * -1 with err set: the stream is closed; SC_BINLOG_READ_STOP with err
     * set: it reached an event that may hold rows it cannot read. */
    int (*stream_read)(void *io, char (*ids)[37], int have, int max, int cap, int wait_ms, char *err,
                       size_t err_len);
    struct sc_binlog_tx *(*stream_tx)(void *io); /* where the stream stands */
    /* One locking read, by key, of the ids[i] with status[i] 0, then a
     * commit: status[i] becomes what was found (enum sc_binlog_found), got[i]
     * filled for every row found; the absent stay 0. Returns how many were
     * asked for. */
    int (*read_rows)(void *io, char (*ids)[37], int n, char *status, struct sc_relay_row *got,
                     struct sc_db_err *e);
    /* sc_binlog_ckpt_acquire / sc_binlog_ckpt_store (pos NULL: the stored
     * position again); acquire fills *stored. */
    int (*ckpt_acquire)(void *io, struct sc_binlog_pos *stored, struct sc_db_err *e);
    int (*ckpt_store)(void *io, const struct sc_binlog_pos *pos, struct sc_db_err *e);
    void (*db_close)(void *io); /* the session's state is unknown: drop it */
    int64_t (*now_ms)(void *io);
    void (*sleep_ms)(void *io, int ms);
    /* The position is older than the oldest binary log, or the stream
     * holds an event the reader cannot read: stop, never skip. */
    void (*gone)(void *io, const struct sc_db_err *e);
    /* Optional: the lag from at (settled: nothing read is unsettled). */
    void (*measure_lag)(void *io, const struct sc_binlog_pos *at, int settled);
    /* Optional: everything up to at is published or FAILED (settled, or
     * the stored checkpoint); the watermark's samples whose binary log end
     * at has reached are ready to store (binlog_watermark.h). */
    void (*watermark)(void *io, const struct sc_binlog_pos *at);
    /* Held aggregates (binlog_held.h): the five together, or none. */
    /* Marks ids[0..n) held (lease_until set) where still PENDING, and commits. */
    int (*hold_rows)(void *io, char (*ids)[37], int n, struct sc_db_err *e);
    /* Adds to h every aggregate with a FAILED row (failed 1, its first
     * one's created_at) or a held row. */
    int (*held_load)(void *io, struct sc_binlog_held *h, struct sc_db_err *e);
    /* Sets each entry's failed by whether a FAILED row is left in it, and
     * its first one's created_at (and adds the aggregates of FAILED rows it
     * lacks). */
    int (*held_failed)(void *io, struct sc_binlog_held *h, struct sc_db_err *e);
    /* The binary log's end now (SHOW BINARY LOGS' last file and size). */
    int (*log_end)(void *io, struct sc_binlog_pos *end, struct sc_db_err *e);
    /* Up to max held rows of aggregate type/id (type NULL: of any), whole,
     * by created_at, event_version, event_id (the stream's commit order as
     * near as the table has it); with before (ISO 8601), only those created
     * before it. Returns the count. */
    int (*held_rows)(void *io, const char *type, const char *id, const char *before, struct sc_relay_row *rows,
                     int max, struct sc_db_err *e);
};

struct sc_binlog_core {
    const struct sc_binlog_ops *ops;
    void *io;
    const char *worker_id;
    int batch, lease_ms, wait_ms;
    int per_aggregate;     /* relay.ordering per_aggregate: a FAILED row holds its aggregate */
    int holding;           /* this relay holds the checkpoint's lease */
    int64_t renew_at;      /* renew the lease then */
    int64_t idle_store_at; /* an idle relay's next position write, at the earliest */
    struct sc_binlog_pos stored; /* the checkpoint, as last written or read */
    struct sc_binlog_pos from;   /* where the stream (re)starts: the stored checkpoint */
    char (*ids)[37];
    int n_ids;             /* ids read and not yet claimed (spill of the last rows event) */
    /* The batches claimed and not yet stored past, in claim order: what
     * each may store, once it and every one before it are settled. */
    struct {
        unsigned gen;
        const struct sc_relay_row *rows; /* which batch (its rows buffer) */
        int n;                           /* its rows */
        int settled;                     /* ended with every row PUBLISHED or FAILED */
        struct sc_binlog_pos pos;
    } done_at[SC_BINLOG_INFLIGHT];
    int q_head, q_len;
    unsigned gen;          /* bumped by every rewind: older batches store nothing */
    int gone;              /* the position is older than the oldest binary log, or the
                              stream holds an event it cannot read: stop */
    struct sc_binlog_held held;
    int held_loaded;       /* the set was rebuilt since the lease was taken */
    int64_t sweep_at;      /* the held aggregates' next look */
    const struct sc_relay_row *releasing; /* the batch of held rows out (its rows), or NULL */
    unsigned long long missing, rewinds, checkpoints, held_rows, released;
};

int sc_binlog_core_init(struct sc_binlog_core *c, const struct sc_binlog_ops *ops, void *io,
                        const char *worker_id, int batch, int lease_ms, int wait_ms, int per_aggregate);
void sc_binlog_core_free(struct sc_binlog_core *c);

/* struct sc_relay_ops's claim and batch_done. */
int sc_binlog_core_claim(struct sc_binlog_core *c, struct sc_relay_row *rows, int max, struct sc_db_err *e);
void sc_binlog_core_batch_done(struct sc_binlog_core *c, const struct sc_relay_batch *b);

/* The database connection closed: back to the checkpoint, lease to be
 * taken again. */
void sc_binlog_core_db_closed(struct sc_binlog_core *c);

/* struct sc_relay_ops's held and hold: whether a row's aggregate is held
 * now (per_aggregate only), and a row refused (to be FAILED): its
 * aggregate is held from now on. */
int sc_binlog_core_held(const struct sc_binlog_core *c, const struct sc_relay_row *r);
/* struct sc_relay_ops's stale: the batch was claimed before a rewind, or
 * one claimed before it has a row that will send the stream back. */
int sc_binlog_core_stale(const struct sc_binlog_core *c, const struct sc_relay_batch *b);
void sc_binlog_core_hold(struct sc_binlog_core *c, const struct sc_relay_row *r);

#endif
