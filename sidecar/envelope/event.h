/* A CloudEvents 1.0 event as the consumer hands it on, and the structured
 * mode's parser (message.h reads every mode of a delivery). */
#ifndef SC_EVENT_H
#define SC_EVENT_H

#include <stddef.h>

#include "sidecar/handler.h"
#include "uuid_text.h"

struct sc_parsed_event {
    struct sc_event ev;  /* what the handler sees; points into the members below */
    void *json;          /* the parsed body (json_t *) */
    char *data_json;     /* owned: `data` exactly as written in the body */
    char id[37];         /* the canonical lowercase id */
    /* Set even when parsing fails, whenever an id could be read: the
     * canonical id, or the first 64 bytes of a malformed one (for logs). */
    char log_id[65];
    /* A plain message whose message_id is not a UUID: that message_id (the
     * id is its UUIDv5); empty otherwise. Kept for the logs. */
    char id_from[256];
    /* The W3C trace context (ev.traceparent etc. point here or into json
     * when it is valid; all empty when the event had none). */
    char trace_id[33];
    char span_id[17];        /* this handling's own span, new per parse */
    char parent_span_id[17]; /* the traceparent's parent-id */
    /* An invalid traceparent or tracestate the event carried: why it is
     * ignored (the event is handled without it, never refused). */
    char trace_ignored[192];
};

/* Parses body[0..len). message_id is the AMQP property or NULL when absent.
 * Returns 0, or -1 with the reason the message is malformed in reason
 * (nothing to free; out->log_id may still name the event). */
int sc_event_parse(const char *body, size_t len, const char *message_id, size_t message_id_len,
                   struct sc_parsed_event *out, char *reason, size_t reason_len);

void sc_event_free(struct sc_parsed_event *e);

#endif
