/* Inside the envelope: every mode (structured, binary, plain, each member of
 * a batch) ends in the same validation of the same attributes, so the
 * malformed rules and the id's canonical form are one code path. */
#ifndef SC_ENVELOPE_ATTRIBUTES_H
#define SC_ENVELOPE_ATTRIBUTES_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "envelope/event.h"
#include "io/sc_rabbitmq.h"

/* An event's data as its mode carries it. */
struct sc_event_data {
    int structured;   /* a JSON-format body: p is the JSON text of its `data` member, and
                         root may hold data_base64; else p is the message body */
    const char *p;    /* NULL: no data (no `data` member, an empty body) */
    size_t len;
    int json_checked; /* the body is known to be valid JSON already (plain) */
};

/* Validates the attributes in root (a JSON object; the event takes the
 * reference, also on failure) against the spec's rules and fills out with
 * them and a copy of the data (JSON data as data_json, any data as
 * data_bytes, by datacontenttype). message_id is the AMQP property that must
 * name the same id, or NULL. Returns 0, or -1 with the reason in reason
 * (out->log_id and out->id_from survive). */
int sc_event_from_attributes(json_t *root, const struct sc_event_data *data,
                             const char *message_id, size_t message_id_len,
                             struct sc_parsed_event *out, char *reason, size_t reason_len);

struct sc_message;
struct sc_envelope_opts;

/* binary.c: the CloudEvents prefix of a message's `specversion` header (an
 * index into sc_binary_prefixes), or -1 when it has none. */
extern const char *const sc_binary_prefixes[4];
int sc_binary_prefix(const struct sc_message *m);

/* binary.c: a binary-mode event (attributes from the headers of `prefix`). */
int sc_event_parse_binary(const struct sc_message *m, int prefix, struct sc_parsed_event *out,
                          char *reason, size_t reason_len);

/* plain.c: a plain message as an event. */
int sc_event_parse_plain(const struct sc_message *m, const struct sc_envelope_opts *o,
                         struct sc_parsed_event *out, char *reason, size_t reason_len);

/* message.c: a header of the delivery by its exact name, or NULL. */
const amqp_field_value_t *sc_envelope_header(const struct sc_message *m, const char *key);

/* message.c: 1 with *v set when the header value is an AMQP integer (any
 * width that fits int64), 0 otherwise. */
int sc_envelope_integer(const amqp_field_value_t *f, int64_t *v);

/* message.c: seconds since the epoch (an AMQP timestamp) as RFC 3339 UTC,
 * "2026-11-29T10:00:00Z". */
void sc_envelope_time(uint64_t seconds, char *out, size_t len);

#endif
