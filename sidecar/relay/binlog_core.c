#include "binlog_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "binlog_watermark.h"
#include "binlog_hold.h"
#include "relay_message.h"

int sc_binlog_core_init(struct sc_binlog_core *c, const struct sc_binlog_ops *ops, void *io,
                        const char *worker_id, int batch, int lease_ms, int wait_ms, int per_aggregate)
{
    memset(c, 0, sizeof *c);
    c->per_aggregate = per_aggregate;
    c->ops = ops;
    c->io = io;
    c->worker_id = worker_id;
    c->batch = batch;
    c->lease_ms = lease_ms;
    /* an idle claim waits in the stream: never past the lease's renewal */
    c->wait_ms = wait_ms < lease_ms / 3 ? wait_ms : lease_ms / 3 > 0 ? lease_ms / 3 : 1;
    c->ids = calloc((size_t)batch + SC_BINLOG_SPILL, sizeof *c->ids);
    return c->ids ? 0 : -1;
}

void sc_binlog_core_free(struct sc_binlog_core *c)
{
    free(c->ids);
    c->ids = NULL;
    sc_binlog_held_free(&c->held);
}

/* Back to the stored checkpoint: what was read after it is read again. */
static void rewind_stream(struct sc_binlog_core *c, const char *why)
{
    if (c->ops->stream_is_open(c->io) || c->n_ids || c->q_len) {
        c->rewinds++;
        sc_warn("relay: back to the checkpoint %s:%llu (%s); what follows it is published again",
                c->stored.file[0] ? c->stored.file : "(start)", c->stored.pos, why);
    }
    c->ops->stream_close(c->io);
    c->n_ids = 0;
    /* Batches claimed before the rewind stay queued, to end in claim order
     * as the core ends them: their old gen stores nothing. Dropped here, a
     * batch claimed after it would be popped by an older one, storing its
     * position before its confirms. */
    c->gen++;
    c->from = c->stored;
}

void sc_binlog_core_db_closed(struct sc_binlog_core *c)
{
    rewind_stream(c, "the database connection closed");
    c->holding = 0;
    c->held_loaded = 0;
}

/* A row's terminal state that lets its batch's position be stored. */
static int settles(enum sc_relay_row_state st)
{
    return st == SC_ROW_PUBLISHED || st == SC_ROW_FAILED || st == SC_ROW_HELD;
}

/* A row in a state that sends the stream back to the checkpoint once its
 * batch is done (binlog_core_batch_done): any other terminal one, or
 * REFUSED (settled as unsent unless the connection proves alive). */
static int rewinds(enum sc_relay_row_state st)
{
    return st == SC_ROW_REFUSED || (st >= SC_ROW_PUBLISHED && st < SC_ROW_STATES && !settles(st));
}

int sc_binlog_core_stale(const struct sc_binlog_core *c, const struct sc_relay_batch *b)
{
    for (int i = 0; i < c->q_len; i++) {
        int j = (c->q_head + i) % SC_BINLOG_INFLIGHT;
        if (c->done_at[j].rows == b->rows && !c->done_at[j].settled)
            return c->done_at[j].gen != c->gen;
        /* an earlier batch, collected and not yet done: its rows' states are final but for the marks */
        for (int k = 0; c->done_at[j].gen == c->gen && !c->done_at[j].settled && k < c->done_at[j].n; k++)
            if (rewinds(c->done_at[j].rows[k].state))
                return 1;
    }
    return 0;
}

/* Holds the lease (taking it, or renewing it when a third of it is gone).
 * Returns 1 held, 0 standby, -1 with e. */
static int hold_lease(struct sc_binlog_core *c, struct sc_db_err *e)
{
    int64_t now = c->ops->now_ms(c->io);
    if (c->holding && now < c->renew_at)
        return 1;
    int rc = c->holding ? c->ops->ckpt_store(c->io, NULL, e) : c->ops->ckpt_acquire(c->io, &c->stored, e);
    if (rc < 0)
        return -1;
    if (rc == 0) {
        if (c->holding)
            sc_warn("relay %s: another relay took the checkpoint's lease: standing by", c->worker_id);
        c->holding = 0;
        rewind_stream(c, "lease lost");
        return 0;
    }
    if (!c->holding) {
        sc_info("relay %s: active for outbox_event from %s:%llu%s%s", c->worker_id,
                c->stored.file[0] ? c->stored.file : "(the oldest binary log)", c->stored.pos,
                c->stored.gtid[0] ? ", GTID " : "", c->stored.gtid);
        rewind_stream(c, "lease taken");
        c->held_loaded = 0; /* another relay may have held or released aggregates */
    }
    c->holding = 1;
    c->renew_at = now + c->lease_ms / 3;
    return 1;
}

