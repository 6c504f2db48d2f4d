/* The held aggregates of the binlog source (binlog_held.h), the core's
 * part: which rows of a batch are held, what a row read back says of its
 * aggregate, the set read back from the table, and the sweep that
 * publishes an aggregate's held rows once nothing it holds waits. */
#include "binlog_hold.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binlog_watermark.h"
#include "log.h"
#include "relay_message.h"

int sc_binlog_core_held(const struct sc_binlog_core *c, const struct sc_relay_row *r)
{
    if (!c->per_aggregate || !c->ops->held_rows || !r->aggregate_type || !r->aggregate_id)
        return 0;
    const struct sc_binlog_held_agg *a = sc_binlog_held_find(&c->held, r->aggregate_type, r->aggregate_id);
    /* What precedes the first FAILED row goes out (read again after a
     * rewind, say); a held row released goes out unless its aggregate
     * failed again before it. */
    return a && (a->failed || !r->released) && sc_binlog_held_after(a, r->time, r->version);
}

/* a's held rows wait for the checkpoint to reach at. */
static void settle_after(struct sc_binlog_held_agg *a, const struct sc_binlog_pos *at)
{
    if (!a->settle_known || sc_binlog_pos_after(at, &a->settle_at))
        a->settle_at = *at;
    a->settle_known = 1;
}

/* The position that settles a row of a batch claimed from the stream: the
 * batch's own; a row behind the checkpoint (held, sent again): that. */
static const struct sc_binlog_pos *settles_at(const struct sc_binlog_core *c, const struct sc_relay_row *r)
{
    for (int i = 0; i < c->q_len; i++) {
        const struct sc_relay_row *rows = c->done_at[(c->q_head + i) % SC_BINLOG_INFLIGHT].rows;
        if (r >= rows && r < rows + c->batch)
            return &c->done_at[(c->q_head + i) % SC_BINLOG_INFLIGHT].pos;
    }
    return &c->stored;
}

/* r's aggregate joins the set: r FAILED (failed) or held, its batch
 * settled at at. NULL out of memory. */
static struct sc_binlog_held_agg *note(struct sc_binlog_core *c, const struct sc_relay_row *r, int failed,
                                       const struct sc_binlog_pos *at)
{
    const struct sc_binlog_held_agg *was = sc_binlog_held_find(&c->held, r->aggregate_type, r->aggregate_id);
    int was_free = was && !was->failed && failed;
    struct sc_binlog_held_agg *a = sc_binlog_held_add(&c->held, r->aggregate_type, r->aggregate_id, failed);
    if (!a)
        return NULL;
    if (failed)
        sc_binlog_held_failed_at(a, r->time, r->version);
    a->check_before |= was_free; /* rows it held before may precede this one */
    settle_after(a, at);
    return a;
}

void sc_binlog_core_hold(struct sc_binlog_core *c, const struct sc_relay_row *r)
{
    if (!c->ops->held_rows || !r->aggregate_type || !r->aggregate_id)
        return;
    if (!note(c, r, 1, settles_at(c, r))) {
        /* Without the entry its successors would go out: load the set
         * again from the table (the row is FAILED there by then). */
        sc_error("relay: out of memory holding aggregate %s/%s; the held set is read again",
                 r->aggregate_type, r->aggregate_id);
        c->held_loaded = 0;
    }
}

int sc_binlog_hold_found(struct sc_binlog_core *c, const struct sc_relay_row *got, int failed, struct sc_db_err *e)
{
    if (!c->ops->held_rows || !got->aggregate_type || !got->aggregate_id)
        return 0;
    /* the batch this read makes ends at the stream's position */
    if (!note(c, got, failed, &c->ops->stream_tx(c->io)->committed)) {
        snprintf(e->msg, sizeof e->msg, "out of memory holding an aggregate");
        e->cls = SC_DBERR_FAILURE;
        return -1;
    }
    return 0;
}

/* Marks the rows of held aggregates held before anything after them is
 * stored as done; they leave the batch (rows[0..n) compacted). Returns the
 * rows left, or -1 with e. */
int sc_binlog_hold_batch(struct sc_binlog_core *c, struct sc_relay_row *rows, int n, struct sc_db_err *e)
{
    char (*ids)[37] = NULL;
    int n_held = 0, out = 0;
    for (int i = 0; i < n; i++) {
        if (!sc_binlog_core_held(c, &rows[i]))
            continue;
        if (!ids && !(ids = calloc((size_t)n, sizeof *ids))) {
            snprintf(e->msg, sizeof e->msg, "out of memory");
            e->cls = SC_DBERR_FAILURE;
            return -1;
        }
        memcpy(ids[n_held++], rows[i].event_id, sizeof ids[0]);
    }
    if (n_held == 0)
        return n;
    int rc = c->ops->hold_rows(c->io, ids, n_held, e);
    free(ids);
    if (rc < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        if (sc_binlog_core_held(c, &rows[i])) {
            sc_debug("relay: outbox_event %s held behind a FAILED row of aggregate %s/%s", rows[i].event_id,
                     rows[i].aggregate_type, rows[i].aggregate_id);
            sc_relay_row_clear(&rows[i]);
            continue;
        }
        if (out != i) {
            rows[out] = rows[i];
            memset(&rows[i], 0, sizeof rows[i]);
        }
        out++;
    }
    c->held_rows += (unsigned long long)n_held;
    return out;
}

/* 1 when every row of a's read before its settle_at is published, FAILED or
 * held: the checkpoint is there, or the stream has read past it with
 * nothing unsettled (an idle relay stores no position past its own
 * checkpoint writes). */
