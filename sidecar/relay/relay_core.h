/* The relay's state machine: claim a batch under a lease, build and send
 * its messages, collect the broker's confirms, mark the acked rows
 * PUBLISHED and the unpublishable ones FAILED, while the next batch is
 * claimed as the previous one's confirms travel.
 *
 * Every database statement and broker call goes through struct
 * sc_relay_ops, so the same code runs against MariaDB and RabbitMQ
 * (relay.c) and against the stand-ins of the simulation
 * (tests/unit/sim_relay.c). Each call of sc_relay_step() runs one phase,
 * and only the confirm wait waits: one wait, or (a batch sent in waves,
 * below) several within one confirm_timeout_ms, as the phase's last work. */
#ifndef SC_RELAY_CORE_H
#define SC_RELAY_CORE_H

#include <stdint.h>

#include "io/amqp_conn.h"
#include "io/db.h"
#include "metrics.h"

#define SC_RELAY_WHY_MAX 256
#define SC_RELAY_POLL_MIN_MS 5
/* The most AMQP headers one message carries (binary mode's attributes and
 * room for more). */
#define SC_RELAY_HEADERS_MAX 16
/* A message whose body is larger goes out alone: sent once every confirm
 * before it is in, nothing sent after it until its own. A broker that
 * refuses it (above its max_message_size) closes the channel and confirms
 * nothing more, so a batch-mate sent with it would be in doubt and
 * published twice; alone, the close names it. One frame of the 128 KiB the
 * relay's connections negotiate: smaller messages stay pipelined. */
#define SC_RELAY_LONE_BYTES (128 * 1024)

/* A row's state in its batch. Set only by the core's row_to(), which checks
 * the transition; the terminal states say what happens to the row next. */
enum sc_relay_row_state {
    SC_ROW_CLAIMED = 0, /* leased to this relay, nothing sent */
    SC_ROW_INVALID,     /* breaks an envelope rule or was refused by the broker
                           client: to be marked FAILED (why says which) */
    SC_ROW_REFUSED,     /* basic.publish refused it before sending: the row's
                           own fault only if the connection proves alive */
    SC_ROW_SENT,        /* basic.publish sent, confirm outstanding */
    SC_ROW_RESEND,      /* sent, then the broker closed the channel over a message of its
                           wave before confirming it: sent again (alone) this round */
    SC_ROW_ACKED,       /* the broker acked it: to be marked PUBLISHED */
    SC_ROW_HOLD,        /* its aggregate is held behind a FAILED row (binlog): to be marked held */
    /* terminal */
    SC_ROW_PUBLISHED,   /* marked PUBLISHED under this relay's lease */
    SC_ROW_FAILED,      /* marked FAILED under this relay's lease */
    SC_ROW_LEASE_LOST,  /* another relay owns the row now: left alone */
    SC_ROW_NACKED,      /* the broker nacked it: published again after the lease */
    SC_ROW_RETURNED,    /* unroutable (basic.return): again after the lease */
    SC_ROW_UNCONFIRMED, /* no confirm in time, or the connection failed */
    SC_ROW_UNSENT,      /* never sent (no broker connection): after the lease */
    SC_ROW_LEFT,        /* its mark could not be written: after the lease */
    SC_ROW_HELD,        /* marked held: published once its aggregate has no FAILED row */
    SC_ROW_STATES
};

const char *sc_relay_row_state_name(enum sc_relay_row_state s);

/* Why a row is marked FAILED: its log line says which. */
enum sc_relay_fail_cause {
    SC_FAIL_RULE = 0,  /* breaks an envelope rule (outbox_rules.h) */
    SC_FAIL_TOO_LARGE, /* its message is above relay.max_message_bytes: never sent */
    SC_FAIL_CLIENT,    /* the broker client (rabbitmq-c) refused to send it */
    SC_FAIL_BROKER,    /* the broker refused it (a channel close naming it, 406) */
};