/* Reads rows ids[0..n) back by key into rows, in the binary log's order,
 * dropping those no longer PENDING (published or refused before) and the
 * held (a FAILED row's aggregate is held; binlog_held.h). Returns the
 * count, or -1 with e. */
static int read_back(struct sc_binlog_core *c, struct sc_relay_row *rows, int n, struct sc_db_err *e)
{
    char *status = calloc((size_t)n, 1);
    struct sc_relay_row *got = calloc((size_t)n, sizeof *got);
    int out = -1;
    if (!status || !got) {
        snprintf(e->msg, sizeof e->msg, "out of memory");
        e->cls = SC_DBERR_FAILURE;
        goto done;
    }
    for (int attempt = 0;; attempt++) {
        int asked = c->ops->read_rows(c->io, c->ids, n, status, got, e);
        if (asked < 0)
            goto done;
        if (asked == 0 || attempt >= SC_BINLOG_READ_AGAIN)
            break;
        int left = 0;
        for (int i = 0; i < n; i++)
            left += status[i] == SC_FOUND_NOT_YET;
        if (!left)
            break;
        c->ops->sleep_ms(c->io, SC_BINLOG_READ_AGAIN_MS);
    }
    out = 0;
    for (int i = 0; i < n; i++) {
        if (status[i] == SC_FOUND_PENDING) {
            rows[out++] = got[i];
            memset(&got[i], 0, sizeof got[i]);
        } else if (status[i] == SC_FOUND_FAILED || status[i] == SC_FOUND_HELD) {
            /* FAILED before (a batch published again), or held: the sweep
             * publishes a held row once its aggregate is free */
            if (sc_binlog_hold_found(c, &got[i], status[i] == SC_FOUND_FAILED, e)) {
                out = -1;
                goto done;
            }
        } else if (status[i] == SC_FOUND_NOT_YET) {
            c->missing++;
            sc_warn("relay: outbox_event %s is in the binary log but not in the table: deleted after "
                    "its insert committed; nothing to publish", c->ids[i]);
        }
    }
    if (c->ops->held_rows && c->held.n)
        out = sc_binlog_hold_batch(c, rows, out, e);
done:
    if (out < 0)
        for (int i = 0; i < n; i++)
            sc_relay_row_clear(&rows[i]);
    if (got)
        for (int i = 0; i < n; i++)
            sc_relay_row_clear(&got[i]);
    free(got);
    free(status);
    return out;
}

/* The position a done batch may store: after the last transaction the
 * stream finished reading when the batch was cut. */
static void queue_done_at(struct sc_binlog_core *c, const struct sc_relay_row *rows, int n)
{
    int k = (c->q_head + c->q_len) % SC_BINLOG_INFLIGHT;
    c->done_at[k].gen = c->gen;
    c->done_at[k].rows = rows;
    c->done_at[k].n = n;
    c->done_at[k].settled = 0;
    c->done_at[k].pos = c->ops->stream_tx(c->io)->committed;
    c->q_len++;
}

/* Only other tables, DDL or nothing: store the position when no batch is
 * out (one write per lease renewal at most). */
static int idle_store(struct sc_binlog_core *c, struct sc_db_err *e)
{
    int64_t now = c->ops->now_ms(c->io);
    struct sc_binlog_tx *tx = c->ops->stream_tx(c->io);
    if (c->q_len || now < c->idle_store_at || !tx->foreign || !sc_binlog_pos_after(&tx->committed, &c->stored))
        return 0;
    struct sc_binlog_pos at = tx->committed;
    int rc = c->ops->ckpt_store(c->io, &at, e);
    if (rc < 0)
        return -1;
    if (rc == 1)
        c->stored = at;
    c->idle_store_at = now + SC_BINLOG_IDLE_STORE_MS;
    tx->foreign = 0;
    c->renew_at = now + c->lease_ms / 3;
    return 0;
}

