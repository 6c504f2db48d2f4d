/* Reading a dead-letter queue without taking from it, and putting copies of
 * what it holds back on a consumer's stream: what every `sidecar dlq` verb
 * shares (admin_dlq.c, admin_dlq_key.c). */
#ifndef SC_DLQ_BROWSE_H
#define SC_DLQ_BROWSE_H

#include <stdint.h>

#include "config.h"
#include "io/amqp_conn.h"

/* At most this many messages are read by one command; a key's replay, which
 * keeps only the key's bodies, reads further. */
#define DLQ_MAX 10000
#define DLQ_KEY_MAX 100000

struct dead {
    uint64_t tag;       /* 0 once it left this browse's hands (refreshed, replayed) */
    amqp_message_t msg;
    char *raw_id;       /* the event's id as the message wrote it, or NULL */
    char event_id[72];  /* the id as the logs show it (a UUIDv5 for a non-UUID id) */
    int64_t delivered;  /* the broker's x-delivery-count, -1 when absent */
};

const amqp_table_t *sc_dlq_headers(const amqp_basic_properties_t *p);

/* The id the consumer logs for dead letter m of consumer k, read in k's
 * envelope (a binary-mode event's from its id header, never from its data;
 * an id that is not a UUID as its UUIDv5), into event_id (empty: none), and
 * the id as the message wrote it into *raw_id (malloc'd, or NULL). What the
 * envelope reads no id of: a JSON body's "id" (unless the message is a
 * binary-mode CloudEvent, whose body is its data), else the message_id. */
void sc_dlq_event_id(const amqp_message_t *m, const struct sc_consumer_config *k,
                     char event_id[72], char **raw_id);

/* Takes as many messages as the queue held when the browse began (at most
 * max; so copies it puts back at the tail are not read twice; *held gets
 * that number), without acking them: they go back when the channel closes.
 * Messages another client holds unacked are not seen. On a quorum queue
 * (refresh) a message read with a high delivery count is put back first as
 * a fresh copy (unless it matches `spare`, or spare_all, or is of `keep_key`:
 * about to be replayed and removed). Bodies are kept only when `bodies` and the message
 * matches `keep` (an id; NULL: all) and `keep_key` (an ordering key of k;
 * NULL: all). Returns the count, or -1 with err set. */
int sc_dlq_browse(struct sc_amqp *a, const struct sc_consumer_config *k, struct dead *out, int max,
                  int refresh, const char *spare, int spare_all, int bodies, const char *keep,
                  const char *keep_key, int *held, char *err, size_t err_len);

/* Gives back what this command still holds (tag != 0) and waits (up to 3 s)
 * until the queue shows that many again. */
void sc_dlq_give_back(struct sc_amqp *a, const struct sc_consumer_config *k, const struct dead *ds,
                      int n);

void sc_dlq_free(struct dead *ds, int n);

/* Publishes a copy of d, every header but the broker's and the sidecar's
 * bookkeeping (replay 1; replay 2: a key's replay, which keeps
 * x-sidecar-hold-seq and is marked x-sidecar-replay-key = replay_key and,
 * when set, x-sidecar-replay-token = replay_token), to
 * queue through the default exchange (or, exchange set, through that one),
 * mandatory, under confirms. Returns 1 when confirmed, 0 when not (m_result
 * says why), -1 when the connection failed. */
int sc_dlq_publish_copy(struct sc_amqp *a, const struct dead *d, const char *exchange,
                        const char *queue, int replay, const char *replay_key,
                        const char *replay_token, enum sc_publish_result *m_result, char *err,
                        size_t err_len);

/* Acks tag and waits for proof the broker took it. 0, or -1 with err set
 * (the connection is gone: the ack may or may not have been taken). */
int sc_dlq_ack_confirmed(struct sc_amqp *a, uint64_t tag, char *err, size_t err_len);

/* A key's replay and release (admin_dlq_key.c), of tenant's key in its
 * database when tenant is not NULL. Return the exit status. */
int sc_dlq_replay_key(struct sc_amqp *a, const struct sc_config *cfg,
                      const struct sc_consumer_config *k, const char *key, const char *tenant);
int sc_dlq_release_key(const struct sc_config *cfg, const struct sc_consumer_config *k,
                       const char *key, const char *tenant);

#endif
