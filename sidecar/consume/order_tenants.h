/* Per-key order with tenants: the decisions of an ordered consumer's loop
 * that serves a database per tenant, apart from its connections (the
 * simulation drives them too). A key is (tenant, key) (order.h). A tenant
 * whose database cannot be used has its deliveries blocked in hand: not
 * run, its keys' later events behind them, the other tenants' keys going
 * on. Past db_outage_hold_ms, or when the blocked deliveries fill half the
 * prefetch, every delivery of that tenant in hand goes round, oldest first,
 * through one delay queue, and so does every later delivery of the tenant
 * that is not its turn; ranks (sc_order_ring) decide the turn, so a key's
 * events are taken back in hand in the order they came. */
#ifndef SC_CONSUME_ORDER_TENANTS_H
#define SC_CONSUME_ORDER_TENANTS_H

#include <stdint.h>

#include "consume/order.h"
#include "io/sc_rabbitmq.h"

/* On a copy that went round for its tenant: "<worker mark>:<rank>", which
 * tells the worker's own copies from any other delivery. */
#define SC_H_TENANT_RETURN "x-sidecar-tenant-return"

/* Marks every slot blocked while down(ctx, its tenant) says its database
 * cannot be used (slots without a tenant never are), and when it was first
 * so. */
void sc_order_block(struct sc_order *o, int (*down)(void *ctx, const char *tenant), void *ctx,
                    int64_t now_ms);

/* How many slots are blocked. */
int sc_order_blocked(const struct sc_order *o);

/* A slot of the tenant whose deliveries in hand go round now: one blocked
 * for hold_ms, or, when more than cap are blocked, the oldest blocked one.
 * Returns its index, or -1 (none). */
int sc_order_return_due(const struct sc_order *o, int64_t now_ms, int hold_ms, int cap);

/* A tenant's copies gone round from one queue (a key keeps its queue).
 * Every delivery of the tenant taken in hand or sent round gets a rank,
 * in arrival order; a copy carries its rank. The ranks next..max are out,
 * and only rank next is taken in hand when it comes back: a copy of
 * another rank goes round once more, keeping its rank, until its turn. A
 * fresh delivery is taken only while nothing is out. Sending round the
 * deliveries in hand (the earliest) ranks them just below next. So the
 * tenant's deliveries from that queue are taken in hand in arrival order,
 * whatever the copies' order in the delay queue. */
struct sc_order_ring {
    char tag[128];    /* the queue's consumer tag */
    int64_t next;     /* the rank taken next */
    int64_t max;      /* the last rank given; next > max: nothing out */
};

/* The ring of consumer tag in rings[0..*n) (added if new, at most cap).
 * Returns it, or NULL (no room). */
struct sc_order_ring *sc_order_ring_of(struct sc_order_ring *rings, int *n, int cap,
                                       amqp_bytes_t tag);

/* Copies out, not back yet. */
int64_t sc_order_ring_out(const struct sc_order_ring *r);

/* A delivery arrives; rank: the rank of the worker's copy it is, or -1
 * (any other delivery); room: it may be taken in hand. Returns 1 when it
 * must go round (*rank gets the rank its copy carries), 0 when it is taken
 * in hand. */
int sc_order_ring_arrive(struct sc_order_ring *r, int64_t *rank, int room);

/* The ranks of k deliveries in hand sent round, oldest first: the first
 * gets the returned rank, each next one more. */
int64_t sc_order_ring_back(struct sc_order_ring *r, int k);

/* Keeps of the picked idx[0..n) those of the first one's tenant (one batch,
 * one database), in order. Returns how many. */
int sc_order_one_tenant(const struct sc_order *o, int *idx, int n);

struct worker;

/* The loop of an ordered consumer with tenants (order.h's in-hand set,
 * each batch one tenant's, in its database). Returns the deliveries
 * handled. */
long sc_consume_ordered_tenants(struct worker *w);

#endif
