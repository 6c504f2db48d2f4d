/* Fuzz target: the CloudEvents envelope parser (outside input): the body as
 * a structured event, as a batch, and as a plain message's data; and the
 * input as a `sidecar try` message file (properties, headers, body), read
 * in every mode the content type and headers choose, binary included. The
 * corpus holds the CloudEvents probes (tests/fuzz/probes.py). */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sidecar/admin/try_file.h"
#include "sidecar/envelope/event.h"
#include "sidecar/envelope/json_span.h"
#include "sidecar/envelope/message.h"

/* A parsed event carries a valid id and the required attributes; its JSON
 * data is one valid JSON value, and its bytes are there (JSON data's text
 * exactly as the input wrote it unless it came out of data_base64). */
static void check(const struct sc_parsed_event *ev, const uint8_t *data, size_t size)
{
    if (!sc_is_canonical_uuid(ev->ev.id, strlen(ev->ev.id)) || !ev->ev.type[0] || !ev->ev.source[0] ||
        !ev->ev.original_id || ev->ev.struct_size != sizeof ev->ev)
        __builtin_trap();
    if (ev->ev.data_json && !sc_json_text_valid(ev->ev.data_json, ev->ev.data_json_len))
        __builtin_trap();
    if (ev->ev.data_json && (ev->ev.data_bytes != (const unsigned char *)ev->ev.data_json ||
                             ev->ev.data_bytes_len != ev->ev.data_json_len))
        __builtin_trap();
    int decoded = ev->json && json_object_get((json_t *)ev->json, "data_base64");
    if (ev->ev.data_json && !decoded && !memmem(data, size, ev->ev.data_json, ev->ev.data_json_len))
        __builtin_trap();
    if (ev->ev.data_bytes_len && !ev->ev.data_bytes)
        __builtin_trap();
}

/* Every event of message m in the modes of opts[0..n). */
static void each_event(const struct sc_message *m, const struct sc_envelope_opts *opts, int n,
                       const uint8_t *data, size_t size)
{
    char reason[512];
    for (int i = 0; i < n; i++) {
        struct sc_message_events evs;
        reason[0] = 0;
        if (sc_message_open(m, &opts[i], &evs, reason, sizeof reason)) {
            if (!reason[0])
                __builtin_trap();
        } else {
            for (int j = 0; j < evs.n; j++) {
                struct sc_parsed_event ev;
                reason[0] = 0;
                if (sc_message_event(m, &opts[i], &evs, j, &ev, reason, sizeof reason) == 0) {
                    check(&ev, data, size);
                    sc_event_free(&ev);
                } else if (!reason[0]) {
                    __builtin_trap();
                }
            }
        }
        sc_message_events_free(&evs);
    }
}

/* The input as a message file: its headers choose the mode. */
static void message_file(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return;
    memcpy(text, data, size);
    text[size] = 0;
    struct sc_try_message tm;
    char err[256];
    if (sc_try_message_parse(text, size, "x", &tm, err, sizeof err))
        return;
    struct sc_message m = {.props = &tm.props, .body = tm.body, .exchange = tm.exchange,
                           .routing_key = tm.routing_key};
    struct sc_envelope_opts modes[2] = {{0}, {.plain = 1, .plain_subject = "/a"}};
    each_event(&m, modes, 2, data, size);
    sc_try_message_free(&tm);
}

/* The body as every event of a batch-mode message, and as a plain message. */
static void other_modes(const uint8_t *data, size_t size)
{
    amqp_basic_properties_t p = {._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG,
                                 .content_type = amqp_cstring_bytes(SC_CT_BATCH),
                                 .message_id = amqp_cstring_bytes("order-1")};
    struct sc_message m = {.props = &p, .body = {size, (void *)data},
                           .exchange = amqp_cstring_bytes("x"), .routing_key = amqp_cstring_bytes("k")};
    struct sc_envelope_opts modes[2] = {{0}, {.plain = 1, .plain_subject = "/a/0"}};
    each_event(&m, modes, 2, data, size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sc_parsed_event ev;
    char reason[512];
    /* Also as if the first 36 bytes were the message_id property. */
    for (int with_id = 0; with_id < 2; with_id++) {
        const char *mid = with_id && size >= 36 ? (const char *)data : NULL;
        if (sc_event_parse((const char *)data, size, mid, mid ? 36 : 0, &ev, reason, sizeof reason) == 0) {
            check(&ev, data, size);
            sc_event_free(&ev);
        } else if (!reason[0]) {
            __builtin_trap(); /* a refusal always says why */
        }
    }
    other_modes(data, size);
    message_file(data, size);
    return 0;
}
