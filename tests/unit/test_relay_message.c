/* The relay's CloudEvents message of one row: the body is text around the
 * payload as stored, attributes escaped as JSON strings, and the consumer's
 * parser reads back exactly what the row holds. */
#include <stdlib.h>
#include <string.h>

#include "sidecar/envelope/attributes.h"
#include "sidecar/envelope/event.h"
#include "sidecar/envelope/message.h"
#include "sidecar/relay/relay_message.h"
#include "tap.h"

#define ID "4dc2061a-8b9e-44fe-b436-3ed01fc9eb6e"

static struct sc_relay_row row(const char *atype, const char *aid, const char *type, const char *payload)
{
    struct sc_relay_row r;
    memset(&r, 0, sizeof r);
    strcpy(r.event_id, ID);
    r.aggregate_type = strdup(atype);
    r.aggregate_id = strdup(aid);
    r.event_type = strdup(type);
    r.payload = strdup(payload);
    strcpy(r.time, "2026-12-01T10:00:00.000001Z");
    r.version = 7;
    return r;
}

static const struct sc_relay_params structured = {.exchange = "orders", .max_message_bytes = 1 << 24};
static const struct sc_relay_params binary = {.exchange = "orders", .binary = 1, .max_message_bytes = 1 << 24};

/* The header key of the built message, or NULL. */
static const amqp_field_value_t *header(const struct sc_publish *m, const char *key)
{
    const amqp_table_t *t = &m->props->headers;
    for (int i = 0; i < t->num_entries; i++)
        if (t->entries[i].key.len == strlen(key) && memcmp(t->entries[i].key.bytes, key, strlen(key)) == 0)
            return &t->entries[i].value;
    return NULL;
}

static int header_is(const struct sc_publish *m, const char *key, const char *want)
{
    const amqp_field_value_t *v = header(m, key);
    return v && v->kind == AMQP_FIELD_KIND_UTF8 && v->value.bytes.len == strlen(want) &&
           memcmp(v->value.bytes.bytes, want, strlen(want)) == 0;
}

/* Binary mode: the payload verbatim as the body, the attributes as
 * cloudEvents: headers, read back by the consumer's own binary parser. */
static void binary_mode(void)
{
    char why[256] = "";
    struct sc_publish m;
    const char *payload = "{\"n\":123456789012345678901234567890,\"x\":1.10}";
    struct sc_relay_row r = row("urn:shop:order", "1001", "ORDER_ACCEPTED", payload);
    is_int(sc_relay_message_build(&r, &binary, &m, why, sizeof why), SC_RELAY_BUILT, "binary: built (%s)", why);
    ok(m.body.len == strlen(payload) && memcmp(m.body.bytes, payload, m.body.len) == 0,
       "binary: the body is the payload byte for byte");
    ok(m.props->content_type.len == 16 && memcmp(m.props->content_type.bytes, "application/json", 16) == 0,
       "binary: content_type application/json");
    ok(m.props->message_id.len == 36 && memcmp(m.props->message_id.bytes, ID, 36) == 0, "binary: message_id is the id");
    ok(m.mandatory && m.props->delivery_mode == AMQP_DELIVERY_PERSISTENT, "binary: mandatory, persistent");
    is_str(m.routing_key, "ORDER_ACCEPTED", "binary: routing key is the event type");
    ok(header_is(&m, "cloudEvents:specversion", "1.0") && header_is(&m, "cloudEvents:id", ID) &&
       header_is(&m, "cloudEvents:type", "ORDER_ACCEPTED") &&
       header_is(&m, "cloudEvents:source", "urn:shop:order") && header_is(&m, "cloudEvents:subject", "1001") &&
       header_is(&m, "cloudEvents:time", "2026-12-01T10:00:00.000001Z"),
       "binary: each attribute a cloudEvents: header");
    const amqp_field_value_t *v = header(&m, "cloudEvents:eventversion");
    ok(v && v->kind == AMQP_FIELD_KIND_I64 && v->value.i64 == 7, "binary: eventversion an integer header");
    ok(!header(&m, "cloudEvents:datacontenttype") && !header(&m, "cloudEvents:data") &&
       !header(&m, "cloudEvents:traceparent"),
       "binary: no datacontenttype or data header, no traceparent when the row has none");
    struct sc_message msg = {.props = m.props, .body = m.body};
    struct sc_parsed_event e;
    char reason[256] = "";
    int prefix = sc_binary_prefix(&msg);
    ok(prefix == 0 && sc_event_parse_binary(&msg, prefix, &e, reason, sizeof reason) == 0,
       "binary: the consumer's binary parser reads it (%s)", reason);
    is_str(e.ev.id, ID, "binary: id");
    is_str(e.ev.subject, "1001", "binary: subject");
    is_str(e.ev.time, "2026-12-01T10:00:00.000001Z", "binary: time with microseconds");
    ok(e.ev.has_eventversion && e.ev.eventversion == 7, "binary: eventversion");
    is_str(e.ev.data_json, payload, "binary: data exactly the payload");
    sc_event_free(&e);
    sc_relay_row_clear(&r);

    r = row("ORDER", "bad \xff byte", "T", "{}");
    is_int(sc_relay_message_build(&r, &binary, &m, why, sizeof why), SC_RELAY_INVALID,
           "binary: a field that is not UTF-8 is invalid too");
    sc_relay_row_clear(&r);
}

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

