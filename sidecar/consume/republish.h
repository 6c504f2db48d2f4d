/* The copies the consumer republishes: retries through the per-attempt delay
 * queues and dead letters to the consumer's DLQ, with the x-sidecar-* headers
 * (named here only; `sidecar dlq` reads them). Each copy is published under
 * confirms to the default exchange with routing key = the target queue. */
#ifndef SC_REPUBLISH_H
#define SC_REPUBLISH_H

#include <amqp.h>

#include "io/amqp_conn.h"
#include "config.h"
#include "log.h"

/* Headers the sidecar writes on messages it republishes. */
#define SC_H_PREFIX "x-sidecar-"
#define SC_H_ATTEMPTS "x-sidecar-attempts"
#define SC_H_REASON "x-sidecar-reason"
#define SC_H_CONSUMER "x-sidecar-consumer"
#define SC_H_FAILED_AT "x-sidecar-failed-at"
#define SC_H_ORIG_EXCHANGE "x-sidecar-original-exchange"
#define SC_H_ORIG_ROUTING_KEY "x-sidecar-original-routing-key"
#define SC_H_LAST_ERROR "x-sidecar-last-error"

/* The delivery's headers table, or NULL when it has none. */
const amqp_table_t *sc_delivery_headers(const amqp_envelope_t *env);

/* A copy to k's dead-letter queue with the reason headers. Returns 0 once
 * the broker confirmed it (logged otherwise). */
int sc_republish_dead(struct sc_amqp *out, const struct sc_consumer_config *k,
                      const amqp_envelope_t *env, int attempt, const char *why,
                      const struct sc_log_fields *lf);

/* A copy to the delay queue of delay_ms, counting attempt + 1. Returns 0
 * once the broker confirmed it (logged otherwise). */
int sc_republish_retry(struct sc_amqp *out, const struct sc_consumer_config *k,
                       const amqp_envelope_t *env, int attempt, int delay_ms, const char *why,
                       const struct sc_log_fields *lf);

#endif
