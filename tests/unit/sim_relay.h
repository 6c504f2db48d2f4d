/* The relay simulation's world: a stand-in database (outbox rows with
 * status, lease_owner and lease_until, sessions that fail by error class),
 * a stand-in broker (one connection per relay, confirms that ack, nack,
 * return, come late or as `multiple`, connections that drop), simulated
 * time and one seeded PRNG. The relays are the real relay core
 * (sidecar/relay/relay_core.c and the files below it), driven through
 * struct sc_relay_ops. */
#ifndef SC_SIM_RELAY_H
#define SC_SIM_RELAY_H

#include <stdint.h>

#include "relay/relay_core.h"

#define SIM_MAX_RELAYS 3
#define SIM_MAX_ROWS 48
#define SIM_NEVER INT64_MAX

/* poison: the broker client refuses it; too large: above relay.max_message_bytes; broker: the
 * broker refuses it (above its max_message_size: it closes the channel) */
enum sim_kind { K_VALID, K_INVALID, K_POISON, K_TOO_LARGE, K_BROKER };
enum sim_status { S_PENDING, S_PUBLISHING, S_PUBLISHED, S_FAILED };

struct sim_row {
    char id[40];
    const char *atype, *aid, *etype, *payload;
    long long version;
    int kind, visible;
    int64_t insert_at;
    int status, owner; /* owner: relay index, -1 for none */
    int64_t lease_until;
    int marked_by;
    int64_t claimed_at[SIM_MAX_RELAYS], lease_set[SIM_MAX_RELAYS]; /* by that relay's last claim */
    int body_checked;
};

/* One message the broker received. */
struct sim_copy {
    int row, relay;
    int owned;  /* the relay held the row's lease when it published */
    int acked;  /* the broker's ack reached the relay's connection */
};

/* A confirm (and maybe a basic.return before it) still to arrive. */
struct sim_event {
    uint64_t seq;
    int copy;
    int ack;          /* 1 ack, 0 nack */
    int returned;     /* a basic.return comes first */
    int awaited;      /* published since the relay's last confirm wait ended */
    int64_t at;
};

/* The publishing channel: the broker closes it over a message it refuses
 * (the relay learns it at its next confirm wait) until the relay opens it
 * again. */
enum sim_channel { CH_OPEN, CH_CLOSING, CH_CLOSED };

struct sim_conn {
    int open, dead;
    enum sim_channel chan;
    char close_why[160];
    uint64_t next_seq;
    int64_t last_send, drop_at;
    struct sim_event *q;
    int nq, capq;
};

struct sim_world;

struct sim_relay {
    struct sim_world *w;
    int idx;
    char worker_id[16];
    struct sc_relay_core core;
    struct sc_relay_metrics m;
    int64_t clock, ready_at, pending_stall, last_stall;
    int stalled;                        /* a stall was drawn in this step */
    int db_open, db_broken;
    struct sim_conn amqp;
    unsigned long long told_published, told_failed, told_lost; /* what the database told it */
};

/* Which faults this run has (each enabled or not per seed, FoundationDB's
 * BUGGIFY way) and how often they fire. 0 everywhere in the quiet tail. */
struct sim_faults {
    double db, db_commit, db_connect, stall, amqp_connect, drop, late, nack, ret, multiple;
};

struct sim_stats {
    unsigned long long schedules, steps, configs_refused, rows, published, failed, lease_lost,
        nacked, returned, unconfirmed, refused, unknown_commits, db_faults, drops, stalls, late,
        multiple, reclaimed, ordered_schedules, ordered_publishes, held, broker_refusals, in_doubt,
        reopens, too_large;
};

struct sim_world {
    uint64_t seed, rng;
    uint64_t rng_order; /* relay.ordering and aggregates: a stream of its own, so that
                           --no-ordering replays every schedule as it was before it */
    uint64_t rng_size;  /* message sizes, relay.max_message_bytes, the broker's max_message_size
                           and its refusals: the same, for --no-large */
    int verbose, no_ordering, no_large;
    int per_aggregate;  /* relay.ordering "per_aggregate" */
    /* the config the real sc_config_parse accepted */
    int n_relays, batch, lease_ms, confirm_ms, poll_ms, heartbeat_ms, lock_wait_ms;
    int max_message_bytes; /* relay.max_message_bytes */
    int broker_max;        /* the broker's max_message_size; 0: none */
    struct sim_faults f, f_run;
    int64_t now, fault_end, deadline;
    int quiet;
    int n_rows, n_visible, unresolved;
    struct sim_row rows[SIM_MAX_ROWS];
    struct sim_relay relays[SIM_MAX_RELAYS];
    struct sim_copy *copies;
    int n_copies, cap_copies;
    char violation[600];
    struct sim_stats st;
};

extern const struct sc_relay_ops sim_ops;

uint64_t sim_rand(struct sim_world *w);
/* y comes before x in their aggregate's order (event_version, created_at,
 * event_id) */
int sim_before(const struct sim_row *y, const struct sim_row *x);
uint64_t sim_rand_order(struct sim_world *w);
/* The size stream's draws. */
int sim_size_chance(struct sim_world *w, double p);
int64_t sim_size_range(struct sim_world *w, int64_t lo, int64_t hi); /* inclusive */
int sim_chance(struct sim_world *w, double p);
int64_t sim_range(struct sim_world *w, int64_t lo, int64_t hi); /* inclusive */

/* Records the first violated invariant (later ones are consequences). */
void sim_violation(struct sim_world *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sim_trace(struct sim_world *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Frees what one schedule's broker connections and copies hold. */
void sim_world_release(struct sim_world *w);

#endif
