/* Per-key order (consumers[].ordering): the deliveries a worker holds in
 * hand, in arrival order, and which of them may run now. A key's deliveries
 * run one at a time, oldest first: a delivery runs only when no earlier one
 * of its key is still in hand (unresolved: running, waiting out an in-place
 * retry), so a later event of a key is never committed before an earlier
 * one. Different keys run side by side in one batch. One exception: while
 * a held key's replay is in flight, its deliveries that wait in hand for it
 * (consume/held.h) let a later copy carrying a replay token go first: only
 * the replay's copy of the key's first held event is run (the held check
 * refuses any other), and every event in hand that is not a copy came after
 * the key's held events.
 *
 * The in-hand set is bounded by the broker: prefetch unacked deliveries per
 * queue the worker consumes. When one key's head keeps failing and its later
 * events fill the prefetch, the broker stops delivering and the worker's
 * queues stall until the head is resolved (applied, or dead-lettered at
 * max_attempts). */
#ifndef SC_CONSUME_ORDER_H
#define SC_CONSUME_ORDER_H

#include <stdint.h>

#include "config.h"
#include "io/sc_rabbitmq.h"

/* The longest key: consumer_held_key.order_key is VARCHAR(255). */
#define SC_ORDER_KEY_MAX 255

/* What an ordered consumer does with a delivery, read before it runs. */
enum sc_order_kind {
    SC_ORDER_KEYED,   /* key set: in order with the other events of its key */
    SC_ORDER_UNKEYED, /* no key (why set): dead-lettered with why, never run */
    SC_ORDER_OPEN,    /* malformed as a message: the batch dead-lettered it (no key needed) */
};

/* The ordering key of a delivery for consumer k (k->ordering.present):
 * `subject`, or the string or number at the pointer into `data` (a number as
 * written). Returns the kind; key gets the key (NUL-terminated) when keyed,
 * why the reason when unkeyed. A batch-mode message is unkeyed: an ordered
 * consumer takes one event per message. */
enum sc_order_kind sc_order_key(const struct sc_consumer_config *k, const amqp_envelope_t *env,
                                char *key, size_t key_cap, char *why, size_t why_len);

/* The same, with the event's id (id: 37 bytes) when keyed. */
enum sc_order_kind sc_order_key_id(const struct sc_consumer_config *k, const amqp_envelope_t *env,
                                   char *key, size_t key_cap, char *id, char *why, size_t why_len);

/* The headers `sidecar dlq replay --key` puts on its copies (the key; the
 * replay's token, which the consumer matches against the key's current
 * replay), and the one numbering a key's dead letters in arrival order
 * while it is held. */
#define SC_H_REPLAY_KEY "x-sidecar-replay-key"
#define SC_H_REPLAY_TOKEN "x-sidecar-replay-token"
#define SC_H_HOLD_SEQ "x-sidecar-hold-seq"
/* How often a held event went round to the end of the stream behind its
 * key's replay; past SC_REPLAY_ROUNDS it waits in the DLQ instead (the
 * event it waits for may be lost). */
#define SC_H_REPLAY_ROUND "x-sidecar-replay-round"
#define SC_REPLAY_ROUNDS 20
/* A held key's delivery waits in hand for its key's replay while the
 * replay applies one of the key's copies at least every SC_REPLAY_WAIT_MS,
 * and is checked again every SC_REPLAY_POLL_MS meanwhile. */
#define SC_REPLAY_WAIT_MS 2000
#define SC_REPLAY_POLL_MS 1000

/* One delivery in hand. */
struct sc_order_slot {
    amqp_envelope_t env;
    int64_t received_us;
    enum sc_order_kind kind;
    uint64_t hash;          /* of key */
    char key[SC_ORDER_KEY_MAX + 1];
    char why[256];          /* SC_ORDER_UNKEYED */
    char id[37];            /* SC_ORDER_KEYED: its event's id */
    char replay_token[37];  /* x-sidecar-replay-token (sidecar dlq replay --key), "" if none */
    int in_place;           /* attempts it spent in hand (retries in place) */
    int64_t due_ms;         /* not before (an in-place retry's delay) */
    int64_t wait_ms;        /* waits in hand for its key's replay until then (0: does not) */
    int64_t wait_since_ms;  /* its wait began, or the replay last applied one of its key's
                               copies */
    int waited;             /* it waited (wait_since_ms is set) */
    /* tenants: its tenant ("" without); its key is (tenant, key), hash too */
    char tenant[SC_TENANT_MAX + 1];
    char named[SC_TENANT_MAX + 1]; /* dead-lettered unrun, without a database (no key, a
                                      batch-mode or malformed message): the tenant its
                                      dead letter names, "" when unknown */
    int copy;               /* tenants: a copy that went round, whose row in
                               consumer_tenant_copy goes once it is resolved */
    int blocked;            /* its tenant's database cannot be used now: not picked */
    int64_t blocked_since_ms; /* blocked since (0: not blocked) */
};

