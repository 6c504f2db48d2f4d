/* A consume worker's tenant sessions and the deliveries it keeps in hand
 * for tenants whose database cannot be used now. Sessions open on first
 * use and close after tenants.idle_close_ms unused; at most cap are open
 * (tenants.max_connections shared out among the process's workers), the
 * least recently used closed first. A tenant whose session could not be
 * made, or was lost, is down until its backoff passes: its deliveries are
 * parked (at most park_cap per worker, each for at most db_outage_hold_ms),
 * then run again; past either bound they go back to the broker through the
 * consumer's delay queue, their attempt count unchanged. */
#ifndef SC_CONSUME_TENANT_POOL_H
#define SC_CONSUME_TENANT_POOL_H

#include <regex.h>
#include <stdint.h>

#include "config.h"
#include "consume/ack_plan.h"
#include "consume/order_tenants.h"
#include "io/db.h"
#include "io/sc_rabbitmq.h"

struct worker;

struct sc_tenant_session {
    char name[SC_TENANT_MAX + 1];
    char **urls;               /* tenants.database_url with the name in it */
    size_t n_urls;
    struct sc_db db;           /* open when db.conn */
    int64_t last_use_ms;
    int64_t retry_at_ms;       /* down: not tried again before then (0: up) */
    unsigned failures;         /* opens or batches in a row that lost the session */
    char last_error[256];      /* why it is down */
    struct sc_order_ring *rings; /* ordered: its copies gone round, per queue */
    int n_rings;
    int group_mark;            /* its group number in the batch being grouped ... */
    unsigned group_round;      /* ... valid while this equals the worker's group_round */
    int g_parked;              /* its deliveries waiting in hand (parked, or an ordered
                                  consumer's slots) as this worker last counted them in the
                                  consumer's waiting-by-tenant series */
    int parked_now;            /* scratch of that count */
};

/* A delivery kept in hand for a down tenant. */
struct sc_parked {
    amqp_envelope_t env;
    int64_t received_us;
    int64_t since_ms;          /* first parked */
    int session;               /* index in sessions */
};

struct sc_tenant_worker {
    regex_t names;
    struct sc_tenant_session *sessions;
    int n_sessions, sessions_cap;
    int open, open_cap;
    struct sc_parked *parked;
    int n_parked, park_cap;
    int64_t last_sweep_ms;
    unsigned group_round;      /* bumped per grouping (tenant_loop.c) */
    int g_sessions, g_down, g_waiting; /* this worker's part of the tenant gauges */
    char return_mark[64];      /* ordered: this worker's mark on copies gone round */
    struct sc_db copies_db;    /* ordered: mysql.url's database, the copies' rows */
    int64_t copies_retry_ms;   /* it failed: not tried again before then */
    int copies_warned;         /* its failure was logged (until it works again) */
    unsigned copies_loads;     /* rings read back: each gets a mark of its own */
    uint64_t *acks;            /* a round's acks, sent in tag order at its end */
    int n_acks, acks_cap;
    struct sc_ack_plan plan;   /* unordered: what is settled, to fold the acks */
    int fold;                  /* 1: the round's acks fold (the plan sees every settling) */
};

/* 1 while session i has copies gone round that are not back. */
int sc_tenant_rings_out(const struct sc_tenant_session *s);

/* Sets up w->tenant. Returns 0, or -1 (out of memory, a pattern that does
 * not compile: the config check makes that impossible). */
int sc_tenant_worker_init(struct worker *w, int total_workers);

/* Closes every session; the parked deliveries are dropped (the broker
 * returns them with the channel). */
void sc_tenant_worker_free(struct worker *w);

/* The index of tenant name's session entry (made if new), or -1 (out of
 * memory). */
int sc_tenant_session_of(struct worker *w, const char *name);

/* 1 while session i is down (its backoff has not passed). */
int sc_tenant_down(const struct worker *w, int i, int64_t now_ms);

/* Moves session i's database session into w->db, opening it if needed
 * (closing the least recently used one at the cap). Returns 1 when it was
 * opened now, 0 when it was open, -1 when it could not be made (the
 * tenant is down: e says why). */
int sc_tenant_enter(struct worker *w, int i, struct sc_db_err *e);

/* Moves w->db back into session i; lost: the session is gone or unusable
 * (closed, the tenant down with backoff, e says why), else the tenant is
 * up. */
void sc_tenant_leave(struct worker *w, int i, int lost, const struct sc_db_err *e);

/* Keeps the ack of delivery tag for the end of the round. Returns 0, or
 * -1 when it must be sent now (no room). */
int sc_tenant_ack_defer(struct worker *w, uint64_t tag);

/* Tag was acked or nacked alone, now (not at the round's end). */
void sc_tenant_settled(struct worker *w, uint64_t tag);

/* Sends the round's acks in ascending tag order: the broker's queue
 * settles acks in delivery order far faster than tenant by tenant (3.8x
 * for 20,000 messages with 200 tenants on RabbitMQ 3.10). Returns 0, or -1
 * (the session must be reset; the broker redelivers what was not acked,
 * and those repeats are duplicates). */
int sc_tenant_ack_flush(struct worker *w);
/* Those acks are folded into one ack with `multiple` up to the last tag
 * before the first delivery still in hand (ack_plan.h): one frame a round
 * while every tenant is up. */

/* Closes the sessions unused for tenants.idle_close_ms (at most once a
 * second). */
void sc_tenant_sweep(struct worker *w, int64_t now_ms);

/* Moves this worker's part of the tenant gauges to what it holds now (0
 * everywhere when gone). The deliveries waiting in hand for a tenant whose
 * database cannot be used are the parked ones and, for an ordered
 * consumer, the slots of o (NULL: none) whose tenant's last try failed
 * (down, or due to be tried again). */
void sc_tenant_gauges(struct worker *w, int gone, const struct sc_order *o);

/* The earliest time a down tenant with parked deliveries may be tried
 * again, or INT64_MAX. */
int64_t sc_tenant_next_retry_ms(const struct worker *w);

#endif
