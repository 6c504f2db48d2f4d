/* The headers the sidecar writes on the copies it republishes (retries,
 * dead letters), named once: the consumer writes them (republish.c), reads
 * the attempt back, a plain message's route comes from them on a copy, and
 * `sidecar dlq` shows them. */
#ifndef SC_SIDECAR_HEADERS_H
#define SC_SIDECAR_HEADERS_H

#define SC_H_PREFIX "x-sidecar-"
#define SC_H_ATTEMPTS "x-sidecar-attempts"
#define SC_H_REASON "x-sidecar-reason"
#define SC_H_CONSUMER "x-sidecar-consumer"
#define SC_H_FAILED_AT "x-sidecar-failed-at"
#define SC_H_ORIG_EXCHANGE "x-sidecar-original-exchange"
#define SC_H_ORIG_ROUTING_KEY "x-sidecar-original-routing-key"
#define SC_H_LAST_ERROR "x-sidecar-last-error"
/* A dead letter's tenant (tenants): the database it was to commit in. */
#define SC_H_TENANT "x-sidecar-tenant"
/* On the copy of one member of a batch-mode message: its index there. */
#define SC_H_BATCH_INDEX "x-sidecar-batch-index"

#endif
