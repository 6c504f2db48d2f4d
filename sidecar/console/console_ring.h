/* An hour of the samplers' points for the page's charts: a fixed ring of
 * timestamps and series, the oldest point overwritten first. It has no
 * lock of its own: the sampler's lock guards its pushes and reads. */
#ifndef SC_CONSOLE_RING_H
#define SC_CONSOLE_RING_H

#include <jansson.h>
#include <stdint.h>

struct sc_console_ring {
    int cap, head, len;      /* head: the next slot written */
    int64_t *t;              /* wall clock, ms */
    double **series;         /* n_series arrays of cap values; NaN-free: -1 means none */
    int n_series;
};

/* 0, or -1 when out of memory (what was allocated is freed by _free). */
int sc_console_ring_init(struct sc_console_ring *r, int cap, int n_series);
void sc_console_ring_free(struct sc_console_ring *r);

/* Appends one point (values has n_series entries). */
void sc_console_ring_push(struct sc_console_ring *r, int64_t t, const double *values);

/* The ring's points oldest first: {"t": [...], names[i]: [...]}; a value
 * of -1 is null (not known at that sample). NULL when out of memory. */
json_t *sc_console_ring_json(const struct sc_console_ring *r, const char *const *names);

#endif
