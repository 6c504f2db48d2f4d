/* The relay's CloudEvents message of one row: the body is text around the
 * payload as stored, attributes escaped as JSON strings, and the consumer's
 * parser reads back exactly what the row holds. */
#include <stdlib.h>
#include <string.h>

#include "sidecar/envelope/event.h"
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

int main(void)
{
    char why[256] = "";
    struct sc_publish m;
    const char *subject = "a \"quoted\" \\ subject\twith\x01 control \xc3\xa9 and \xf0\x9f\x98\x80";
    const char *payload = "{\"n\":123456789012345678901234567890,\"x\":1.10}";
    struct sc_relay_row r = row("urn:shop:order", subject, "ORDER_ACCEPTED", payload);
    is_int(sc_relay_message_build(&r, "orders", &m, why, sizeof why), SC_RELAY_BUILT, "built (%s)", why);
    struct sc_parsed_event e;
    char reason[256] = "";
    ok(sc_event_parse(m.body.bytes, m.body.len, ID, 36, &e, reason, sizeof reason) == 0,
       "the consumer parses it (%s)", reason);
    is_str(e.ev.subject, subject, "the subject comes back exactly: quotes, backslash, tab, \\x01, UTF-8");
    is_str(e.ev.data_json, payload, "data is the payload text, digits kept");
    is_str(e.ev.source, "urn:shop:order", "source");
    ok(e.ev.has_eventversion && e.ev.eventversion == 7, "eventversion");
    sc_event_free(&e);
    ok(strstr(m.body.bytes, "\\u0001") && strstr(m.body.bytes, "\\t") && strstr(m.body.bytes, "\\\""),
       "control characters and quotes are escaped");
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

    r = row("ORDER", "bad \xff byte", "T", "{}");
    is_int(sc_relay_message_build(&r, "orders", &m, why, sizeof why), SC_RELAY_INVALID, "a field that is not UTF-8 is invalid");
    ok(strstr(why, "UTF-8") != NULL, "and says so (%s)", why);
    sc_relay_row_clear(&r);
    r = row("ORDER", "1", "T", "{\"a\":1,\"a\":2}");
    is_int(sc_relay_message_build(&r, "orders", &m, why, sizeof why), SC_RELAY_INVALID, "a repeated member name is invalid");
    sc_relay_row_clear(&r);
    return done();
}
