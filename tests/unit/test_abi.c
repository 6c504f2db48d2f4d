/* The handler ABI is pinned: an accidental change of size, offsets or
 * version fails here. The public header must compile on its own, so it is
 * included first. */
#include "sidecar/handler.h"

#include <stddef.h>

#include "tap.h"

int main(void)
{
    is_int(SC_HANDLER_ABI_VERSION, 1, "ABI version is 1");
    is_str(SC_HANDLER_SYMBOL, "sc_handler_v1", "exported symbol name");
    is_int(offsetof(struct sc_handler_v1, abi_version), 0, "abi_version first");
    is_int(offsetof(struct sc_handler_v1, struct_size), 4, "struct_size second");
    is_int(offsetof(struct sc_handler_v1, name), 8, "name at 8");
    is_int(offsetof(struct sc_handler_v1, init), 16, "init at 16");
    is_int(offsetof(struct sc_handler_v1, handle), 24, "handle at 24");
    is_int(offsetof(struct sc_handler_v1, shutdown), 32, "shutdown at 32");
    is_int(offsetof(struct sc_handler_v1, handle_batch), 40, "handle_batch appended at 40");
    is_int(SC_HANDLER_V1_MIN_SIZE, 40, "the first v1 struct was 40 bytes: older handlers stay loadable");
    is_int(sizeof(struct sc_handler_v1), 48, "v1 struct is 48 bytes now (LP64)");
    is_int(offsetof(struct sc_event, id), 0, "event.id");
    is_int(offsetof(struct sc_event, subject), 24, "event.subject");
    is_int(offsetof(struct sc_event, eventversion), 40, "event.eventversion");
    is_int(offsetof(struct sc_event, data_json), 56, "event.data_json");
    /* appended for the trace context: the fields before keep their offsets above */
    is_int(offsetof(struct sc_event, struct_size), 72, "event.struct_size right after data_json_len");
    is_int(offsetof(struct sc_event, traceparent), 80, "event.traceparent");
    is_int(offsetof(struct sc_event, tracestate), 88, "event.tracestate");
    is_int(offsetof(struct sc_event, trace_id), 96, "event.trace_id");
    is_int(offsetof(struct sc_event, span_id), 104, "event.span_id");
    /* appended for data of any content type */
    is_int(offsetof(struct sc_event, data_bytes), 112, "event.data_bytes right after span_id");
    is_int(offsetof(struct sc_event, data_bytes_len), 120, "event.data_bytes_len");
    is_int(offsetof(struct sc_event, datacontenttype), 128, "event.datacontenttype");
    is_int(offsetof(struct sc_event, original_id), 136, "event.original_id");
    is_int(sizeof(struct sc_event), 144, "event struct is 144 bytes (LP64)");
    struct sc_event traced = {.struct_size = 112};
    ok(SC_EVENT_HAS(&traced, span_id) && !SC_EVENT_HAS(&traced, data_bytes),
       "SC_EVENT_HAS: an event of 112 bytes (trace context, no more) has no data_bytes");
    struct sc_event old = {.struct_size = 72};
    ok(!SC_EVENT_HAS(&old, traceparent), "SC_EVENT_HAS: an event of 72 bytes has no traceparent");
    struct sc_event now = {.struct_size = sizeof now};
    ok(SC_EVENT_HAS(&now, span_id) && SC_EVENT_HAS(&now, original_id),
       "SC_EVENT_HAS: a full event has span_id and original_id");
    is_int(SC_HANDLER_OK, 0, "OK = 0");
    is_int(SC_HANDLER_RETRY, 1, "RETRY = 1");
    is_int(SC_HANDLER_REJECT, 2, "REJECT = 2");
    return done();
}
