/* Fuzz target: the CloudEvents envelope parser (outside input). */
#include <stdint.h>
#include <string.h>

#include "sidecar/envelope/event.h"
#include "sidecar/envelope/json_span.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sc_parsed_event ev;
    char reason[512];
    /* Also as if the first 36 bytes were the message_id property. */
    for (int with_id = 0; with_id < 2; with_id++) {
        const char *mid = with_id && size >= 36 ? (const char *)data : NULL;
        if (sc_event_parse((const char *)data, size, mid, mid ? 36 : 0, &ev, reason, sizeof reason) == 0) {
            /* A parsed event always carries a valid id and the required attributes. */
            if (!sc_is_canonical_uuid(ev.ev.id, strlen(ev.ev.id)) || !ev.ev.type[0] || !ev.ev.source[0])
                __builtin_trap();
            /* data is one valid JSON value, exactly as the body wrote it. */
            if (ev.ev.data_json && (!sc_json_text_valid(ev.ev.data_json, ev.ev.data_json_len) ||
                                    !memmem(data, size, ev.ev.data_json, ev.ev.data_json_len)))
                __builtin_trap();
            sc_event_free(&ev);
        } else if (!reason[0]) {
            __builtin_trap(); /* a refusal always says why */
        }
    }
    return 0;
}