static int settled_for(struct sc_binlog_core *c, const struct sc_binlog_held_agg *a)
{
    if (!a->settle_known)
        return 0;
    if (!sc_binlog_pos_after(&a->settle_at, &c->stored))
        return 1;
    return c->q_len == 0 && c->n_ids == 0 && c->ops->stream_is_open(c->io) &&
           !sc_binlog_pos_after(&a->settle_at, &c->ops->stream_tx(c->io)->committed);
}

/* After a restart nothing says which held rows precede a FAILED one
 * (each aggregate is looked at once), nor what of them is after the
 * checkpoint: everything before the log's end is read again first. */
static void loaded(struct sc_binlog_held *h, const struct sc_binlog_pos *end)
{
    struct sc_binlog_held_agg **list = malloc((h->n ? h->n : 1) * sizeof *list);
    size_t n = list ? sc_binlog_held_list(h, list, h->n) : 0;
    for (size_t k = 0; k < n; k++) {
        list[k]->check_before = list[k]->failed;
        list[k]->settle_at = *end;
        list[k]->settle_known = 1;
    }
    free(list);
}

int sc_binlog_hold_load(struct sc_binlog_core *c, struct sc_db_err *e)
{
    struct sc_binlog_pos end;
    sc_binlog_held_clear(&c->held);
    if (c->ops->held_load(c->io, &c->held, e) || c->ops->log_end(c->io, &end, e))
        return -1;
    c->held_loaded = 1;
    loaded(&c->held, &end);
    c->sweep_at = 0;
    if (c->held.n)
        sc_info("relay: %zu aggregates have a FAILED or held row: %s", c->held.n,
                c->per_aggregate ? "their events are held until none is FAILED"
                                 : "a repaired row among them is published");
    return 0;
}

/* The held aggregates, once a sweep is due: with per_aggregate those with
 * no FAILED row left, else every one, have their held rows (a repaired
 * FAILED row among them) read whole into rows, in order: a batch of its
 * own, never queued for the checkpoint (those rows are behind it). An
 * aggregate with no FAILED and no held row left leaves the set. Returns
 * the rows, 0, or -1 with e. */
int sc_binlog_hold_release(struct sc_binlog_core *c, struct sc_relay_row *rows, int max, struct sc_db_err *e)
{
    int64_t now = c->ops->now_ms(c->io);
    if (!c->ops->held_rows || c->releasing || !c->held.n || now < c->sweep_at)
        return 0;
    size_t n = c->held.n;
    struct sc_binlog_held_agg **list = malloc(n * sizeof *list);
    char (*was)[40] = calloc(n, sizeof *was);
    if (!list || !was) {
        free(list);
        free(was);
        snprintf(e->msg, sizeof e->msg, "out of memory");
        e->cls = SC_DBERR_FAILURE;
        return -1;
    }
    n = sc_binlog_held_list(&c->held, list, n);
    int ready = 0; /* no statement while nothing can go out yet */
    for (size_t k = 0; k < n && !ready; k++)
        ready = settled_for(c, list[k]);
    if (!ready) { /* looked at again soon: a walk of the set, no statement */
        c->sweep_at = now + SC_BINLOG_SWEEP_MS / 10;
        free(list);
        free(was);
        return 0;
    }
    c->sweep_at = now + SC_BINLOG_SWEEP_MS;
    for (size_t k = 0; k < n; k++)
        memcpy(was[k], list[k]->first_time, sizeof was[k]);
    /* (the one read for all, without per_aggregate, waits for every entry) */
    for (size_t k = 0; k < n && !c->per_aggregate; k++)
        if (!settled_for(c, list[k])) {
            free(list);
            free(was);
            return 0;
        }
    int got = c->ops->held_failed(c->io, &c->held, e);
    /* A first FAILED row repaired while a later one is left: the held
     * rows between them are out of its shadow. */
    for (size_t k = 0; k < n && got == 0; k++)
        if (list[k]->failed && was[k][0] && strcmp(was[k], list[k]->first_time) != 0)
            list[k]->check_before = 1;
    free(was);
    if (got == 0 && !c->per_aggregate) { /* only repaired rows carry the mark: one read for all */
        got = c->ops->held_rows(c->io, NULL, NULL, NULL, rows, max, e);
        for (size_t k = 0; k < n && got == 0; k++) /* kept until what they held is out */
            if (!list[k]->failed)
                sc_binlog_held_remove(&c->held, list[k]);
    }
    for (size_t k = 0; c->per_aggregate && got >= 0 && k < n && got < max; k++) {
        struct sc_binlog_held_agg *a = list[k];
        if ((a->failed && !a->check_before) || !settled_for(c, a))
            continue;
        int took = c->ops->held_rows(c->io, a->type, a->id, a->failed ? a->first_time : NULL, rows + got,
                                     max - got, e);
        if (took < 0) {
            got = -1;
            break;
        }
        if (took == 0 && a->failed) {
            a->check_before = 0;
        } else if (took == 0) {
            sc_info("relay: aggregate %s/%s is published on: no FAILED or held row left", a->type, a->id);
            sc_binlog_held_remove(&c->held, a);
        } else {
            sc_info("relay: aggregate %s/%s: publishing %d held events in order (%s)", a->type, a->id, took,
                    a->failed ? "those before its first FAILED row" : "it has no FAILED row left");
            got += took;
        }
    }
    free(list);
    if (got < 0) {
        for (int i = 0; i < max; i++)
            sc_relay_row_clear(&rows[i]);
        return -1;
    }
    for (int i = 0; i < got; i++)
        rows[i].released = 1;
    if (got) {
        c->releasing = rows;
        c->released += (unsigned long long)got;
    }
    return got;
}

