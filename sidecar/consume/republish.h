/* The copies the consumer republishes: retries through the per-attempt delay
 * queues, dead letters to the consumer's DLQ and held events behind a key's
 * replay, with the x-sidecar-* headers (envelope/sidecar_headers.h), among
 * them the original exchange and routing key. Each copy is published under
 * confirms to the default exchange with routing key = the target queue (a
 * copy behind a replay: to the partitions' exchange when there are several). */
#ifndef SC_REPUBLISH_H
#define SC_REPUBLISH_H


#include "io/amqp_conn.h"
#include "config.h"
#include "envelope/sidecar_headers.h"
#include "io/sc_rabbitmq.h"
#include "log.h"

/* The delivery's headers table, or NULL when it has none. */
const amqp_table_t *sc_delivery_headers(const amqp_envelope_t *env);

/* The copy of one member of a batch-mode message: that member alone, as a
 * structured event (content_type application/cloudevents+json, message_id
 * and type its own), with the header x-sidecar-batch-index. */
struct sc_member_copy {
    int index;
    amqp_bytes_t body;  /* the member's JSON text exactly as in the batch */
    const char *id;     /* its canonical id, or NULL when it has none (malformed) */
    const char *type;   /* its type, or NULL */
};

/* A held key's event met while a replay of the key is in flight that cannot
 * wait in hand for it (consume/held.h): a copy to the end of k's own stream (its partitions' exchange when it has
 * several), carrying the replay's key, token and the event's hold number,
 * and the original route like every copy, so that it runs after the
 * replayed events, as one of them. Returns 0 once the broker confirmed it. */
int sc_republish_behind_replay(struct sc_amqp *out, const struct sc_consumer_config *k,
                               const amqp_envelope_t *env, const char *key, const char *token,
                               int64_t hold_seq, const struct sc_log_fields *lf);

/* A copy to k's dead-letter queue with the reason headers (and
 * x-sidecar-tenant when tenant is not NULL): the delivery as
 * it came (member NULL: body, properties and headers kept, so a replay
 * reproduces it), or one member of it. hold_seq > 0 (a held key's dead
 * letter) adds x-sidecar-hold-seq unless the delivery has one already (a
 * replayed copy keeps its place). Returns 0 once the broker confirmed
 * it (logged otherwise). */
int sc_republish_dead(struct sc_amqp *out, const struct sc_consumer_config *k,
                      const amqp_envelope_t *env, const struct sc_member_copy *member,
                      int attempt, const char *why, int64_t hold_seq, const char *tenant,
                      const struct sc_log_fields *lf);

/* A copy to the delay queue of delay_ms, counting attempt + 1. Returns 0
 * once the broker confirmed it (logged otherwise). */
int sc_republish_retry(struct sc_amqp *out, const struct sc_consumer_config *k,
                       const amqp_envelope_t *env, const struct sc_member_copy *member,
                       int attempt, int delay_ms, const char *why,
                       const struct sc_log_fields *lf);

/* The same for a delivery that goes round unrun (an ordered consumer's
 * down tenant), with header mark_name = mark (replacing one it carries). */
int sc_republish_round(struct sc_amqp *out, const struct sc_consumer_config *k,
                       const amqp_envelope_t *env, int attempt, int delay_ms, const char *why,
                       const char *mark_name, const char *mark, const struct sc_log_fields *lf);

#endif