/* The row's trace context: the CloudEvents distributed-tracing attributes
 * in both modes, only when set, an invalid one left out. */
static void trace_context(void)
{
    char why[256] = "";
    struct sc_publish m;
    struct sc_parsed_event e;
    char reason[256] = "";
    struct sc_relay_row r = row("ORDER", "1", "T", "{}");
    strcpy(r.traceparent, TP);
    r.tracestate = strdup("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
    is_int(sc_relay_message_build(&r, &structured, &m, why, sizeof why), SC_RELAY_BUILT, "trace: built");
    ok(sc_event_parse(m.body.bytes, m.body.len, ID, 36, &e, reason, sizeof reason) == 0, "trace: parsed (%s)", reason);
    is_str(e.ev.traceparent, TP, "structured: traceparent attribute in the body");
    is_str(e.ev.tracestate, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", "structured: tracestate attribute");
    sc_event_free(&e);
    free(r.body);
    r.body = NULL;
    is_int(sc_relay_message_build(&r, &binary, &m, why, sizeof why), SC_RELAY_BUILT, "trace: built binary");
    ok(header_is(&m, "cloudEvents:traceparent", TP) &&
       header_is(&m, "cloudEvents:tracestate", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"),
       "binary: cloudEvents:traceparent and cloudEvents:tracestate headers");
    struct sc_relay_trace tc;
    sc_relay_trace_of(&r, &tc, 0);
    is_str(tc.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736", "the trace id for the relay's log lines");
    sc_relay_row_clear(&r);

    r = row("ORDER", "1", "T", "{}");
    strcpy(r.traceparent, "00-00000000000000000000000000000000-00f067aa0ba902b7-01");
    r.tracestate = strdup("rojo=1");
    is_int(sc_relay_message_build(&r, &structured, &m, why, sizeof why), SC_RELAY_BUILT,
           "an invalid traceparent does not fail the row");
    ok(!strstr(m.body.bytes, "traceparent") && !strstr(m.body.bytes, "tracestate"),
       "it is left out, with its tracestate");
    sc_relay_row_clear(&r);
    r = row("ORDER", "1", "T", "{}");
    strcpy(r.traceparent, TP);
    r.tracestate = strdup("Not Valid");
    is_int(sc_relay_message_build(&r, &binary, &m, why, sizeof why), SC_RELAY_BUILT, "an invalid tracestate neither");
    ok(header_is(&m, "cloudEvents:traceparent", TP) && !header(&m, "cloudEvents:tracestate"),
       "the traceparent is published, the tracestate left out");
    sc_relay_row_clear(&r);
}

/* relay.max_message_bytes bounds the body as built, in both modes: the
 * payload alone, or the envelope around it, over the bound is refused
 * naming both sizes; exactly the bound is sent. */
static void size_bound(void)
{
    char why[256] = "", payload[200];
    struct sc_publish m;
    memset(payload, 'x', sizeof payload - 1);
    payload[0] = '"';
    payload[sizeof payload - 2] = '"';
    payload[sizeof payload - 1] = 0; /* a JSON string of 199 bytes */
    struct sc_relay_row r = row("ORDER", "1", "T", payload);
    struct sc_relay_params p = structured;
    p.max_message_bytes = 198;
    is_int(sc_relay_message_build(&r, &p, &m, why, sizeof why), SC_RELAY_TOO_LARGE, "a payload over the bound");
    ok(strstr(why, "payload alone is 199 bytes") && strstr(why, "relay.max_message_bytes (198)"),
       "names the payload's size and the bound (%s)", why);
    p.max_message_bytes = 199;
    is_int(sc_relay_message_build(&r, &p, &m, why, sizeof why), SC_RELAY_TOO_LARGE,
           "a payload at the bound, the envelope around it over");
    char want[80];
    snprintf(want, sizeof want, "the message is %zu bytes, above relay.max_message_bytes (199)", m.body.len);
    ok(m.body.len > 199 && strstr(why, want), "names the message's size and the bound (%s)", why);
    size_t built = m.body.len;
    free(r.body);
    r.body = NULL;
    p.max_message_bytes = (int)built;
    is_int(sc_relay_message_build(&r, &p, &m, why, sizeof why), SC_RELAY_BUILT, "a message of exactly the bound is built");
    struct sc_relay_params b = binary;
    b.max_message_bytes = 199;
    free(r.body);
    r.body = NULL;
    is_int(sc_relay_message_build(&r, &b, &m, why, sizeof why), SC_RELAY_BUILT,
           "binary: the body is the payload, at the bound");
    sc_relay_row_clear(&r);
}

/* With tenants: the row's tenant as the CloudEvents extension attribute
 * `tenant` in both modes (what tenants.key "extension:tenant" reads), and
 * nothing of it without. */
static void tenant_attribute(void)
{
    char why[256] = "";
    struct sc_publish m;
    struct sc_relay_row r = row("ORDER", "1", "T", "{}");
    r.tenant = "acme_1";
    is_int(sc_relay_message_build(&r, &structured, &m, why, sizeof why), SC_RELAY_BUILT, "tenant: built");
    ok(strstr(m.body.bytes, ",\"tenant\":\"acme_1\",") != NULL, "structured: a tenant member in the body");
    struct sc_parsed_event e;
    char reason[256] = "";
    ok(sc_event_parse(m.body.bytes, m.body.len, ID, 36, &e, reason, sizeof reason) == 0,
       "structured: the consumer parses it (%s)", reason);
    sc_event_free(&e);
    ok(!header(&m, "cloudEvents:tenant"), "structured: no tenant header");
    free(r.body);
    r.body = NULL;
    is_int(sc_relay_message_build(&r, &binary, &m, why, sizeof why), SC_RELAY_BUILT, "tenant: built binary");
    ok(header_is(&m, "cloudEvents:tenant", "acme_1"), "binary: a cloudEvents:tenant header");
    sc_relay_row_clear(&r);
    r = row("ORDER", "1", "T", "{}");
    is_int(sc_relay_message_build(&r, &structured, &m, why, sizeof why), SC_RELAY_BUILT, "no tenant: built");
    ok(!strstr(m.body.bytes, "tenant"), "no tenant: no member");
    free(r.body);
    r.body = NULL;
    is_int(sc_relay_message_build(&r, &binary, &m, why, sizeof why), SC_RELAY_BUILT, "no tenant: built binary");
    ok(!header(&m, "cloudEvents:tenant"), "no tenant: no header");
    sc_relay_row_clear(&r);
}

int main(void)
{
    char why[256] = "";
    struct sc_publish m;
    const char *subject = "a \"quoted\" \\ subject with / \xc3\xa9 and \xf0\x9f\x98\x80";
    const char *payload = "{\"n\":123456789012345678901234567890,\"x\":1.10}";
    struct sc_relay_row r = row("urn:shop:order", subject, "ORDER_ACCEPTED", payload);
    is_int(sc_relay_message_build(&r, &structured, &m, why, sizeof why), SC_RELAY_BUILT, "built (%s)", why);
    struct sc_parsed_event e;
    char reason[256] = "";
    ok(sc_event_parse(m.body.bytes, m.body.len, ID, 36, &e, reason, sizeof reason) == 0,
       "the consumer parses it (%s)", reason);
    is_str(e.ev.subject, subject, "the subject comes back exactly: quotes, backslash, UTF-8");
    is_str(e.ev.data_json, payload, "data is the payload text, digits kept");
    is_str(e.ev.source, "urn:shop:order", "source");
    ok(e.ev.has_eventversion && e.ev.eventversion == 7, "eventversion");
    sc_event_free(&e);
    ok(strstr(m.body.bytes, "\\\\") && strstr(m.body.bytes, "\\\""), "backslashes and quotes are escaped");
    is_str(m.routing_key, "ORDER_ACCEPTED", "routing key is the event type");
    ok(m.mandatory && m.props->delivery_mode == AMQP_DELIVERY_PERSISTENT, "mandatory, persistent");
    const amqp_table_t *h = &m.props->headers;
    ok((m.props->_flags & AMQP_BASIC_HEADERS_FLAG) && h->num_entries == 1 &&
           h->entries[0].key.len == 14 && memcmp(h->entries[0].key.bytes, "x-ordering-key", 14) == 0 &&
           h->entries[0].value.kind == AMQP_FIELD_KIND_UTF8 &&
           h->entries[0].value.value.bytes.len == strlen(subject) &&
           memcmp(h->entries[0].value.value.bytes.bytes, subject, strlen(subject)) == 0,
       "header x-ordering-key is the aggregate_id, byte for byte");
    sc_relay_row_clear(&r);

    /* A CloudEvents String holds no control characters: every consumer
     * would refuse the event, so the relay never sends it. */
    r = row("ORDER", "a\ttab", "T", "{}");
    is_int(sc_relay_message_build(&r, &structured, &m, why, sizeof why), SC_RELAY_INVALID,
           "an aggregate_id with a control character is invalid");
    ok(strstr(why, "aggregate_id holds a control character") != NULL, "and says so (%s)", why);
    sc_relay_row_clear(&r);
    r = row("ORDER", "1", "T\x01", "{}");
    is_int(sc_relay_message_build(&r, &structured, &m, why, sizeof why), SC_RELAY_INVALID,
           "an event_type with a control character too (%s)", why);
    sc_relay_row_clear(&r);
    r = row("ORDER", "bad \xff byte", "T", "{}");
    is_int(sc_relay_message_build(&r, &structured, &m, why, sizeof why), SC_RELAY_INVALID, "a field that is not UTF-8 is invalid");
    ok(strstr(why, "UTF-8") != NULL, "and says so (%s)", why);
    sc_relay_row_clear(&r);
    r = row("ORDER", "1", "T", "{\"a\":1,\"a\":2}");
    is_int(sc_relay_message_build(&r, &structured, &m, why, sizeof why), SC_RELAY_INVALID, "a repeated member name is invalid");
    sc_relay_row_clear(&r);
    binary_mode();
    trace_context();
    size_bound();
    tenant_attribute();
    return done();
}
