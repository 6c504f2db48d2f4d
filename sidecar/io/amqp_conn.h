/* rabbitmq-c wrapper: connect, declare, consume, ack, and publish under
 * publisher confirms with every wait bounded. One connection belongs to one
 * thread; rabbitmq-c is not thread-safe. */
#ifndef SC_AMQP_CONN_H
#define SC_AMQP_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "io/sc_rabbitmq.h"

#define SC_AMQP_CHANNEL 1
/* A connection's second channel, for the passive declares that check a
 * consumer's own queue: the broker closes it when the queue is gone, and the
 * consuming channel, with the deliveries in hand, stays open. */
#define SC_AMQP_CHECK_CHANNEL 2

/* The header an ordered consumer's consistent-hash exchange hashes (the
 * relay sets it to aggregate_id). */
#ifndef SC_H_ORDERING_KEY
#define SC_H_ORDERING_KEY "x-ordering-key"
#endif

struct sc_amqp {
    amqp_connection_state_t conn;
    uint64_t next_seq;     /* publish sequence number under confirms */
    int node;              /* index in cfg->amqp_urls of the broker node */
    /* what sc_amqp_start_consume last started, for sc_amqp_consume_again */
    char queue[256], consumer_tag[256];
    int prefetch;
    int check_open;        /* SC_AMQP_CHECK_CHANNEL is open */
};

/* Opens a connection and channel 1. name shows in the broker's connection
 * list (connection_name). With several amqp.url nodes it tries each once, in
 * turn, starting after the node this thread last connected to (so a
 * reconnect after a failure goes to the next node). Returns 0, or -1 with
 * err set (the last node's error). */
int sc_amqp_connect(struct sc_amqp *a, const struct sc_config *cfg, const char *name, char *err,
                    size_t err_len);
void sc_amqp_close(struct sc_amqp *a);
int sc_amqp_connected(const struct sc_amqp *a);

/* Declares the exchanges of the bindings (durable topic), the queue (durable,
 * queue type), its bindings, the dead-letter queue and one delay queue per
 * retry step. An ordered consumer: its queue (or, partitions > 1, the
 * consistent-hash exchange and the partition queues) with
 * x-single-active-consumer, the dead-letter queue, no delay queues. */
int sc_amqp_declare_consumer(struct sc_amqp *a, const struct sc_consumer_config *k, char *err,
                             size_t err_len);

/* What sc_amqp_declare_consumer returns, err naming the queue, its limit and
 * the fix, when a consumed quorum queue exists with an x-delivery-limit (or
 * none) at which the broker would drop a message before max_attempts
 * dead-letters it: `consume` and `check` refuse to start (exit 2). */
#define SC_AMQP_REFUSED (-2)

/* The x-delivery-limit an existing consumed quorum queue needs at least: the
 * consumer dead-letters the delivery handed out max_attempts times before,
 * and every session that ends with deliveries in hand gives them back, each
 * return counted by the broker; the margin is room for such returns. */
#define SC_DELIVERY_LIMIT_MARGIN 10
/* What RabbitMQ 4 gives a quorum queue declared without x-delivery-limit. */
#define SC_DELIVERY_LIMIT_DEFAULT 20

/* Reads the text of a 406 "inequivalent arg 'x-delivery-limit'" refusal:
 * returns 1 with *limit the existing queue's limit, 0 when it has none, -1
 * when the text does not say (another refusal, or cut at 255 bytes). */
int sc_amqp_existing_delivery_limit(const char *text, long long *limit);

/* Whether a consumed quorum queue with that existing limit (has 1: limit; 0:
 * none, counted as SC_DELIVERY_LIMIT_DEFAULT; -1: unknown) lets max_attempts
 * dead-letter first. */
int sc_amqp_delivery_limit_enough(int has, long long limit, int max_attempts);

/* What a passive declare on SC_AMQP_CHECK_CHANNEL says of a queue. */
enum sc_queue_state {
    SC_QUEUE_CONSUMED,   /* it exists with at least one consumer */
    SC_QUEUE_UNCONSUMED, /* it exists, with no consumer */
    SC_QUEUE_GONE,       /* 404: it does not exist */
    SC_QUEUE_UNKNOWN,    /* no answer: err says why (the connection is in doubt) */
};
/* *ready: the messages ready in it, when it exists. */
/* 1 when frames wait to be read on the connection: queued by the library
 * during an RPC on another channel, in its buffer, or on the socket within
 * wait_ms (0: only what is there now). */
int sc_amqp_frames_waiting(struct sc_amqp *a, int wait_ms);
enum sc_queue_state sc_amqp_check_queue(struct sc_amqp *a, const char *queue, uint32_t *ready,
                                        char *err, size_t err_len);

/* Declares a durable topic exchange. */
int sc_amqp_declare_exchange(struct sc_amqp *a, const char *exchange, char *err, size_t err_len);

/* Name of the delay queue for a retry delay: "<queue>.retry.<ms>ms". */
void sc_amqp_retry_queue_name(const struct sc_consumer_config *k, int delay_ms, char *out,
                              size_t out_len);

/* An ordered consumer's partition queue i: "<queue>.p<i>"; the
 * consistent-hash exchange that feeds them: "<queue>.ordering". */
void sc_amqp_partition_queue_name(const struct sc_consumer_config *k, int i, char *out,
                                  size_t out_len);
void sc_amqp_ordering_exchange_name(const struct sc_consumer_config *k, char *out, size_t out_len);

/* basic.qos + basic.consume with manual ack. */
int sc_amqp_start_consume(struct sc_amqp *a, const char *queue, int prefetch, const char *tag,
                          char *err, size_t err_len);

