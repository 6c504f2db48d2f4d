/* The samplers' history ring (console_ring.h). */
#include "console_ring.h"

#include <stdlib.h>
#include <string.h>

int sc_console_ring_init(struct sc_console_ring *r, int cap, int n_series)
{
    memset(r, 0, sizeof *r);
    r->cap = cap;
    r->n_series = n_series;
    r->t = calloc((size_t)cap, sizeof *r->t);
    r->series = calloc((size_t)n_series + 1, sizeof *r->series);
    if (!r->t || !r->series)
        return -1;
    for (int i = 0; i < n_series; i++)
        if (!(r->series[i] = calloc((size_t)cap, sizeof **r->series)))
            return -1;
    return 0;
}

void sc_console_ring_free(struct sc_console_ring *r)
{
    for (int i = 0; r->series && i < r->n_series; i++)
        free(r->series[i]);
    free(r->series);
    free(r->t);
}

void sc_console_ring_push(struct sc_console_ring *r, int64_t t, const double *values)
{
    r->t[r->head] = t;
    for (int i = 0; i < r->n_series; i++)
        r->series[i][r->head] = values[i];
    r->head = (r->head + 1) % r->cap;
    if (r->len < r->cap)
        r->len++;
}

json_t *sc_console_ring_json(const struct sc_console_ring *r, const char *const *names)
{
    json_t *t = json_array(), *out = json_object();
    json_t **cols = calloc((size_t)r->n_series, sizeof *cols);
    if (!t || !out || !cols) {
        json_decref(t);
        json_decref(out);
        free(cols);
        return NULL;
    }
    for (int i = 0; i < r->n_series; i++)
        cols[i] = json_array();
    for (int k = 0; k < r->len; k++) {
        int at = (r->head - r->len + k + r->cap) % r->cap;
        json_array_append_new(t, json_integer(r->t[at]));
        for (int i = 0; i < r->n_series; i++) {
            double v = r->series[i][at];
            json_array_append_new(cols[i], v < 0 ? json_null() : json_real(v));
        }
    }
    json_object_set_new(out, "t", t);
    for (int i = 0; i < r->n_series; i++)
        json_object_set_new(out, names[i], cols[i]);
    free(cols);
    return out;
}
