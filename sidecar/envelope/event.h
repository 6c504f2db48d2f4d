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
    /* owned, NUL-terminated: the data's bytes (ev.data_bytes; ev.data_json too
     * when it is JSON): `data` as written, data_base64 decoded, the body */
    char *data_buf;
    char id[37];         /* the canonical lowercase id */
    /* Set even when parsing fails, whenever an id could be read: the
     * canonical id (a UUIDv5 when the id is not a UUID and the source could
     * be read too), or the first 64 bytes of the id as written (for logs). */
    char log_id[65];
    /* An id that is not a UUID, as the message carried it (the first 255
     * bytes), the id being its UUIDv5; empty otherwise. Kept for the logs:
     * a plain message's message_id, or (id_of_source set) a CloudEvents id,
     * whose UUIDv5 is of its source and itself. */
    char id_from[256];
    int id_of_source;
    char *plain_message_id; /* owned: a plain message's message_id (ev.original_id) */
    /* The W3C trace context (ev.traceparent etc. point here or into json
     * when it is valid; all empty when the event had none). */
    char trace_id[33];
    char span_id[17];        /* this handling's own span, new per parse */
    char parent_span_id[17]; /* the traceparent's parent-id */
    /* An invalid traceparent or tracestate the event carried: why it is
     * ignored (the event is handled without it, never refused). */
    char trace_ignored[192];
};

/* The name under which a CloudEvents id that is not a UUID is consumed: its
 * source, a NUL, its id (neither can hold a NUL, so no two pairs share a
 * name, nor does a CloudEvent share one with a plain message_id), hashed
 * under SC_MESSAGE_ID_NAMESPACE (uuid_v5.h). A UUID id is itself, canonical. */
void sc_event_id_of(const char *id, size_t id_len, const char *source, size_t source_len,
                    char out[37]);

/* Sets out->log_id (and id_from) from an id and source as far as they could
 * be read (source NULL: not readable): what the logs name an event by, also
 * when it is refused. */
void sc_event_log_id(struct sc_parsed_event *out, const char *id, size_t id_len,
                     const char *source, size_t source_len);

/* Parses body[0..len). message_id is the AMQP property or NULL when absent.
 * Returns 0, or -1 with the reason the message is malformed in reason
 * (nothing to free; out->log_id may still name the event). */
int sc_event_parse(const char *body, size_t len, const char *message_id, size_t message_id_len,
                   struct sc_parsed_event *out, char *reason, size_t reason_len);

void sc_event_free(struct sc_parsed_event *e);

#endif
