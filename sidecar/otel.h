/* Optional span export: OTLP/HTTP JSON (https://opentelemetry.io/docs/specs/otlp/)
 * to otel.endpoint. Spans are queued without blocking (a full queue drops
 * and counts), sent in batches by one thread; a collector that is down or
 * slow costs the workers nothing but the dropped-span counter. */
#ifndef SC_OTEL_H
#define SC_OTEL_H

#include <stddef.h>
#include <stdint.h>

#define SC_OTEL_QUEUE_MAX 4096 /* spans held for the exporter at most */
#define SC_OTEL_BATCH_MAX 256  /* spans per request at most */
#define SC_OTEL_FLUSH_MS 1000  /* a queued span waits at most this long */
#define SC_OTEL_TIMEOUT_MS 2000 /* connect, send and answer of one request */

enum sc_otel_kind { SC_OTEL_PRODUCER = 4, SC_OTEL_CONSUMER = 5 }; /* OTLP SpanKind */

struct sc_otel_span {
    char trace_id[33], span_id[17], parent_span_id[17];
    char name[96];
    enum sc_otel_kind kind;
    int64_t start_us, end_us;  /* sc_now_us() (monotonic) at start and end */
    int error;                 /* status ERROR (else OK) */
    char outcome[24];          /* sidecar.outcome */
    char message_id[37];       /* messaging.message.id */
    char destination[160];     /* messaging.destination.name */
    char routing_key[160];     /* messaging.rabbitmq.destination.routing_key (publish) */
    char consumer_group[160];  /* messaging.consumer.group.name (process) */
};

/* Starts the exporter for endpoint (http://host[:port]/path) under
 * service.name service. Returns 0, or -1 with err filled. */
int sc_otel_start(const char *endpoint, const char *service, char *err, size_t err_len);

/* 1 when an exporter runs (a span is worth building). */
int sc_otel_enabled(void);

/* Queues a copy of s; never blocks on the network. */
void sc_otel_add(const struct sc_otel_span *s);

/* Sends what is queued (one try) and stops the exporter. */
void sc_otel_stop(void);

struct sc_parsed_event;

/* Queues the span of one consumer handling of ev (its own span_id, a child
 * of the message's parent-id), when ev has trace context and an exporter
 * runs: from start_us (received) to end_us, outcome as logged. */
void sc_otel_consumer_span(const struct sc_parsed_event *ev, const char *queue,
                           const char *consumer, const char *outcome, int error, int64_t start_us,
                           int64_t end_us);

/* The counters for /metrics; 0 when no exporter runs. */
int sc_otel_counters(unsigned long long *exported, unsigned long long *dropped,
                     unsigned long long *failed_requests);

#endif
