/* The W3C trace context at every hop that reads it: the validator (one for
 * the producer, the relay and the consumer), and the consumer's envelope
 * taking traceparent/tracestate from a structured body, binary headers and
 * plain headers, ignoring invalid values without refusing the event, with a
 * new span id per parse whose parent is the message's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sidecar/envelope/message.h"
#include "sidecar/envelope/trace_context.h"
#include "tap.h"

#define ID "4dc2061a-8b9e-44fe-b436-3ed01fc9eb6e"
#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static int tp_ok(const char *s)
{
    char why[160];
    return sc_traceparent_check(s, strlen(s), why, sizeof why);
}

static int ts_ok(const char *s)
{
    char why[160];
    return sc_tracestate_check(s, strlen(s), why, sizeof why);
}

static void validator(void)
{
    ok(tp_ok(TP), "the W3C example traceparent is valid");
    ok(tp_ok("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"), "flags 00 are valid");
    ok(!tp_ok("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"), "uppercase hex is not");
    ok(!tp_ok("00-00000000000000000000000000000000-00f067aa0ba902b7-01"), "an all-zero trace id is not");
    ok(!tp_ok("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"), "an all-zero parent id is not");
    ok(!tp_ok("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), "a version other than 00 is not");
    ok(!tp_ok("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-"), "a longer value is not");
    ok(!tp_ok("00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01"), "misplaced dashes are not");
    ok(!tp_ok("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bz-01"), "a non-hex digit is not");
    ok(!tp_ok("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g"), "non-hex flags are not");
    ok(!tp_ok(""), "empty is not");
    char why[160];
    sc_traceparent_check("00-00000000000000000000000000000000-00f067aa0ba902b7-01", 55, why, sizeof why);
    ok(strstr(why, "trace-id") && strstr(why, "zeros"), "the reason names the part: %s", why);

    ok(ts_ok("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"), "the W3C example tracestate is valid");
    ok(ts_ok("rojo=1 , congo=2,\t,"), "blanks around members and empty members are allowed");
    ok(ts_ok("fw529a3039@dt=id,tenant_1@sys-9=v/x*y"), "multi-tenant keys are valid");
    ok(ts_ok(""), "an empty list is valid");
    ok(!ts_ok("Rojo=1"), "a key starting uppercase is not");
    ok(!ts_ok("rojo"), "a member without = is not");
    ok(!ts_ok("rojo=a=b"), "= inside a value is not");
    ok(!ts_ok("rojo=1,rojo=2"), "a key twice is not");
    ok(!ts_ok("rojo=1 x,@sys=2"), "a tenant key without tenant is not");
    ok(!ts_ok("rojo=ab\x01"), "a control character is not");
    ok(!ts_ok("t@abcdefghijklmno=1"), "a system id longer than 14 is not");
    char many[600] = "";
    for (int i = 0; i < 33; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%sk%d=v", i ? "," : "", i);
    ok(!ts_ok(many), "33 members are too many");
    ok(sc_tracestate_check(many, strlen(many), why, sizeof why) == 0 && strstr(why, "32"), "%s", why);
    many[strlen(many) - 5] = 0; /* drop the last member: 32 */
    ok(ts_ok(many), "32 members are allowed");
    char big[600];
    memset(big, 'a', sizeof big);
    memcpy(big, "k=", 2);
    big[513] = 0;
    ok(!ts_ok(big), "513 characters are too many");

    char a[17], b[17];
    ok(sc_span_id_new(a) == 0 && sc_span_id_new(b) == 0 && strlen(a) == 16 && strcmp(a, b) != 0,
       "span ids: 16 hex digits, a new one each time (%s, %s)", a, b);
    char tid[33], pid[17];
    sc_trace_id_of(TP, tid);
    sc_trace_parent_id_of(TP, pid);
    is_str(tid, "4bf92f3577b34da6a3ce929d0e0e4736", "trace id of a traceparent");
    is_str(pid, "00f067aa0ba902b7", "parent id of a traceparent");
}

/* ---- the consumer's envelope ---- */

static amqp_table_entry_t hdr[16];
static amqp_basic_properties_t props;

static void header(const char *key, const char *val)
{
    int n = props.headers.num_entries;
    hdr[n].key = amqp_cstring_bytes(key);
    hdr[n].value.kind = AMQP_FIELD_KIND_UTF8;
    hdr[n].value.value.bytes = amqp_cstring_bytes(val);
    props._flags |= AMQP_BASIC_HEADERS_FLAG;
    props.headers.entries = hdr;
    props.headers.num_entries = n + 1;
}

/* Parses the one event of a delivery; returns 0 when it is an event. */
static int parse(const char *body, int plain, struct sc_parsed_event *e)
{
    struct sc_message m = {.props = &props, .body = amqp_cstring_bytes(body),
                           .exchange = amqp_cstring_bytes("orders"),
                           .routing_key = amqp_cstring_bytes("ORDER_ACCEPTED")};
    struct sc_envelope_opts o = {.plain = plain};
    struct sc_message_events evs;
    char reason[256] = "";
    memset(e, 0, sizeof *e);
    int rc = sc_message_open(&m, &o, &evs, reason, sizeof reason) ||
             sc_message_event(&m, &o, &evs, 0, e, reason, sizeof reason);
    sc_message_events_free(&evs);
    if (rc)
        printf("# %s\n", reason);
    return rc;
}

