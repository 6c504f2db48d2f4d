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
#define SC_RING_BASE ((int64_t)1 << 40)

struct sc_order_ring {
    char tag[128];    /* the queue's consumer tag */
    int64_t next;     /* the rank taken next */
    int64_t max;      /* the last rank given; next > max: nothing out */
    /* Kept across restarts: each copy out has a row in mysql.url's database
     * (consumer_tenant_copy), written before it is published and deleted
     * once its event is resolved; a process that consumes the queue reads
     * them back before it takes the tenant's deliveries. */
    char queue[256];  /* the queue's name, its rows' */
    char mark[97];    /* on the ring's copies: "<mark>:<rank>" */
    int loaded;       /* its rows were read since the queue was consumed */
    int64_t load_after_ms; /* a failed read is tried again then */
    int64_t next_since_ms; /* next last moved */
    struct sc_ring_recovered *recovered; /* rows read back, not seen since */
    int n_recovered;
};

/* A copy read back by its event id: an original redelivered after a crash
 * between writing its row and acking it carries no rank of this ring. */
struct sc_ring_recovered {
    char id[37];
    int64_t rank;
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

struct sc_copy_row;

/* A ring's rows read back (rows[0..n), rank first) numbered anew for
 * adopting them: ranks SC_RING_BASE.., in their order, under mark (a mark
 * of this process's, new at every reading back). The caller writes them
 * back so (all in one transaction), then adopts them. Copies whose header
 * carries an older mark are known by their event id only. */
void sc_order_rows_renumber(struct sc_copy_row *rows, int n, const char *mark);

/* The ring's copies out are the rows (renumbered), under mark: next is the
 * first of them (no row: nothing out). Returns 0, or -1 (out of memory: the
 * ring is left as it was). */
int sc_order_ring_adopt(struct sc_order_ring *r, const struct sc_copy_row *rows, int n,
                        const char *mark, int64_t now_ms);

/* The rank of event id when it is a copy read back and not seen since
 * (*rank set, 1), else 0. Read-back copies below next are dropped first:
 * they were taken. */
int sc_order_ring_recovered(struct sc_order_ring *r, const char *id, int64_t *rank);

/* Gives up on rank next when it has not come back for lost_ms (a copy
 * lost with a deleted queue, or a row its resolution did not delete):
 * returns the rank given up (next moves on), or -1. */
int64_t sc_order_ring_lost(struct sc_order_ring *r, int64_t now_ms, int64_t lost_ms);

/* Frees what the rings hold (not the array). */
void sc_order_rings_clear(struct sc_order_ring *rings, int n);

/* Keeps of the picked idx[0..n) those of the first one's tenant (one batch,
 * one database), in order. Returns how many. */
int sc_order_one_tenant(const struct sc_order *o, int *idx, int n);

struct worker;

/* The loop of an ordered consumer with tenants (order.h's in-hand set,
 * each batch one tenant's, in its database). Returns the deliveries
 * handled. */
long sc_consume_ordered_tenants(struct worker *w);

#endif
