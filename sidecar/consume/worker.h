/* A consume worker and the deliveries of its batch, shared by the consume
 * loop (consumer.c) and the batch core (batch*.c), which reaches the
 * database, the handler and the broker only through the worker's seam
 * (batch_io.h). */
#ifndef SC_WORKER_H
#define SC_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "config.h"
#include "envelope/event.h"
#include "envelope/message.h"
#include "io/amqp_conn.h"
#include "io/db.h"
#include "io/sc_rabbitmq.h"
#include "log.h"
#include "metrics.h"
#include "plugin.h"

#define SC_REASON_LEN 512 /* a handler's reason buffer */

struct sc_batch_io;
struct sc_tenant_worker;

struct consumer {
    const struct sc_config *cfg;
    const struct sc_consumer_config *k;
    struct sc_plugin plugin;
    struct sc_consumer_metrics m;
    /* Bumped by a worker that found the queue gone: its siblings' consumers
     * died with the queue too, cancel or none. */
    atomic_uint queue_epoch;
};

/* What the loop does after a batch. */
enum next {
    NEXT_CONTINUE, /* every delivery is settled: go on */
    NEXT_DB_HOLD,  /* nothing of the batch is settled and the database
                      session is gone (lost, or its node cannot take writes;
                      before COMMIT, or with it: then the claims tell): make
                      it again, keeping every delivery in hand, and run the
                      same batch again */
    NEXT_DB_LOST,  /* the batch is settled or returned; make the database
                      session again, keeping the broker session */
    NEXT_RESET,    /* close every connection: the broker returns what is
                      unsettled */
};

/* What becomes of a delivery of the batch. */
enum disposition {
    D_OPEN = 0,   /* not decided yet */
    D_APPLIED,    /* claim + effect are in the transaction: ack after COMMIT */
    D_DUPLICATE,  /* already consumed: ack after the transaction */
    D_RETRY,      /* rolled back: through a delay queue, then ack */
    D_DEAD,       /* malformed, rejected or exhausted: to the DLQ, then ack */
    D_REQUEUE,    /* no outcome for this one: nack with requeue */
};

/* The most events one transaction can hold: batch_max - 1 deliveries and
 * a batch-mode message of SC_MESSAGE_BATCH_MAX members (such a message ends
 * the gathering of its batch). */
#define SC_ITEM_LIMIT (2 * SC_BATCH_LIMIT)

struct item;

/* One delivery of the batch. `env` and `received_us` are the loop's; the
 * rest is the batch's state of it, set anew for every batch
 * (sc_batch_begin). A delivery is acked once every one of its events is
 * settled, and nacked as a whole when one of them has no outcome. */
struct delivery {
    amqp_envelope_t env;
    int64_t received_us;
    /* An ordered consumer's loop sets these before the batch: */
    int in_place;         /* attempts it already spent in hand (retries in place) */
    const char *refused;  /* dead-lettered unrun with this reason: no ordering key, or its
                             key is held (held_why) */
    const char *key;      /* its ordering key, or NULL */
    const char *event_id; /* its event's id as the key was read, or NULL */
    const char *replay_token; /* a copy `sidecar dlq replay --key` sent: its token, else "" */
    const char *tenant;   /* tenants: its tenant (its dead letter says so), or NULL */
    char held_why[64];    /* "held behind <event_id>" */
    int replay_in_flight; /* refused as held while its key's replay is in flight ... */
    char held_behind[37], held_token[37]; /* ... behind this event, this replay */
    char behind_replay[37]; /* held while its key's replay (this token) is in flight: it goes
                               to the end of the stream with the token, not to the DLQ (set
                               only once its hold is recorded) */
    int replay_applied;   /* a copy of its key's current replay, applied ... */
    int released;         /* ... and with it the key is free, */
    char next_held[37];   /* ... else held behind this event now */
    /* and the batch sets these for it: kept in hand (neither acked nor
     * returned) to run again after again_ms; spent when that counts as an
     * attempt (a retry), not when it had no outcome (it simply runs again). */
    int kept, again_ms, spent;
    int attempt;
    enum sc_message_mode mode;
    struct item *items; /* its events, consecutive in the batch's item array */
    int n_items;
};

