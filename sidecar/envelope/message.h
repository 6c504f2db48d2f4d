/* The events of one delivery, in every mode the consumer reads:
 *
 *   structured  content_type application/cloudevents+json: the body is the
 *               event (event.h)
 *   binary      any other content type, or none (the AMQP binding's rule):
 *               the attributes are headers under one prefix (cloudEvents:,
 *               cloudEvents_, ce- or ce_), the body is `data`,
 *               datacontenttype the content_type
 *   batch       content_type application/cloudevents-batch+json: the body is
 *               a JSON array of structured events, each its own event
 *   plain       the consumer's "envelope": "plain": the body is `data`, the
 *               id the message_id, type/source/subject/time from properties
 *
 * One delivery is opened once (the mode and, for a batch, each member's
 * span), then each of its events is parsed on its own: a malformed member
 * is that member's problem, not its siblings'. */
#ifndef SC_ENVELOPE_MESSAGE_H
#define SC_ENVELOPE_MESSAGE_H

#include <stddef.h>

#include "envelope/event.h"
#include "io/sc_rabbitmq.h"

#define SC_CT_STRUCTURED "application/cloudevents+json"
#define SC_CT_BATCH "application/cloudevents-batch+json"

/* The most members one batch-mode message may hold (SC_BATCH_LIMIT). */
#define SC_MESSAGE_BATCH_MAX 1000

/* A consumer's envelope settings. */
struct sc_envelope_opts {
    int plain;                 /* "envelope": "plain" */
    const char *plain_source;  /* NULL: the exchange */
    const char *plain_subject; /* an RFC 6901 pointer into the body, or NULL */
};

enum sc_message_mode { SC_MODE_STRUCTURED, SC_MODE_BINARY, SC_MODE_BATCH, SC_MODE_PLAIN };

/* A delivery as the envelope reads it. */
struct sc_message {
    const amqp_basic_properties_t *props;
    amqp_bytes_t body;
    amqp_bytes_t exchange, routing_key; /* what it was delivered through */
};

/* What sc_message_open found. */
struct sc_message_events {
    enum sc_message_mode mode;
    int n;              /* events in the message: 1, or a batch's members */
    size_t (*spans)[2]; /* a batch: each member's [start, end) in the body */
};

struct sc_consumer_config;

/* A consumer's envelope settings from its config. */
struct sc_envelope_opts sc_envelope_opts_for(const struct sc_consumer_config *k);

/* 1 when the content type says batch mode (for a cloudevents consumer). */
int sc_message_is_batch(const amqp_basic_properties_t *p);

/* Finds the mode and the events of m (an empty batch has none: n is 0).
 * Returns 0, or -1 with the reason the whole message is malformed (an
 * unknown CloudEvents format, a batch that is not a JSON array or is larger
 * than SC_MESSAGE_BATCH_MAX). Free with sc_message_events_free either way. */
int sc_message_open(const struct sc_message *m, const struct sc_envelope_opts *o,
                    struct sc_message_events *out, char *reason, size_t reason_len);

/* Parses event i (0 <= i < evs->n) of m. Returns 0, or -1 with the reason
 * that event is malformed (out->log_id may still name it). */
int sc_message_event(const struct sc_message *m, const struct sc_envelope_opts *o,
                     const struct sc_message_events *evs, int i, struct sc_parsed_event *out,
                     char *reason, size_t reason_len);

void sc_message_events_free(struct sc_message_events *e);

const char *sc_message_mode_name(enum sc_message_mode m);

/* The media type of a content_type property: lowercased, parameters (";
 * charset=...") and surrounding blanks cut. Empty when there is none. */
void sc_media_type(const amqp_basic_properties_t *p, char *out, size_t len);

/* 1 when a media type declares JSON: * / json or * / *+json (JSON format
 * 3.1.1). */
int sc_media_type_is_json(const char *media_type);

#endif
