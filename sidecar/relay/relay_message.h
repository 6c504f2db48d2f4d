/* The CloudEvents message of one outbox row: the envelope rules
 * (outbox_rules.h), the body assembled as text around the payload as the
 * server returned it, and the AMQP properties. */
#ifndef SC_RELAY_MESSAGE_H
#define SC_RELAY_MESSAGE_H

#include <stddef.h>

#include "relay_core.h"

enum sc_relay_build {
    SC_RELAY_BUILT = 0,   /* row->body, row->props and *m are set */
    SC_RELAY_INVALID,     /* the row breaks a rule; why names it */
    SC_RELAY_TOO_LARGE,   /* its body is above p->max_message_bytes; why names both sizes */
    SC_RELAY_NO_MEMORY,   /* nothing is known about the row: leave it to its lease */
};

/* Builds the message of row for p->exchange, in p's content mode, into
 * row->body/props/headers and m (which points into row). */
enum sc_relay_build sc_relay_message_build(struct sc_relay_row *row,
                                           const struct sc_relay_params *p,
                                           struct sc_publish *m, char *why, size_t why_len);

/* The trace context a row's message carries: its columns where they are
 * valid W3C values, NULL where absent or invalid (an invalid one is logged
 * when log_invalid, and left out: the event is published without it, never
 * refused for it). */
struct sc_relay_trace {
    const char *traceparent, *tracestate;
    char trace_id[33]; /* empty without a traceparent */
};
void sc_relay_trace_of(const struct sc_relay_row *row, struct sc_relay_trace *out,
                       int log_invalid);

/* Queues the span of row's publish (from its build to now, a child of the
 * row's traceparent) when it has trace context and an exporter runs. */
void sc_relay_span(const struct sc_relay_row *row, const struct sc_relay_trace *tc,
                   const char *exchange, const char *outcome, int error);

/* Frees what a claim and a build put in row and zeroes it. */
void sc_relay_row_clear(struct sc_relay_row *row);

#endif