/* One event of the batch: one claim. A delivery has one, or (batch mode)
 * one per member. Everything here is set anew for every batch. */
struct item {
    struct delivery *dl;
    int member;           /* index in a batch-mode message; -1: the event is the delivery */
    size_t body_off, body_len; /* what a copy of it carries: the member's span, else the body */
    int attempt;
    int parsed;
    int malformed;        /* not a valid event: dead-lettered, counted as malformed */
    struct sc_parsed_event ev;
    enum disposition d;
    int sticky;           /* decided before the transaction (x-delivery-count
                             guard, an error repeated on a fresh session): no
                             retry of the batch reopens it */
    int ran;              /* its claim was tried in some transaction */
    int committing;       /* applied in a transaction whose COMMIT was sent and
                             did not answer: outcome unknown */
    int committed;        /* its transaction's COMMIT succeeded */
    int republished;      /* its retry or dead-letter copy was confirmed */
    int64_t hold_seq;     /* its key's hold sequence number for the dead letter (0: none) */
    struct sc_log_fields lf;
    char ev_sqlstate[6];
    char why[1024];
};

struct worker {
    struct consumer *c;
    const struct sc_batch_io *io; /* the batch core's seam */
    int index;
    struct sc_db db;
    struct sc_amqp in;   /* consuming connection */
    struct sc_amqp out;  /* publishing connection, confirm mode: DLQ and retries */
    pthread_t thread;
    int64_t last_db_use_ms;
    int64_t last_heartbeat_ms; /* last heartbeat sent by sc_worker_keep_alive() */
    struct delivery *dls; /* batch_max deliveries */
    struct item *items;  /* the batch's events: items_cap = batch_max - 1 + SC_MESSAGE_BATCH_MAX */
    int items_cap;
    int n_items;         /* the current batch's */
    char *reasons;       /* items_cap * SC_REASON_LEN, for handle_batch */
    int up_db, up_amqp, up_consuming; /* this worker's part of the gauges */
    /* The batch in hand after NEXT_DB_HOLD: the error that ended its session
     * and the delivery that was running then (the same one failing again on
     * the next session is the delivery's fault, not the database's). */
    struct sc_db_err hold_cause;
    char hold_culprit[37];
    int holding;         /* the batch runs again on a session made for it */
    int hold_one_by_one; /* and one savepoint per delivery, to find the delivery
                            that loses the session (the fast path cannot tell) */
    int hold_blamed;     /* the last run blamed hold_culprit: its retry spends an
                            attempt, and the batch runs again without it */
    int64_t hold_since_ms;
    int64_t last_queue_check_ms; /* sc_worker_check_queues() */
    int unconsumed_checks;       /* checks in a row that found a queue with no consumer */
    int reopen_now;              /* the session ended to declare a lost queue: no backoff */
    unsigned seen_epoch;         /* the consumer's queue_epoch this session started in */
    int waiting_checks;          /* checks in a row that saw messages wait, none received */
    int64_t last_delivery_ms;    /* the last delivery this session received */
    /* tenants: the nodes of the database the session is for (NULL:
     * mysql.url), each delivery acked alone (a basic.ack with multiple
     * would cover a parked delivery of another tenant), and the sessions
     * and parked deliveries (consume/tenant_pool.h). */
    char **db_urls;
    size_t n_db_urls;
    int ack_each;
    struct sc_tenant_worker *tenant;
};

/* batch.c: parses, runs the transaction and settles every delivery of
 * dls[0..n). With NEXT_DB_HOLD the caller makes a new database session and
 * calls it again with the same deliveries (w->holding set). */
enum next sc_batch_process(struct worker *w, struct delivery *dls, int n);

/* consumer.c: runs the batch; while its database session is gone before
 * COMMIT, makes the session again and runs the same batch on it (the
 * deliveries kept in hand). */
enum next sc_consume_batch(struct worker *w, struct delivery *dls, int n);

/* ordered.c: an ordered consumer's loop (consume/order.h) until a
 * connection fails or a stop is requested. Returns the deliveries handled. */