struct sc_relay_row {
    /* filled by the claim (strings malloc'd; the core frees them) */
    char event_id[37];
    char *aggregate_type, *aggregate_id, *event_type, *payload;
    char time[40];
    long long version;
    char traceparent[56];  /* W3C trace context, empty when the row has none */
    char *tracestate;      /* NULL when none */
    /* filled by a claim with tenants (relay_tenants.c), else NULL and 0 */
    const char *tenant;    /* its tenant's name: the CloudEvents extension `tenant` */
    int source;            /* its tenant's index in tenants.list */
    int released;          /* binlog: a held row sent after its aggregate's repair, PUBLISHED a write */
    /* the relay's */
    enum sc_relay_row_state state;
    enum sc_relay_fail_cause cause; /* SC_ROW_INVALID: which kind of reason */
    char why[SC_RELAY_WHY_MAX];   /* SC_ROW_INVALID: the reason */
    char *body;                   /* the CloudEvents JSON (structured mode) */
    int64_t built_us;             /* sc_now_us() when its message was built (its span's start) */
    amqp_basic_properties_t props;
    /* props.headers points here: x-ordering-key, and in binary mode the
     * attributes */
    amqp_table_entry_t headers[SC_RELAY_HEADERS_MAX];
};

/* One claimed batch, from its claim to its last mark. Its messages go out
 * in waves, in order: a wave is the messages up to the next one larger than
 * SC_RELAY_LONE_BYTES, or that one alone, or (probing) one to send again;
 * the next wave is sent when every confirm of the last is in. */
struct sc_relay_batch {
    struct sc_relay_row *rows;
    struct sc_publish *msgs; /* the messages built, msgs[k] of rows[msg_row[k]] */
    int *msg_row;
    struct sc_publish *wave; /* the wave on the channel: copies of msgs[wave_msg[j]] */
    int *wave_msg;
    int n, n_msgs, n_wave;
    int refused;                 /* rows in SC_ROW_REFUSED */
    int probing;                 /* a close blamed none of several: send them again one by one */
    int alive_after;             /* its confirms were collected without a connection failure */
    int64_t lease_end;           /* ops->now_ms before the claim + lease_ms: the lease
                                    ends no earlier than this */
    int64_t sent_at;
};

/* The seams. Database calls return 0 (or a count), or -1 with e filled:
 * e->cls is the class the core acts on. A class it does not know is a
 * failure. Broker calls return 0, or -1 with err filled. */
struct sc_relay_ops {
    int (*db_open)(void *io, struct sc_db_err *e);
    void (*db_close)(void *io);
    int (*db_is_open)(void *io);
    /* Claims up to max rows (expired leases first, then PENDING) under this
     * relay's lease and commits. Returns the number claimed into rows[]. */
    int (*claim)(void *io, struct sc_relay_row *rows, int max, struct sc_db_err *e);
    /* Marks rows[0..n) PUBLISHED where this relay still holds the lease,
     * and commits; marked[i] = 1 for the rows it changed, 0 for the rows
     * another relay owns now. */
    int (*mark_published)(void *io, struct sc_relay_row *const *rows, int n, unsigned char *marked,
                          struct sc_db_err *e);
    /* Marks one row FAILED where this relay still holds the lease, and
     * commits. Returns 1 when marked, 0 when another relay owns it now. */
    int (*mark_failed)(void *io, const struct sc_relay_row *row, struct sc_db_err *e);
    int (*rollback)(void *io, struct sc_db_err *e);

    int (*amqp_open)(void *io, char *err, size_t err_len);
    void (*amqp_close)(void *io);
    int (*amqp_is_open)(void *io);
    /* sc_amqp_publish_begin / sc_amqp_collect_confirms / sc_amqp_service. A
     * failed publish leaves the messages from the refused one on FAILED;
     * the refused one consumes no sequence number. A failed collect says
     * why in *cls. */
    int (*publish)(void *io, struct sc_publish *msgs, size_t n, char *err, size_t err_len);
    int (*collect)(void *io, struct sc_publish *msgs, size_t n, int timeout_ms,
                   enum sc_amqp_error_class *cls, char *err, size_t err_len);
    /* sc_amqp_reopen_channel: after SC_AMQPERR_REFUSED. */
    int (*reopen)(void *io, char *err, size_t err_len);
    int (*service)(void *io, char *err, size_t err_len);
    int (*heartbeat)(void *io); /* sends one heartbeat frame now */

    int64_t (*now_ms)(void *io);
    int (*backoff_ms)(void *io, unsigned long long k); /* after the k-th failure in a row */

    /* Optional (the binlog source's): every claimed batch ends here once, in
     * claim order, with each row in its terminal state. */
    void (*batch_done)(void *io, const struct sc_relay_batch *b);