/* The last eventversion applied per key, for the most recent keys: a
 * direct-mapped table by the key's 64-bit hash (a key whose entry another
 * took is simply not checked next time). */
#define SC_ORDER_VERSIONS 4096
struct sc_order_version {
    uint64_t hash;          /* 0: empty */
    int64_t version;
};

/* The deliveries in hand, oldest first. */
struct sc_order {
    struct sc_order_slot *slots;
    int n, cap;
    int queue_cap;          /* the most in hand from one queue (its prefetch; cap when 0) */
    int *seen;              /* pick()'s hash set of keys: seen_cap slot indexes, -1 empty */
    unsigned char *seen_mode; /* per entry of seen: how far pick() got with that key */
    int seen_cap;
    struct sc_order_version *versions; /* SC_ORDER_VERSIONS */
};

/* An event of key hash was applied with this eventversion: 0 when it is
 * the key's last + 1 or the key is not remembered, 1 for a gap (higher),
 * -1 for a regression (not higher); *last gets the version remembered.
 * Either way the key now remembers this one. */
int sc_order_version(struct sc_order *o, uint64_t hash, int64_t version, int64_t *last);

struct worker;

/* ordered.c: takes what the broker has into o (up to batch_max, waiting
 * up to timeout_ms for the first), each classified, then given to take
 * when not NULL (1: take disposed of it; -1: end the session). Returns 0,
 * or -1 when the session must end. */
int sc_order_gather(struct worker *w, struct sc_order *o, int timeout_ms,
                    int (*take)(struct worker *, struct sc_order_slot *, void *), void *arg);

/* ordered.c: after a batch of the picked slots idx[0..n) (w->dls), counts
 * and logs each applied event whose eventversion is not its key's last + 1. */
void sc_order_check_versions(struct worker *w, struct sc_order *o, const int *idx, int n);

/* Room for cap deliveries. Returns 0, or -1 (out of memory). */
int sc_order_init(struct sc_order *o, int cap);
void sc_order_free(struct sc_order *o);

/* The slot a new delivery goes in (the caller fills env, then calls
 * sc_order_keyed), or NULL when cap are in hand. */
struct sc_order_slot *sc_order_add(struct sc_order *o);

/* Sets the slot's kind, key and hash from its delivery. */
void sc_order_classify(const struct sc_consumer_config *k, struct sc_order_slot *s);

/* The hash of a key (FNV-1a). */
uint64_t sc_order_hash(const char *key);

/* The hash of key under tenant ("" or NULL: none, the key's own hash). */
uint64_t sc_order_tenant_hash(const char *tenant, const char *key);

/* Puts keyed slot s under tenant: one tenant's key is never another's. */
void sc_order_set_tenant(struct sc_order_slot *s, const char *tenant);

/* Picks up to max slots that may run now: at most one per key, the oldest
 * of its key in hand, and only once its delay is over and it is not
 * blocked (a blocked slot keeps its key's later slots back too); behind slots of its
 * key that wait for the key's replay, the first later copy with a replay
 * token that does not wait. Fills idx with slot indexes in arrival order;
 * returns how many. *next_due_ms gets the earliest time a waiting head
 * becomes due (INT64_MAX: none waits). */
int sc_order_pick(struct sc_order *o, int64_t now_ms, int max, int *idx, int64_t *next_due_ms);

/* 1 while slot i waits in hand for its key's replay: its wait is not over
 * and sc_order_may_wait. */
int sc_order_waits(const struct sc_order *o, int i, int64_t now_ms);

/* 1 when slot i may wait in hand for its key's replay: its queue has room
 * for more (a queue whose prefetch is in hand sends nothing more), or a copy
 * of its key that could go past it is in hand already. */
int sc_order_may_wait(const struct sc_order *o, int i, int64_t now_ms);

/* 1 when the queue slot i came from has room for more than one more
 * delivery. */
int sc_order_room(const struct sc_order *o, int i);

/* Removes slot i (its envelope is the caller's to destroy first), keeping
 * the order of the rest. */
void sc_order_remove(struct sc_order *o, int i);

struct delivery;

/* After a batch of the picked slots idx[0..n) ran as dls[0..n): a delivery
 * the batch kept stays in hand, in its place, due again_ms from now (one
 * more attempt spent when it was a retry); every other one is settled with
 * the broker and leaves (drop gets its envelope). Slots waiting for their
 * key's replay learn of it: a replayed copy of their key applied renews
 * their wait; one that freed the key, or any delivery of their key that was
 * not applied (the replay may have ended), has them checked again now. */
void sc_order_after(struct sc_order *o, const int *idx, const struct delivery *dls, int n,
                    int64_t now_ms, void (*drop)(amqp_envelope_t *env));

/* Copies the picked slots into the batch's deliveries. */
void sc_order_batch(const struct sc_order *o, const int *idx, int n, struct delivery *dls);

#endif