long sc_consume_ordered(struct worker *w);

/* worker.c: how many queues the worker consumes (an ordered consumer's
 * partitions are shared out among its workers), and the i-th of them. */
int sc_worker_queues(const struct worker *w);
/* Checks, at most every SC_QUEUE_CHECK_MS, that the worker's queues exist
 * and are consumed; see worker.c. Returns 0, or -1 to end the session. */
#define SC_QUEUE_CHECK_MS 2000
/* How long a check that found the queue gone waits for the broker's cancel. */
#define SC_CANCEL_GRACE_MS 1000
int sc_worker_check_queues(struct worker *w, int in_hold);
void sc_worker_queue(const struct worker *w, int i, char *out, size_t out_len);

/* The consumer tag of the worker's queue i (the same in every process, so
 * a standby's tags are the active one's). */
void sc_worker_consumer_tag(const struct worker *w, int i, char *out, size_t out_len);

/* The name of the worker's queue consumed under tag. Returns 0, or -1. */
int sc_worker_queue_of_tag(const struct worker *w, amqp_bytes_t tag, char *out, size_t out_len);

/* batch_begin.c: forgets the batch's state (parsed events) once its
 * deliveries are gone. */
void sc_batch_release(struct worker *w);

/* batch_begin.c: 1 when a delivery ends the gathering of its batch (a
 * batch-mode message: its members take the rest of the item array). */
int sc_batch_ends_gathering(const struct worker *w, const amqp_envelope_t *env);

/* worker.c: moves this worker's contribution to a connection gauge. */
void sc_worker_gauge(atomic_int *g, int *mine, int up);

/* worker.c: heartbeats on both broker connections every half interval
 * while the worker is busy elsewhere (rabbitmq-c sends them only inside its
 * own calls). */
void sc_worker_keep_alive(struct worker *w);

/* worker.c: services the publishing connection (its heartbeats, idle
 * between dead letters and retries) once a second, *last_ms the last time.
 * Returns 0, or -1 with the loss logged. */
int sc_worker_service_publisher(struct worker *w, int64_t *last_ms);

/* worker.c: a fresh database session (autocommit off, UTC, bounded lock
 * waits, statements prepared, the node writable) after a handler contract
 * violation. Returns 0, or -1 (the caller has the loop reconnect:
 * NEXT_DB_LOST). */
int sc_worker_reset_db(struct worker *w);

/* worker.c: makes w->db anew for w->db_urls (or mysql.url): the one way a
 * session is made. Returns 0, or -1 with e filled. */
int sc_worker_db_open(struct worker *w, struct sc_db_err *e);

/* tenant_loop.c: how many deliveries a worker of a consumer with tenants
 * holds in hand to group by tenant (the size of its dls): the prefetch, or
 * batch_max when that is larger. */
int sc_tenant_in_hand(const struct sc_consumer_config *k);

/* tenant_loop.c: the loop of a consumer with tenants until a connection
 * fails or a stop is requested. Returns the deliveries handled. */
long sc_consume_tenants(struct worker *w);

/* worker.c: opens the worker's database and broker sessions. Returns 0, or
 * -1 with why (and the database error code, if that was it) filled: the
 * caller decides to retry and logs it, once, with the attempt and the delay. */
int sc_worker_open(struct worker *w, char *why, size_t why_len, unsigned *code);

/* worker.c: closes all three connections (the broker returns every unacked
 * delivery). */
void sc_worker_close(struct worker *w);

/* worker.c: waits ms (at most until db_outage_hold_ms after since_ms) with
 * both broker connections kept alive. Returns 0, or -1 (a stop, the broker
 * went away, or the hold passed: logged, naming the batch in hand). */
int sc_worker_wait(struct worker *w, int ms, int64_t since_ms);

/* worker.c: makes the database session again in place, with backoff, while
 * the broker session and the deliveries in hand are kept, until
 * db_outage_hold_ms after since_ms. Returns 0, or -1 (a stop, the broker
 * went away, or the hold passed: the caller closes everything). */
int sc_worker_reconnect_db(struct worker *w, int64_t since_ms);

#endif