int sc_binlog_core_claim(struct sc_binlog_core *c, struct sc_relay_row *rows, int max, struct sc_db_err *e)
{
    int held = hold_lease(c, e);
    if (held < 0)
        return -1;
    if (held == 0) {
        c->ops->sleep_ms(c->io, c->wait_ms); /* standing by: the claim is the core's only wait */
        return 0;
    }
    if (c->ops->measure_lag || c->ops->watermark) {
        int settled = c->q_len == 0 && c->n_ids == 0 && c->ops->stream_is_open(c->io);
        const struct sc_binlog_pos *at = settled ? &c->ops->stream_tx(c->io)->committed : &c->stored;
        if (c->ops->measure_lag)
            c->ops->measure_lag(c->io, at, settled);
        if (c->ops->watermark)
            c->ops->watermark(c->io, at);
    }
    if (!c->ops->stream_is_open(c->io)) {
        enum sc_binlog_open o = c->ops->stream_open(c->io, &c->from, e);
        if (o == SC_BINLOG_GONE) {
            c->gone = 1;
            c->ops->gone(c->io, e);
            return 0;
        }
        if (o != SC_BINLOG_OPENED)
            return -1;
    }
    if (c->ops->held_rows && !c->held_loaded && sc_binlog_hold_load(c, e))
        return -1;
    int released = sc_binlog_hold_release(c, rows, max, e);
    if (released)
        return released;
    if (c->q_len >= SC_BINLOG_INFLIGHT)
        return 0; /* cannot happen with the core's two buffers */
    int n = c->ops->stream_read(c->io, c->ids, c->n_ids, max, max + SC_BINLOG_SPILL, c->wait_ms, e->msg,
                                sizeof e->msg);
    if (n == SC_BINLOG_READ_STOP) {
        /* Nothing after the stored checkpoint is stored as done: the
         * batches in flight end as they do, and the relay stops. */
        e->cls = SC_DBERR_FAILURE;
        c->gone = 1;
        c->ops->gone(c->io, e);
        rewind_stream(c, "an event the reader cannot read");
        return 0;
    }
    if (n < 0) {
        e->cls = SC_DBERR_CONNECTION;
        rewind_stream(c, "the binary log stream failed");
        return -1;
    }
    c->n_ids = n;
    if (n == 0) { /* idle: the stream has read all there is */
        released = sc_binlog_hold_release(c, rows, max, e);
        return released ? released : idle_store(c, e);
    }
    int take = n < max ? n : max;
    int got = read_back(c, rows, take, e);
    if (got < 0)
        return -1;
    memmove(c->ids, c->ids + take, (size_t)(n - take) * sizeof *c->ids);
    c->n_ids = n - take;
    if (got > 0)
        queue_done_at(c, rows, got);
    return got;
}

/* Stores the position of the last of the settled batches at the head of
 * the queue. */
static void store_settled(struct sc_binlog_core *c)
{
    int last = -1;
    while (c->q_len && c->done_at[c->q_head].settled) {
        if (c->done_at[c->q_head].gen == c->gen)
            last = c->q_head;
        c->q_head = (c->q_head + 1) % SC_BINLOG_INFLIGHT;
        c->q_len--;
    }
    /* A stream that started before the checkpoint (a server that sends
     * again from earlier) reaches it again: nothing new to store, and the
     * checkpoint never moves back. */
    if (last < 0 || !sc_binlog_pos_after(&c->done_at[last].pos, &c->stored))
        return;
    struct sc_binlog_pos at = c->done_at[last].pos;
    struct sc_db_err e = {0};
    int rc = c->ops->ckpt_store(c->io, &at, &e);
    if (rc == 1) {
        c->stored = at;
        c->checkpoints++;
        c->renew_at = c->ops->now_ms(c->io) + c->lease_ms / 3;
        return;
    }
    if (rc == 0) {
        sc_warn("relay %s: the checkpoint's lease was lost before a batch could be stored; "
                "standing by (the batch is published again by the active relay)", c->worker_id);
        c->holding = 0;
    } else {
        sc_warn("relay: writing the checkpoint failed (error %u: %s); what follows the last one "
                "is published again", e.code, e.msg);
        c->ops->db_close(c->io);
        /* It may have committed all the same: the lease is taken again,
         * which reads the stored position back, so that no renewal writes
         * an older one over it. */
        c->holding = 0;
    }
    rewind_stream(c, "checkpoint not written");
}

/* Batches may end out of claim order (one with nothing to send ends at
 * once, before the one in flight): each is found by its rows, and a
 * position is stored only once every batch before it is settled too. */
void sc_binlog_core_batch_done(struct sc_binlog_core *c, const struct sc_relay_batch *b)
{
    if (b->rows == c->releasing) {
        /* held rows: each one not PUBLISHED is still held, for the next sweep */
        int all = 1;
        for (int i = 0; i < b->n; i++)
            all &= b->rows[i].state == SC_ROW_PUBLISHED;
        c->releasing = NULL;
        c->sweep_at = all ? 0 : c->ops->now_ms(c->io) + SC_BINLOG_SWEEP_MS;
        return;
    }
    int k = -1;
    for (int i = 0; i < c->q_len && k < 0; i++) {
        int j = (c->q_head + i) % SC_BINLOG_INFLIGHT;
        if (c->done_at[j].rows == b->rows && !c->done_at[j].settled)
            k = j;
    }
    if (k < 0)
        return; /* not queued: nothing of it may be stored */
    c->done_at[k].settled = 1;
    if (c->done_at[k].gen == c->gen)
        for (int i = 0; i < b->n; i++) {
            enum sc_relay_row_state st = b->rows[i].state;
            if (!settles(st)) {
                rewind_stream(c, sc_relay_row_state_name(st));
                break;
            }
        }
    store_settled(c);
}