static void structured_body(const char *extra, char *out, size_t len)
{
    snprintf(out, len, "{\"specversion\":\"1.0\",\"id\":\"%s\",\"type\":\"T\",\"source\":\"S\"%s,"
             "\"data\":{}}", ID, extra);
}

static void envelope(void)
{
    char body[1024];
    struct sc_parsed_event e;

    memset(&props, 0, sizeof props);
    props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG;
    props.content_type = amqp_cstring_bytes(SC_CT_STRUCTURED);
    structured_body(",\"traceparent\":\"" TP "\",\"tracestate\":\"rojo=1\"", body, sizeof body);
    ok(parse(body, 0, &e) == 0, "structured: parsed");
    is_str(e.ev.traceparent, TP, "structured: traceparent handed on unchanged");
    is_str(e.ev.tracestate, "rojo=1", "structured: tracestate");
    is_str(e.ev.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736", "structured: trace_id");
    is_str(e.parent_span_id, "00f067aa0ba902b7", "structured: the parent span is the message's");
    ok(e.ev.span_id && strlen(e.ev.span_id) == 16 && strcmp(e.ev.span_id, "00f067aa0ba902b7") != 0,
       "structured: a span id of its own");
    ok(e.ev.struct_size == sizeof e.ev && SC_EVENT_HAS(&e.ev, span_id), "struct_size says the fields are there");
    char first[17];
    snprintf(first, sizeof first, "%s", e.span_id);
    sc_event_free(&e);
    ok(parse(body, 0, &e) == 0 && strcmp(e.span_id, first) != 0, "a new span id per handling");
    sc_event_free(&e);

    structured_body(",\"traceparent\":\"00-xyz\",\"tracestate\":\"rojo=1\"", body, sizeof body);
    ok(parse(body, 0, &e) == 0, "structured: an invalid traceparent does not refuse the event");
    ok(!e.ev.traceparent && !e.ev.tracestate && !e.ev.trace_id && !e.ev.span_id && !e.trace_id[0],
       "and it is ignored, the tracestate with it");
    ok(strstr(e.trace_ignored, "traceparent") != NULL, "with a reason to log: %s", e.trace_ignored);
    sc_event_free(&e);

    structured_body(",\"traceparent\":42", body, sizeof body);
    ok(parse(body, 0, &e) == 0 && !e.ev.traceparent && strstr(e.trace_ignored, "not a string"),
       "structured: a traceparent that is not a string is ignored: %s", e.trace_ignored);
    sc_event_free(&e);

    structured_body(",\"traceparent\":\"" TP "\",\"tracestate\":\"Bad Key=1\"", body, sizeof body);
    ok(parse(body, 0, &e) == 0 && e.ev.traceparent && !e.ev.tracestate && strstr(e.trace_ignored, "tracestate"),
       "structured: an invalid tracestate alone is ignored, the traceparent kept: %s", e.trace_ignored);
    sc_event_free(&e);

    structured_body("", body, sizeof body);
    ok(parse(body, 0, &e) == 0 && !e.ev.traceparent && !e.trace_ignored[0] && !e.ev.span_id,
       "structured: no trace context, nothing ignored");
    sc_event_free(&e);

    memset(&props, 0, sizeof props);
    header("cloudEvents:specversion", "1.0");
    header("cloudEvents:id", ID);
    header("cloudEvents:type", "T");
    header("cloudEvents:source", "S");
    header("cloudEvents:traceparent", TP);
    header("cloudEvents:tracestate", "congo=t61rcWkgMzE");
    ok(parse("{}", 0, &e) == 0, "binary: parsed");
    is_str(e.ev.traceparent, TP, "binary: traceparent from cloudEvents:traceparent");
    is_str(e.ev.tracestate, "congo=t61rcWkgMzE", "binary: tracestate from cloudEvents:tracestate");
    sc_event_free(&e);
    memset(&props, 0, sizeof props);
    header("ce-specversion", "1.0");
    header("ce-id", ID);
    header("ce-type", "T");
    header("ce-source", "S");
    header("ce-traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7");
    ok(parse("{}", 0, &e) == 0 && !e.ev.traceparent && e.trace_ignored[0],
       "binary: an invalid ce-traceparent is ignored: %s", e.trace_ignored);
    sc_event_free(&e);

    memset(&props, 0, sizeof props);
    props._flags = AMQP_BASIC_MESSAGE_ID_FLAG;
    props.message_id = amqp_cstring_bytes(ID);
    header("traceparent", TP);
    header("tracestate", "rojo=1");
    ok(parse("{\"a\":1}", 1, &e) == 0, "plain: parsed");
    is_str(e.ev.traceparent, TP, "plain: traceparent from the traceparent header");
    is_str(e.ev.tracestate, "rojo=1", "plain: tracestate header");
    sc_event_free(&e);
    memset(&props, 0, sizeof props);
    props._flags = AMQP_BASIC_MESSAGE_ID_FLAG;
    props.message_id = amqp_cstring_bytes(ID);
    header("traceparent", "junk");
    ok(parse("{\"a\":1}", 1, &e) == 0 && !e.ev.traceparent && e.trace_ignored[0],
       "plain: an invalid traceparent header is ignored: %s", e.trace_ignored);
    sc_event_free(&e);
}

int main(void)
{
    validator();
    envelope();
    return done();
}
