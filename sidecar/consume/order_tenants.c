/* Per-key order with tenants: blocking, going round and following
 * (order_tenants.h). */
#include "consume/order_tenants.h"

#include <string.h>

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

int sc_order_follows(int *out, int copy)
{
    if (copy && *out > 0) {
        (*out)--;
        return 0;
    }
    return !copy && *out > 0;
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
