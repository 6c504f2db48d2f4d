/* The files `sidecar try` reads: a message as a publisher sends it.
 *
 * A file whose first non-blank byte is `{` is a structured event (the body
 * alone, content_type application/cloudevents+json); `[` a batch-mode body
 * (content_type application/cloudevents-batch+json). Anything else is a
 * message file: field lines, one blank line, then the body, byte for byte
 * (to the end of the file, a final newline included):
 *
 *     # comment
 *     content_type: application/json
 *     message_id: order-42
 *     type: ORDER_ACCEPTED
 *     timestamp: 1764410400               (seconds since 1970, UTC)
 *     exchange: orders                    (default: the consumer's first binding's)
 *     routing_key: ORDER_ACCEPTED         (default: none)
 *     header ce-specversion: 1.0          (a string header; the name ends at the
 *     header cloudEvents:id: 4dc2...      first ": ", so names may hold ':')
 *     int-header eventversion: 3          (a 64-bit integer header)
 *
 *     {"orderId": 1001}
 */
#ifndef SC_TRY_FILE_H
#define SC_TRY_FILE_H

#include <stddef.h>

#include "config.h"
#include "io/sc_rabbitmq.h"

#define SC_TRY_MAX_FILE_BYTES (16u << 20)
#define SC_TRY_MAX_HEADERS 64

struct sc_try_message {
    char *text; /* the file; every string below points into it */
    amqp_basic_properties_t props;
    amqp_table_entry_t headers[SC_TRY_MAX_HEADERS];
    amqp_bytes_t body, exchange, routing_key;
    int fields; /* a message file (fields and body), not a bare body */
};

/* Reads path as a message for consumer k. Returns 0, or -1 with why in err
 * (nothing to free). */
int sc_try_message_read(const char *path, const struct sc_consumer_config *k,
                        struct sc_try_message *m, char *err, size_t err_len);

/* The same from text[0..len) (malloc'd, a NUL at text[len]), which m takes
 * (freed on failure too); exchange is the default exchange. */
int sc_try_message_parse(char *text, size_t len, const char *exchange, struct sc_try_message *m,
                         char *err, size_t err_len);

void sc_try_message_free(struct sc_try_message *m);

#endif
