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
    SC_RELAY_NO_MEMORY,   /* nothing is known about the row: leave it to its lease */
};

/* Builds the message of row for exchange into row->body/props and m (which
 * points into row). */
enum sc_relay_build sc_relay_message_build(struct sc_relay_row *row, const char *exchange,
                                           struct sc_publish *m, char *why, size_t why_len);

/* Frees what a claim and a build put in row and zeroes it. */
void sc_relay_row_clear(struct sc_relay_row *row);

#endif