    /* Optional (tenants'): when the lease of the rows the last claim
     * returned started, in now_ms's time. One claim call can try several
     * tenants, a silent one for a read timeout: PENDING rows claimed after
     * it count from their own statement, not the call's start, or they
     * would be left unsent to a lease they still hold. Rows taken back from
     * an expired lease count from the call's start (they may be this
     * relay's own batch in flight). */
    int64_t (*claim_started)(void *io);

    /* Optional (tenants'): how long the relay waits after a claim that found
     * nothing, in ms (until the next tenant is due). Without it the wait is
     * the idle poll, 5 ms doubling to poll_ms. */
    int (*idle_wait_ms)(void *io);

    /* Optional, the three together (the binlog source's, whose batches can
     * hold several events of one aggregate): held says whether a row's
     * aggregate is held behind a FAILED row now; hold is told of a row
     * refused (to be FAILED: its aggregate is held from then on);
     * mark_held marks rows[0..n) held and commits. */
    int (*held)(void *io, const struct sc_relay_row *r);
    void (*hold)(void *io, const struct sc_relay_row *r);
    int (*mark_held)(void *io, struct sc_relay_row *const *rows, int n, struct sc_db_err *e);
    /* Optional (the binlog source's): 1 when a claimed batch is to be read
     * again before it is sent (its source went back past it). */
    int (*stale)(void *io, const struct sc_relay_batch *b);
};

enum sc_relay_phase {
    SC_RELAY_CLAIM,   /* (re)connect, claim the next batch */
    SC_RELAY_COLLECT, /* wait for the batch in flight's confirms */
    SC_RELAY_MARK,    /* mark the collected batch; the round ends */
    SC_RELAY_SEND,    /* send the claimed batch (in flight while the other is marked) */
    SC_RELAY_WAIT,    /* between rounds: idle poll or backoff, broker kept alive */
};

struct sc_relay_params {
    const char *worker_id, *exchange;
    int batch, lease_ms, confirm_timeout_ms, poll_ms;
    int heartbeat_ms; /* amqp.heartbeat_s in ms, 0 when off */
    int binary;       /* relay.content_mode "binary": attributes as headers, data as body */
    int per_aggregate; /* relay.ordering per_aggregate: the claim takes aggregate heads only */
    int max_message_bytes; /* relay.max_message_bytes: a larger body is FAILED, never sent */
    int claim_waits;  /* the claim itself waits up to poll_ms for rows (binlog): no idle wait */
    int checkpointed; /* binlog: progress is a stored position; rows are never marked */
};

struct sc_relay_core {
    struct sc_relay_params p;
    const struct sc_relay_ops *ops;
    void *io;
    struct sc_relay_metrics *m;
    struct sc_relay_batch buf[2];
    struct sc_relay_batch *inflight; /* sent; its confirms are outstanding */
    struct sc_relay_batch *claimed;  /* claimed this round, not sent yet */
    struct sc_relay_batch *collected; /* its confirms are in; not marked yet */
    enum sc_relay_phase phase;
    int stopping;   /* claim nothing more; finish what is held */
    int round_wait; /* how long to wait when this round ends (ms) */
    int64_t wait_until;  /* SC_RELAY_WAIT ends then */
    int64_t last_beat;   /* the last frame this relay sent the broker */
    int idle;       /* this round claimed nothing */
    int poll;       /* the idle poll interval, 5 ms doubling to poll_ms */
    unsigned long long connect_failures, broker_failures; /* in a row */
    unsigned db_state;            /* error code of the database's failing state, 0 healthy */
    unsigned long long db_fails;  /* consecutive failures in that state */
    unsigned long long bad_transitions; /* row_to() refusals: 0 unless the core has a bug */
};

/* Allocates the two batch buffers. Returns 0, or -1 out of memory. */
int sc_relay_core_init(struct sc_relay_core *c, const struct sc_relay_params *p,
                       const struct sc_relay_ops *ops, void *io, struct sc_relay_metrics *m);
void sc_relay_core_free(struct sc_relay_core *c);

/* Runs the next phase. Returns how long the caller waits before the next
 * step, in ms (0: at once). */
int sc_relay_step(struct sc_relay_core *c);

/* 1 when the relay holds no batch: nothing claimed, nothing in flight. */
int sc_relay_holds_nothing(const struct sc_relay_core *c);

#endif
