/* The binlog relay's held aggregates: those with a FAILED row, or with
 * rows held behind one (PENDING with lease_until set: the one mark a held
 * row gets, written before the checkpoint passes it). With
 * relay.ordering per_aggregate every later insert of a held aggregate is
 * held too, until no FAILED row is left in it; then its held rows (the
 * repaired one among them) are published in order and marked PUBLISHED.
 * The set is the relay's memory, rebuilt from the table when it takes the
 * checkpoint's lease. A hash set of (aggregate_type, aggregate_id). */
#ifndef SC_BINLOG_HELD_H
#define SC_BINLOG_HELD_H

#include <stddef.h>

#include "binlog_tx.h"

struct sc_binlog_held_agg {
    struct sc_binlog_held_agg *next; /* its bucket's chain */
    unsigned hash;
    int failed;                      /* the last sweep saw a FAILED row in it */
    /* Its first FAILED row, in commit order as near as the table has it
     * (created_at, then event_version): what precedes it is not held. */
    char first_time[40];             /* ISO 8601, as the read-back gives created_at; "" unknown */
    long long first_version;
    int check_before;                /* held rows before the first FAILED one may be waiting */
    /* Its held rows go out once the checkpoint is here: every row of it
     * read before then is published, FAILED or held (a predecessor sent
     * again after a rewind goes first); after a restart, the log's end. */
    struct sc_binlog_pos settle_at;
    int settle_known;
    char *type, *id;
};

struct sc_binlog_held {
    struct sc_binlog_held_agg **bucket;
    size_t n_buckets, n;
};

void sc_binlog_held_free(struct sc_binlog_held *h);
/* Empties the set (kept allocated). */
void sc_binlog_held_clear(struct sc_binlog_held *h);
/* The aggregate's entry, or NULL. */
struct sc_binlog_held_agg *sc_binlog_held_find(const struct sc_binlog_held *h, const char *type, const char *id);
/* Adds the aggregate (failed as given, or kept when present). Returns its
 * entry, or NULL out of memory. */
struct sc_binlog_held_agg *sc_binlog_held_add(struct sc_binlog_held *h, const char *type, const char *id,
                                              int failed);
void sc_binlog_held_remove(struct sc_binlog_held *h, struct sc_binlog_held_agg *a);
/* A FAILED row of a's at (time, version): the first one moves back to it. */
void sc_binlog_held_failed_at(struct sc_binlog_held_agg *a, const char *time, long long version);
/* 1 when a row at (time, version) comes after a's first FAILED row (or
 * none is known: all of it is held). */
int sc_binlog_held_after(const struct sc_binlog_held_agg *a, const char *time, long long version);
/* Up to max entries into out, in bucket order (a sweep's snapshot: it may
 * remove them after). Returns how many. */
size_t sc_binlog_held_list(const struct sc_binlog_held *h, struct sc_binlog_held_agg **out, size_t max);

#endif
