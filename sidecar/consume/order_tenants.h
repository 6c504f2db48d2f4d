/* Per-key order with tenants: the decisions of an ordered consumer's loop
 * that serves a database per tenant, apart from its connections (the
 * simulation drives them too). A key is (tenant, key) (order.h). A tenant
 * whose database cannot be used has its deliveries blocked in hand: not
 * run, its keys' later events behind them, the other tenants' keys going
 * on. Past db_outage_hold_ms, or when the blocked deliveries fill half the
 * prefetch, every delivery of that tenant in hand goes round, oldest first,
 * through one delay queue (one TTL: they come back in the order they left),
 * and every later delivery of the tenant follows them until the last copy
 * is back: a key's events come back in the order they came. */
#ifndef SC_CONSUME_ORDER_TENANTS_H
#define SC_CONSUME_ORDER_TENANTS_H

#include <stdint.h>

#include "consume/order.h"

/* On a copy that went round for its tenant: the worker's mark, which tells
 * its own copies (counted out) from any other delivery. */
#define SC_H_TENANT_RETURN "x-sidecar-tenant-return"

/* Marks every slot blocked while down(ctx, its tenant) says its database
 * cannot be used (slots without a tenant never are), and when it was first
 * so. */
void sc_order_block(struct sc_order *o, int (*down)(void *ctx, const char *tenant), void *ctx,
                    int64_t now_ms);

/* A slot of the tenant whose deliveries in hand go round now: one blocked
 * for hold_ms, or, when more than cap are blocked, the oldest blocked one.
 * Returns its index, or -1 (none). */
int sc_order_return_due(const struct sc_order *o, int64_t now_ms, int hold_ms, int cap);

/* A delivery of a tenant arrives while *out copies of this worker are out
 * for that tenant; copy: it is one of them. Returns 1 when it must go round
 * too, behind them (the caller counts it out), 0 when it is taken in hand
 * (a copy: one fewer out). */
int sc_order_follows(int *out, int copy);

/* Keeps of the picked idx[0..n) those of the first one's tenant (one batch,
 * one database), in order. Returns how many. */
int sc_order_one_tenant(const struct sc_order *o, int *idx, int n);

struct worker;

/* The loop of an ordered consumer with tenants (order.h's in-hand set,
 * each batch one tenant's, in its database). Returns the deliveries
 * handled. */
long sc_consume_ordered_tenants(struct worker *w);

#endif
