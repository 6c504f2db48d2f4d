/* A consume worker and the deliveries of its batch, shared by the consume
 * loop (consumer.c) and the batch's transaction (batch.c). */
#ifndef SC_WORKER_H
#define SC_WORKER_H

#include <amqp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "io/amqp_conn.h"
#include "config.h"
#include "io/db.h"
#include "envelope/event.h"
#include "log.h"
#include "metrics.h"
#include "plugin.h"

#define SC_REASON_LEN 512 /* a handler's reason buffer */

struct consumer {
    const struct sc_config *cfg;
    const struct sc_consumer_config *k;
    struct sc_plugin plugin;
    struct sc_consumer_metrics m;
};

struct worker {
    struct consumer *c;
    int index;
    struct sc_db db;
    struct sc_amqp in;   /* consuming connection */
    struct sc_amqp out;  /* publishing connection, confirm mode: DLQ and retries */
    pthread_t thread;
    int64_t last_db_use_ms;
    int64_t last_heartbeat_ms; /* last heartbeat sent by sc_worker_keep_alive() */
    struct item *items;  /* batch_max deliveries */
    char *reasons;       /* batch_max * SC_REASON_LEN, for handle_batch */
    int up_db, up_amqp, up_consuming; /* this worker's part of the gauges */
};

/* What the loop does after a batch: go on, make the database session again
 * keeping the broker session (the batch is settled or returned), or reset
 * every connection. */
enum next { NEXT_CONTINUE, NEXT_DB_LOST, NEXT_RESET };

/* What becomes of a delivery of the batch. */
enum disposition {
    D_OPEN = 0,   /* not decided yet */
    D_APPLIED,    /* claim + effect are in the transaction: ack after COMMIT */
    D_DUPLICATE,  /* already consumed: ack after the transaction */
    D_RETRY,      /* rolled back: through a delay queue, then ack */
    D_DEAD,       /* malformed, rejected or exhausted: to the DLQ, then ack */
    D_REQUEUE,    /* outcome unknown for this one: nack with requeue */
};

struct item {
    amqp_envelope_t env;
    int64_t received_us;
    int attempt;
    int parsed;
    struct sc_parsed_event ev;
    enum disposition d;
    int republished;      /* its retry or dead-letter copy was confirmed */
    int decided_early;    /* dead before the transaction (x-delivery-count guard):
                             no retry of the batch reopens it */
    struct sc_log_fields lf;
    char ev_sqlstate[6];
    char why[1024];
};

/* batch.c: parses, runs the transaction and settles every delivery. */
enum next sc_batch_process(struct worker *w, struct item *items, int n);

/* consumer.c: moves this worker's contribution to a connection gauge. */
void sc_worker_gauge(atomic_int *g, int *mine, int up);

/* consumer.c: heartbeats on both broker connections every half interval
 * while the worker is busy elsewhere (rabbitmq-c sends them only inside its
 * own calls). */
void sc_worker_keep_alive(struct worker *w);

/* consumer.c: a fresh database session (autocommit off, UTC, bounded lock
 * waits, statements prepared) after a handler contract violation. Returns 0,
 * or -1 (the caller has the loop reconnect: NEXT_DB_LOST). */
int sc_worker_reset_db(struct worker *w);

#endif
