/* Folding a round's acks into one multiple ack (ack_plan.h). */
#include "consume/ack_plan.h"

#include <stdlib.h>
#include <string.h>

int sc_ack_plan_init(struct sc_ack_plan *p, int cap)
{
    memset(p, 0, sizeof *p);
    p->cap = cap > 0 ? cap : 1;
    p->beyond = calloc((size_t)p->cap, sizeof *p->beyond);
    return p->beyond ? 0 : -1;
}

void sc_ack_plan_free(struct sc_ack_plan *p)
{
    free(p->beyond);
    memset(p, 0, sizeof *p);
}

/* Inserts tag into the ascending list past the gap. */
static void keep_beyond(struct sc_ack_plan *p, uint64_t tag)
{
    if (tag <= p->settled_upto)
        return;
    if (p->n_beyond == p->cap) {
        p->lost = 1; /* the walk can no longer prove a range settled */
        return;
    }
    int i = p->n_beyond;
    while (i > 0 && p->beyond[i - 1] > tag) {
        p->beyond[i] = p->beyond[i - 1];
        i--;
    }
    if (i > 0 && p->beyond[i - 1] == tag) {
        memmove(&p->beyond[i], &p->beyond[i + 1], (size_t)(p->n_beyond - i) * sizeof *p->beyond);
        return;
    }
    p->beyond[i] = tag;
    p->n_beyond++;
}

/* Moves settled_upto over the tags past the gap that now join it. */
static void absorb(struct sc_ack_plan *p)
{
    int j = 0;
    while (j < p->n_beyond && p->beyond[j] == p->settled_upto + 1) {
        p->settled_upto++;
        j++;
    }
    if (j) {
        memmove(p->beyond, &p->beyond[j], (size_t)(p->n_beyond - j) * sizeof *p->beyond);
        p->n_beyond -= j;
    }
}

void sc_ack_plan_settled(struct sc_ack_plan *p, uint64_t tag)
{
    if (p->lost)
        return;
    keep_beyond(p, tag);
    absorb(p);
}

static int tag_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int sc_ack_plan_round(struct sc_ack_plan *p, uint64_t *acks, int n)
{
    qsort(acks, (size_t)n, sizeof *acks, tag_cmp);
    if (p->lost)
        return 0;
    /* Walk from the first tag not known settled while each next tag is one
     * of this round's acks or one settled past the gap. */
    int k = 0, j = 0;
    for (;;) {
        uint64_t next = p->settled_upto + 1;
        if (k < n && acks[k] == next) {
            k++;
        } else if (j < p->n_beyond && p->beyond[j] == next) {
            j++;
        } else {
            break;
        }
        p->settled_upto = next;
    }
    if (j) {
        memmove(p->beyond, &p->beyond[j], (size_t)(p->n_beyond - j) * sizeof *p->beyond);
        p->n_beyond -= j;
    }
    for (int i = k; i < n && !p->lost; i++)
        keep_beyond(p, acks[i]);
    if (!p->lost)
        absorb(p);
    return k;
}
