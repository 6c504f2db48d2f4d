/* Per-key order with tenants: blocking, going round and following
 * (order_tenants.h). */
#include "consume/order_tenants.h"

#include <stdlib.h>
#include <string.h>

#include "io/db_copies.h"

void sc_order_block(struct sc_order *o, int (*down)(void *ctx, const char *tenant), void *ctx,
                    int64_t now_ms)
{
    for (int i = 0; i < o->n; i++) {
        struct sc_order_slot *s = &o->slots[i];
        s->blocked = s->tenant[0] && down(ctx, s->tenant);
        if (!s->blocked)
            s->blocked_since_ms = 0;
        else if (!s->blocked_since_ms)
            s->blocked_since_ms = now_ms;
    }
}

int sc_order_blocked(const struct sc_order *o)
{
    int n = 0;
    for (int i = 0; i < o->n; i++)
        n += o->slots[i].blocked;
    return n;
}

int sc_order_return_due(const struct sc_order *o, int64_t now_ms, int hold_ms, int cap)
{
    int blocked = 0, oldest = -1;
    for (int i = 0; i < o->n; i++) {
        const struct sc_order_slot *s = &o->slots[i];
        if (!s->blocked)
            continue;
        if (now_ms - s->blocked_since_ms >= hold_ms)
            return i;
        if (oldest < 0)
            oldest = i; /* the slots are in arrival order */
        blocked++;
    }
    return blocked > cap ? oldest : -1;
}

struct sc_order_ring *sc_order_ring_of(struct sc_order_ring *rings, int *n, int cap,
                                       amqp_bytes_t tag)
{
    size_t len = tag.len < sizeof rings->tag ? tag.len : sizeof rings->tag - 1;
    for (int i = 0; i < *n; i++)
        if (strlen(rings[i].tag) == len && memcmp(rings[i].tag, tag.bytes, len) == 0)
            return &rings[i];
    if (*n >= cap)
        return NULL;
    struct sc_order_ring *r = &rings[(*n)++];
    memset(r, 0, sizeof *r);
    memcpy(r->tag, tag.bytes, len);
    /* Nothing out: next = max + 1. Ranks start high, since deliveries in
     * hand sent round are ranked below next: a rank is never negative (-1
     * says "no copy"). */
    r->max = SC_RING_BASE - 1;
    r->next = SC_RING_BASE;
    return r;
}

int64_t sc_order_ring_out(const struct sc_order_ring *r)
{
    return r->max - r->next + 1;
}

int sc_order_ring_arrive(struct sc_order_ring *r, int64_t *rank, int room)
{
    if (*rank < 0) {
        int nothing_out = r->next > r->max;
        *rank = ++r->max;
        if (nothing_out && room) {
            r->next = r->max + 1;
            return 0;
        }
        return 1; /* behind what is out */
    }
    if (*rank < r->next || *rank > r->max)
        return 0; /* a repeat of one taken already (or of no ring of ours now) */
    if (*rank == r->next && room) {
        r->next++;
        return 0;
    }
    return 1; /* not its turn: round once more, its rank kept */
}

int64_t sc_order_ring_back(struct sc_order_ring *r, int k)
{
    r->next -= k;
    return r->next;
}

int sc_order_one_tenant(const struct sc_order *o, int *idx, int n)
{
    if (n == 0)
        return 0;
    const char *t = o->slots[idx[0]].tenant;
    int m = 0;
    for (int j = 0; j < n; j++)
        if (strcmp(o->slots[idx[j]].tenant, t) == 0)
            idx[m++] = idx[j];
    return m;
}

void sc_order_rows_renumber(struct sc_copy_row *rows, int n, const char *mark)
{
    for (int i = 0; i < n; i++) {
        rows[i].rank = SC_RING_BASE + i;
        snprintf(rows[i].mark, sizeof rows[i].mark, "%s", mark);
    }
}

int sc_order_ring_adopt(struct sc_order_ring *r, const struct sc_copy_row *rows, int n,
                        const char *mark, int64_t now_ms)
{
    struct sc_ring_recovered *v = n ? calloc((size_t)n, sizeof *v) : NULL;
    if (n && !v)
        return -1;
    for (int i = 0; i < n; i++) {
        snprintf(v[i].id, sizeof v[i].id, "%s", rows[i].event_id);
        v[i].rank = rows[i].rank;
    }
    free(r->recovered);
    r->recovered = v;
    r->n_recovered = n;
    snprintf(r->mark, sizeof r->mark, "%s", mark);
    r->next = SC_RING_BASE;
    r->max = SC_RING_BASE + n - 1;
    r->next_since_ms = now_ms;
    return 0;
}

int sc_order_ring_recovered(struct sc_order_ring *r, const char *id, int64_t *rank)
{
    int found = 0, m = 0;
    for (int i = 0; i < r->n_recovered; i++) {
        struct sc_ring_recovered *c = &r->recovered[i];
        if (!found && strcmp(c->id, id) == 0) {
            found = 1;
            *rank = c->rank;
            continue;
        }
        if (c->rank >= r->next)
            r->recovered[m++] = *c;
    }
    r->n_recovered = m;
    return found;
}

int64_t sc_order_ring_lost(struct sc_order_ring *r, int64_t now_ms, int64_t lost_ms)
{
    if (r->next > r->max || now_ms - r->next_since_ms < lost_ms)
        return -1;
    r->next_since_ms = now_ms;
    return r->next++;
}

void sc_order_rings_clear(struct sc_order_ring *rings, int n)
{
    for (int i = 0; i < n; i++) {
        free(rings[i].recovered);
        rings[i].recovered = NULL;
        rings[i].n_recovered = 0;
    }
}