/* After a cancel (the queue was deleted): declares the consumer's queue,
 * bindings, dead-letter and delay queues again and consumes as before, on
 * the same channel (the deliveries in hand stay valid). Returns 0, or -1
 * with err set (reconnect). */
int sc_amqp_consume_again(struct sc_amqp *a, const struct sc_consumer_config *k, char *err,
                          size_t err_len);

enum sc_amqp_recv {
    SC_AMQP_RECV_MESSAGE,   /* *env filled; destroy it with amqp_destroy_envelope */
    SC_AMQP_RECV_TIMEOUT,   /* nothing arrived in time */
    SC_AMQP_RECV_CLOSED,    /* connection or channel is gone: reconnect */
    SC_AMQP_RECV_CANCELLED, /* the broker cancelled the consumer (basic.cancel, err says
                               which): no more deliveries until sc_amqp_consume_again */
};

/* Waits up to timeout_ms for a delivery. */
enum sc_amqp_recv sc_amqp_receive(struct sc_amqp *a, amqp_envelope_t *env, int timeout_ms,
                                  char *err, size_t err_len);

/* Return 0 when the frame was sent. */
int sc_amqp_ack(struct sc_amqp *a, uint64_t tag, int multiple);
int sc_amqp_nack_requeue(struct sc_amqp *a, uint64_t tag, int multiple);

/* Publishing under confirms. */
int sc_amqp_confirm_select(struct sc_amqp *a, char *err, size_t err_len);

enum sc_publish_result {
    SC_PUB_PENDING = 0,
    SC_PUB_ACKED,
    SC_PUB_NACKED,
    SC_PUB_RETURNED,   /* unroutable (mandatory); the broker acks it afterwards */
    SC_PUB_TIMEOUT,
    SC_PUB_FAILED,     /* connection error before the confirm */
};

struct sc_publish {
    const char *exchange;
    const char *routing_key;
    const amqp_basic_properties_t *props;
    amqp_bytes_t body;
    int mandatory;
    uint64_t seq;                 /* set by the call */
    enum sc_publish_result result; /* set by the call */
};

/* What a failed confirm wait leaves of the connection: what to do next. */
enum sc_amqp_error_class {
    SC_AMQPERR_CONNECTION = 0, /* gone or in doubt: close it and connect again */
    SC_AMQPERR_REFUSED,        /* the broker closed the publishing channel over a message it
                                  will not take (406 PRECONDITION_FAILED on basic.publish, e.g.
                                  larger than its max_message_size; err has its reply text):
                                  the connection lives, sc_amqp_reopen_channel() publishes
                                  again. Which message is not said: one of those still PENDING
                                  (now FAILED). RabbitMQ sends no confirm after the close, so
                                  the others may have reached a queue unconfirmed. */
};

/* Publishes all n messages, then collects their confirms (basic.ack and
 * basic.nack with `multiple`, basic.return) until each has a result or
 * timeout_ms passes. Returns the number ACKED (and not returned), or -1 when
 * the connection failed: close it and reconnect. */
int sc_amqp_publish_confirmed(struct sc_amqp *a, struct sc_publish *msgs, size_t n, int timeout_ms,
                              char *err, size_t err_len);

/* The two halves of sc_amqp_publish_confirmed, so a caller can do other
 * work while the confirms travel: begin sends every message (0, or -1 with
 * every unsent one FAILED); collect waits for the confirms of those still
 * PENDING (same return as sc_amqp_publish_confirmed; on -1, *cls, when not
 * NULL, says why). Nothing else may be published on the connection in
 * between. */
int sc_amqp_publish_begin(struct sc_amqp *a, struct sc_publish *msgs, size_t n, char *err,
                          size_t err_len);
int sc_amqp_collect_confirms(struct sc_amqp *a, struct sc_publish *msgs, size_t n, int timeout_ms,
                             enum sc_amqp_error_class *cls, char *err, size_t err_len);

/* Opens the publishing channel again under confirms after the broker closed
 * it (SC_AMQPERR_REFUSED); sequence numbers start again at 1. Returns 0, or
 * -1 with err set (close the connection). */
int sc_amqp_reopen_channel(struct sc_amqp *a, char *err, size_t err_len);

/* Services heartbeats on an otherwise idle connection and drains stray
 * frames. Returns 0, or -1 with err filled when the connection is gone (the
 * caller logs it: it knows whose connection it was and what happens next). */
int sc_amqp_service(struct sc_amqp *a, char *err, size_t err_len);

/* Sends one heartbeat frame now (for a thread busy elsewhere: rabbitmq-c
 * sends them only inside its own calls). Returns 0 when sent. */
int sc_amqp_heartbeat(struct sc_amqp *a);

/* Removes the per-message TTL (the `expiration` property, the only one AMQP
 * 0-9-1 has) from a copy of a delivery's properties: a copy the sidecar
 * republishes to a dead-letter, delay or replay target must not expire
 * there because its publisher once set a TTL. Call it on the properties
 * passed to sc_amqp_publish_confirmed for every such copy. */
void sc_amqp_props_clear_ttl(amqp_basic_properties_t *p);

const char *sc_publish_result_name(enum sc_publish_result r);

/* Integer value of a header, or def when absent or not an integer. */
int64_t sc_amqp_header_int(const amqp_table_t *headers, const char *key, int64_t def);
/* String value of a header as bytes (len 0 when absent). */
amqp_bytes_t sc_amqp_header_bytes(const amqp_table_t *headers, const char *key);

#endif
