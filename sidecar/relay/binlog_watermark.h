/* The binlog relay's watermark W (relay_checkpoint.published_created_before):
 * every outbox row created before W is published or FAILED. A sample
 * pairs a candidate W, below the start of every transaction and statement
 * open on the server, with E, the binary log's end read after them: once
 * the relay has settled everything up to E, every row created before W is
 * in a transaction it has settled. Pure: the samples' source is
 * binlog_source.c, the store binlog_checkpoint.c. */
#ifndef SC_BINLOG_WATERMARK_H
#define SC_BINLOG_WATERMARK_H

#include <stddef.h>
#include <stdint.h>

#include "binlog_tx.h"

#define SC_BINLOG_WM_SAMPLES 8
/* Taken off the sample's time besides the ages it read: one second for the
 * whole seconds the server reports those ages in, one for the time a
 * statement's UTC_TIMESTAMP(6) is read before its transaction starts in
 * InnoDB (opening the tables). */
#define SC_BINLOG_WM_MARGIN_S 2

struct sc_binlog_wm {
    struct {
        struct sc_binlog_pos end; /* the binary log's end, read after the ages */
        int64_t w_us;             /* the candidate, microseconds since the epoch (UTC) */
    } s[SC_BINLOG_WM_SAMPLES];
    int n;         /* samples waiting for a settled position at or past their end */
    int64_t ready; /* the highest W whose end is passed; 0: none */
};

/* 1 when a is past b in the binary log: file by file (a longer name is a
 * later file once the counter outgrows its padding), then the offset. No
 * position (an empty file) is before every other. */
int sc_binlog_pos_after(const struct sc_binlog_pos *a, const struct sc_binlog_pos *b);

/* The candidate of a sample: now_us less the oldest age (seconds) and the
 * margin. */
int64_t sc_binlog_wm_candidate(int64_t now_us, long long oldest_age_s);

/* Adds a sample (dropped when SC_BINLOG_WM_SAMPLES wait already: the older
 * ones are passed first, and W only waits longer). */
void sc_binlog_wm_add(struct sc_binlog_wm *w, const struct sc_binlog_pos *end, int64_t w_us);

/* Everything up to at is settled: the samples whose end it has reached
 * make their W ready. Returns the ready W (0: none). What is ready stays
 * ready when the stream goes back or the lease changes hands: it is true
 * of rows, not of positions. */
int64_t sc_binlog_wm_passed(struct sc_binlog_wm *w, const struct sc_binlog_pos *at);

/* "YYYY-MM-DD HH:MM:SS.ffffff" of us (UTC) into out; "" for 0. Parses the
 * same text back: 0 when it is not one. */
void sc_binlog_wm_format(int64_t us, char *out, size_t len);
int64_t sc_binlog_wm_parse(const char *s);

#endif
