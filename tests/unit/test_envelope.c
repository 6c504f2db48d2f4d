/* The envelope modes: binary (attributes as headers under one prefix),
 * batch (a JSON array of structured events), plain (the body is data, the id
 * the message_id), told apart per delivery; UUIDv5 against Python's uuid5;
 * JSON Pointers and array members found without converting anything. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sidecar/envelope/json_span.h"
#include "sidecar/envelope/message.h"
#include "sidecar/envelope/uuid_v5.h"
#include "tap.h"

#define ID "4dc2061a-8b9e-44fe-b436-3ed01fc9eb6e"

/* ---- a delivery to read ---------------------------------------------------- */

static amqp_table_entry_t hdr[16];
static amqp_basic_properties_t props;
static struct sc_message msg;

static void reset(const char *body)
{
    memset(&props, 0, sizeof props);
    memset(hdr, 0, sizeof hdr);
    msg = (struct sc_message){.props = &props, .body = amqp_cstring_bytes(body),
                              .exchange = amqp_cstring_bytes("orders"),
                              .routing_key = amqp_cstring_bytes("ORDER_ACCEPTED")};
}

static void header_str(const char *key, const char *val)
{
    int n = props.headers.num_entries;
    hdr[n].key = amqp_cstring_bytes(key);
    hdr[n].value.kind = AMQP_FIELD_KIND_UTF8;
    hdr[n].value.value.bytes = amqp_cstring_bytes(val);
    props._flags |= AMQP_BASIC_HEADERS_FLAG;
    props.headers.entries = hdr;
    props.headers.num_entries = n + 1;
}

static amqp_field_value_t *header_kind(const char *key, uint8_t kind)
{
    header_str(key, "");
    amqp_field_value_t *v = &hdr[props.headers.num_entries - 1].value;
    v->kind = kind;
    return v;
}

static void content_type(const char *t)
{
    props._flags |= AMQP_BASIC_CONTENT_TYPE_FLAG;
    props.content_type = amqp_cstring_bytes(t);
}

static void message_id(const char *id)
{
    props._flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
    props.message_id = amqp_cstring_bytes(id);
}

static struct sc_envelope_opts plain = {.plain = 1};
static struct sc_envelope_opts cloudevents = {0};

/* Opens the message and parses event i: 0 with *e filled, or -1 with why. */
static int read_event(const struct sc_envelope_opts *o, int i, enum sc_message_mode *mode,
                      struct sc_parsed_event *e, char *why)
{
    struct sc_message_events evs;
    why[0] = 0;
    int rc = sc_message_open(&msg, o, &evs, why, 512);
    if (rc == 0) {
        if (mode)
            *mode = evs.mode;
        rc = sc_message_event(&msg, o, &evs, i, e, why, 512);
    }
    sc_message_events_free(&evs);
    return rc;
}

/* The event's mode, or -1 when refused (with why naming `frag`). */
static int refused(const struct sc_envelope_opts *o, const char *frag, const char *label)
{
    struct sc_parsed_event e;
    char why[512];
    int rc = read_event(o, 0, NULL, &e, why);
    if (rc == 0)
        sc_event_free(&e);
    return ok(rc == -1 && strstr(why, frag), "%s: refused, naming '%s' (%s)", label, frag,
              rc ? why : "accepted");
}

/* ---- binary mode -------------------------------------------------------------- */

static void binary_headers(const char *prefix)
{
    char k[5][64];
    const char *names[] = {"specversion", "id", "type", "source", "subject"};
    const char *vals[] = {"1.0", "4DC2061A-8B9E-44FE-B436-3ED01FC9EB6E", "ORDER_ACCEPTED", "ORDER",
                          "1001"};
    static char keys[5][5][64];
    static int round;
    for (int i = 0; i < 5; i++) {
        snprintf(k[i], sizeof k[i], "%s%s", prefix, names[i]);
        memcpy(keys[round % 5][i], k[i], sizeof k[i]);
        header_str(keys[round % 5][i], vals[i]);
    }
    round++;
}

static void test_binary(void)
{
    const char *prefixes[] = {"cloudEvents:", "cloudEvents_", "ce-", "ce_", "CE-"};
    for (int p = 0; p < 5; p++) {
        reset("{\"orderId\": 123456789012345678901234567890, \"price\": 19.90}");
        content_type("application/json; charset=utf-8");
        binary_headers(prefixes[p]);
        struct sc_parsed_event e;
        enum sc_message_mode mode = SC_MODE_STRUCTURED;
        char why[512];
        int rc = read_event(&cloudevents, 0, &mode, &e, why);
        ok(rc == 0 && mode == SC_MODE_BINARY, "prefix %s: read as binary mode (%s)", prefixes[p],
           rc ? why : sc_message_mode_name(mode));
        if (rc)
            continue;
        is_str(e.ev.id, ID, "prefix %s: the id canonicalised to lowercase", prefixes[p]);
        ok(strcmp(e.ev.type, "ORDER_ACCEPTED") == 0 && strcmp(e.ev.source, "ORDER") == 0 &&
               strcmp(e.ev.subject, "1001") == 0 && !e.ev.has_eventversion && !e.ev.time,
           "prefix %s: type, source, subject from the headers", prefixes[p]);
        is_str(e.ev.data_json, "{\"orderId\": 123456789012345678901234567890, \"price\": 19.90}",
               "prefix %s: data is the body byte for byte", prefixes[p]);
        sc_event_free(&e);
    }

    reset("{}");
    binary_headers("ce-");
    header_str("ce-eventversion", "7");
    amqp_field_value_t *t = header_kind("ce-time", AMQP_FIELD_KIND_TIMESTAMP);
    t->value.u64 = 1764410400;
    message_id("{" ID "}");
    struct sc_parsed_event e;
    char why[512];
    int rc = read_event(&cloudevents, 0, NULL, &e, why);
    ok(rc == 0 && e.ev.has_eventversion && e.ev.eventversion == 7 && e.ev.time &&
           strcmp(e.ev.time, "2025-11-29T10:00:00Z") == 0,
       "a string eventversion header is an integer, an AMQP timestamp an RFC 3339 time, no "
       "content type is JSON, a braced message_id is the same id (%s, %s)", rc ? why : "ok",
       rc ? "" : e.ev.time ? e.ev.time : "no time");
    if (rc == 0)
        sc_event_free(&e);

    reset("{}");
    binary_headers("ce-");
    header_kind("ce-eventversion", AMQP_FIELD_KIND_I32)->value.i32 = 3;
    rc = read_event(&cloudevents, 0, NULL, &e, why);
    ok(rc == 0 && e.ev.eventversion == 3, "an integer eventversion header");
    if (rc == 0)
        sc_event_free(&e);

    reset("");
    binary_headers("ce-");
    rc = read_event(&cloudevents, 0, NULL, &e, why);
    ok(rc == 0 && e.ev.data_json == NULL, "an empty body is an event without data");
    if (rc == 0)
        sc_event_free(&e);

    reset("{\"a\":1}");
    content_type("application/vnd.shop.order+json");
    binary_headers("ce-");
    rc = read_event(&cloudevents, 0, NULL, &e, why);
    ok(rc == 0, "a +json content type is JSON data (%s)", rc ? why : "ok");
    if (rc == 0)
        sc_event_free(&e);

    reset("hello");
    content_type("text/plain; charset=utf-8");
    binary_headers("ce-");
    rc = read_event(&cloudevents, 0, NULL, &e, why);
    ok(rc == 0 && e.ev.data_json == NULL && e.ev.data_bytes_len == 5 &&
           memcmp(e.ev.data_bytes, "hello", 5) == 0 &&
           strcmp(e.ev.datacontenttype, "text/plain; charset=utf-8") == 0,
       "text/plain data: bytes, no data_json, the content type as datacontenttype (%s)",
       rc ? why : "ok");
    if (rc == 0)
        sc_event_free(&e);
    reset("{\"a\":");
    content_type("application/json");
    binary_headers("ce-");
    refused(&cloudevents, "binary-mode body is not valid JSON", "a body that is not JSON");
    reset("{}");
    binary_headers("ce-");
    header_str("cloudEvents:eventversion", "1");
    refused(&cloudevents, "mix CloudEvents prefixes", "ce- and cloudEvents: on one message");
    reset("{}");
    binary_headers("ce-");
    header_str("Ce-Id", ID);
    refused(&cloudevents, "attribute 'id' given twice", "ce-id and Ce-Id (HTTP names: any case)");
    reset("{}");
    binary_headers("ce_");
    header_str("CE_ID", ID);
    refused(&cloudevents, "attribute name 'ID' is not lower-case", "CE_ID (ce_ names are as written)");
    reset("{}");
    header_str("ce-specversion", "1.0");
    header_str("ce-type", "T");
    header_str("ce-source", "S");
    refused(&cloudevents, "missing required attribute 'id'", "no ce-id");
    reset("{}");
    header_str("ce-specversion", "1.0");
    header_str("ce-id", "order-1");
    header_str("ce-type", "T");
    header_str("ce-source", "S");
    rc = read_event(&cloudevents, 0, NULL, &e, why);
    ok(rc == 0 && strcmp(e.ev.id, "e6eee875-2411-5add-9411-c21ec9b401e4") == 0,
       "ce-id not a UUID: the UUIDv5 of source and id, as in structured mode (%s)", rc ? why : e.ev.id);
    if (rc == 0)
        sc_event_free(&e);
    reset("{}");
    binary_headers("ce-");
    header_kind("ce-eventversion", AMQP_FIELD_KIND_F64)->value.f64 = 1.5;
    refused(&cloudevents, "'eventversion' is a number with a fraction", "a float eventversion");
    reset("{}");
    binary_headers("ce-");
    header_kind("ce-subject", AMQP_FIELD_KIND_I32);
    refused(&cloudevents, "given twice", "ce-subject twice, once an integer");
    reset("{}");
    binary_headers("ce-");
    message_id("0b8e6f3c-6a53-4a51-8f0e-6f3d1c2b9a10");
    refused(&cloudevents, "differs from id", "a message_id that names another event");
    reset("{}");
    binary_headers("ce-");
    header_str("ce-data", "{}");
    refused(&cloudevents, "the data is the body", "a ce-data header");
    reset("{}");
    binary_headers("ce-");
    hdr[2].value.value.bytes = (amqp_bytes_t){3, "\xff\xfe" "A"};
    refused(&cloudevents, "not valid UTF-8", "a type header that is not UTF-8");

    /* Structured wins when the content type says so, whatever the headers. */
    reset("{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"S\",\"source\":\"X\"}");
    content_type("application/cloudevents+json");
    header_str("ce-specversion", "1.0");
    enum sc_message_mode mode;
    rc = read_event(&cloudevents, 0, &mode, &e, why);
    ok(rc == 0 && mode == SC_MODE_STRUCTURED && strcmp(e.ev.type, "S") == 0,
       "content_type application/cloudevents+json is structured even with a ce-specversion header");
    if (rc == 0)
        sc_event_free(&e);
    reset("{}");
    header_str("ce-id", ID);
    refused(&cloudevents, "missing required attribute 'specversion'",
            "CloudEvents headers without specversion and no content type: read as structured, "
            "refused");
    reset("{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"S\",\"source\":\"X\"}");
    content_type("application/json");
    refused(&cloudevents, "content type 'application/json' is not application/cloudevents",
            "application/json without CloudEvents headers: binary mode (AMQP binding 3), no attributes");
    reset("<e/>");
    content_type("application/cloudevents+xml");
    refused(&cloudevents, "not a CloudEvents JSON format", "application/cloudevents+xml");
}

/* ---- batch mode ---------------------------------------------------------------- */

static void test_batch(void)
{
    const char *body =
        "[ {\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"A\",\"source\":\"S\",\"data\":{\"n\":1e400}},\n"
        "  {\"specversion\":\"1.0\",\"id\":\"nope\",\"type\":\"B\",\"source\":\"S\",\"time\":\"now\"},\n"
        "  {\"specversion\":\"1.0\",\"id\":\"0b8e6f3c-6a53-4a51-8f0e-6f3d1c2b9a10\",\"type\":\"C\","
        "\"source\":\"S\"} ]";
    reset(body);
    content_type("Application/CloudEvents-Batch+JSON; charset=utf-8");
    message_id("batch-7");
    struct sc_message_events evs;
    char why[512] = "";
    int rc = sc_message_open(&msg, &cloudevents, &evs, why, sizeof why);
    ok(rc == 0 && evs.mode == SC_MODE_BATCH && evs.n == 3, "a batch of 3 members (%s)",
       rc ? why : "ok");
    ok(sc_message_is_batch(&props), "the content type is recognised whatever its case");
    if (rc == 0) {
        struct sc_parsed_event e;
        int a = sc_message_event(&msg, &cloudevents, &evs, 0, &e, why, sizeof why);
        ok(a == 0 && strcmp(e.ev.type, "A") == 0 && strcmp(e.ev.data_json, "{\"n\":1e400}") == 0,
           "member 0 parsed, its data verbatim, the batch's message_id not compared (%s)",
           a ? why : "ok");
        if (a == 0)
            sc_event_free(&e);
        a = sc_message_event(&msg, &cloudevents, &evs, 1, &e, why, sizeof why);
        ok(a == -1 && strstr(why, "'time'"), "member 1 malformed on its own (%s)", why);
        a = sc_message_event(&msg, &cloudevents, &evs, 2, &e, why, sizeof why);
        ok(a == 0 && strcmp(e.ev.type, "C") == 0, "member 2 parsed after a malformed one");
        if (a == 0)
            sc_event_free(&e);
        size_t len = evs.spans[2][1] - evs.spans[2][0];
        ok(body[evs.spans[2][0]] == '{' && body[evs.spans[2][1] - 1] == '}' && len > 10,
           "a member's span is its JSON text exactly");
    }
    sc_message_events_free(&evs);
    reset("[]");
    content_type(SC_CT_BATCH);
    rc = sc_message_open(&msg, &cloudevents, &evs, why, sizeof why);
    ok(rc == 0 && evs.mode == SC_MODE_BATCH && evs.n == 0,
       "an empty batch is a valid batch of no events (JSON format 4.3)");
    sc_message_events_free(&evs);
    reset("{\"specversion\":\"1.0\"}");
    content_type(SC_CT_BATCH);
    refused(&cloudevents, "not a JSON array", "a batch that is an object");
    reset("[{}, ");
    content_type(SC_CT_BATCH);
    refused(&cloudevents, "not a JSON array", "a cut batch");
    char *big = malloc(1001 * 3 + 3);
    char *w = big;
    *w++ = '[';
    for (int i = 0; i < 1001; i++)
        w += sprintf(w, "%s{}", i ? "," : "");
    strcpy(w, "]");
    reset(big);
    content_type(SC_CT_BATCH);
    refused(&cloudevents, "batch of 1001 events is more than 1000", "1001 members");
    free(big);
    reset("[{}]");
    content_type(SC_CT_BATCH);
    struct sc_parsed_event e;
    rc = read_event(&plain, 0, NULL, &e, why);
    ok(rc == -1 && strstr(why, "message_id"),
       "a plain consumer reads a batch content type as a plain message (%s)", why);
}

/* ---- plain mode -------------------------------------------------------------- */

static void test_plain(void)
{
    struct sc_parsed_event e;
    char why[512];
    reset("{\"order\": {\"id\": 1001, \"ref\": \"A-7\"}, \"big\": 123456789012345678901234567890}");
    message_id("URN:UUID:" "4DC2061A-8B9E-44FE-B436-3ED01FC9EB6E");
    props._flags |= AMQP_BASIC_TIMESTAMP_FLAG;
    props.timestamp = 1764410400;
    header_kind("eventversion", AMQP_FIELD_KIND_I64)->value.i64 = 4;
    struct sc_envelope_opts o = {.plain = 1, .plain_subject = "/order/id"};
    enum sc_message_mode mode;
    int rc = read_event(&o, 0, &mode, &e, why);
    ok(rc == 0 && mode == SC_MODE_PLAIN, "a plain message (%s)", rc ? why : "ok");
    if (rc == 0) {
        is_str(e.ev.id, ID, "a UUID message_id in any spelling is the id, canonical");
        ok(e.id_from[0] == 0, "and is no derived id");
        is_str(e.ev.type, "ORDER_ACCEPTED", "type: the routing key when there is no type property");
        is_str(e.ev.source, "orders", "source: the exchange");
        is_str(e.ev.subject, "1001", "subject: the number plain_subject points at, as written");
        is_str(e.ev.time, "2025-11-29T10:00:00Z", "time: the timestamp property");
        ok(e.ev.has_eventversion && e.ev.eventversion == 4, "eventversion: the integer header");
        is_str(e.ev.data_json, msg.body.bytes, "data: the body byte for byte");
        sc_event_free(&e);
    }
    reset("[1,2]");
    message_id("order-42");
    props._flags |= AMQP_BASIC_TYPE_FLAG;
    props.type = amqp_cstring_bytes("OrderPlaced");
    o = (struct sc_envelope_opts){.plain = 1, .plain_source = "shop", .plain_subject = "/x"};
    rc = read_event(&o, 0, NULL, &e, why);
    ok(rc == 0, "a plain message with a non-UUID message_id (%s)", rc ? why : "ok");
    if (rc == 0) {
        is_str(e.ev.id, "e2fce3be-0660-518b-ba24-7d4d7e922f16",
               "its id is UUIDv5(" SC_MESSAGE_ID_NAMESPACE ", 'order-42'), as Python's uuid5");
        is_str(e.id_from, "order-42", "the original is kept for the logs");
        ok(strcmp(e.ev.type, "OrderPlaced") == 0 && strcmp(e.ev.source, "shop") == 0 &&
               e.ev.subject == NULL && e.ev.time == NULL && !e.ev.has_eventversion,
           "type property, plain_source, no subject where the pointer names nothing");
        sc_event_free(&e);
    }
    /* A retry copy comes back through the default exchange. */
    reset("{\"s\": \"A\\u00e9\"}");
    message_id("order-42");
    msg.exchange = amqp_cstring_bytes("");
    msg.routing_key = amqp_cstring_bytes("q.retry.1000ms");
    header_str("x-sidecar-original-exchange", "orders");
    header_str("x-sidecar-original-routing-key", "ORDER_ACCEPTED");
    o = (struct sc_envelope_opts){.plain = 1, .plain_subject = "/s"};
    rc = read_event(&o, 0, NULL, &e, why);
    ok(rc == 0 && strcmp(e.ev.type, "ORDER_ACCEPTED") == 0 && strcmp(e.ev.source, "orders") == 0 &&
           strcmp(e.ev.subject, "A\xc3\xa9") == 0 &&
           strcmp(e.ev.id, "e2fce3be-0660-518b-ba24-7d4d7e922f16") == 0,
       "a copy's original route gives the same type and source, the same id; a string subject "
       "decoded (%s)", rc ? why : "ok");
    if (rc == 0)
        sc_event_free(&e);

    reset("{}");
    refused(&plain, "no message_id property", "no message_id");
    reset("not json");
    message_id("m-1");
    refused(&plain, "body is not valid JSON", "a body that is not JSON");
    reset("");
    message_id("m-1");
    refused(&plain, "body is not valid JSON", "an empty body");
    reset("{}");
    message_id("m-1");
    msg.routing_key = amqp_cstring_bytes("");
    refused(&plain, "no type", "no type property and no routing key");
    reset("{}");
    message_id("m-1");
    msg.exchange = amqp_cstring_bytes("");
    refused(&plain, "default exchange (set plain_source)", "the default exchange, no plain_source");
    reset("{}");
    message_id("m-1");
    header_str("eventversion", "3");
    refused(&plain, "'eventversion' must be an integer", "a string eventversion header");
    reset("{\"a\": {\"b\": true}}");
    message_id("m-1");
    o = (struct sc_envelope_opts){.plain = 1, .plain_subject = "/a"};
    refused(&o, "names an object", "plain_subject pointing at an object");
}

/* ---- UUIDv5, pointers, arrays ------------------------------------------------ */

static void test_uuid_v5(void)
{
    char out[37];
    sc_uuid_v5("6ba7b810-9dad-11d1-80b4-00c04fd430c8", "python.org", 10, out);
    is_str(out, "886313e1-3b8a-5372-9b90-0c9aee199e5d", "uuid5(NAMESPACE_DNS, 'python.org')");
    char name[256];
    memset(name, 'x', 255);
    name[255] = 0;
    sc_uuid_v5(SC_MESSAGE_ID_NAMESPACE, name, 255, out);
    is_str(out, "abe7448d-68ef-578c-a8a7-9e2a4f057510", "a 255-byte name (several SHA-1 blocks)");
    const char *u = "\xc3\xa9-\xc3\xbc" "n\xc3\xaf" "code";
    sc_uuid_v5(SC_MESSAGE_ID_NAMESPACE, u, strlen(u), out);
    is_str(out, "86f3297b-a5a0-587f-a723-08ab733b4f2d", "a UTF-8 name, hashed as its bytes");
    is_int(sc_message_id_to_event_id("{" ID "}", 38, out), 0, "a UUID message_id is no name");
}

static void test_pointer(void)
{
    const char *t = " {\"a\": [10, {\"b/c\": \"x\", \"m~n\": 2.50}], \"\": 1, \"a\\u0062\": null,"
                    " \"d\": 1, \"d\": 2} ";
    struct { const char *ptr; int found; const char *value; } cases[] = {
        {"", 1, NULL},         {"/a/0", 1, "10"},  {"/a/1/b~1c", 1, "\"x\""},
        {"/a/1/m~0n", 1, "2.50"}, {"/", 1, "1"},    {"/ab", 1, "null"},
        {"/a/2", 0, NULL},     {"/a/01", 0, NULL}, {"/a/-", 0, NULL},
        {"/a/0/x", 0, NULL},   {"/zz", 0, NULL},   {"/d", 1, "2"},
        {"a", -1, NULL},       {"/~2", -1, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t a = 0, b = 0;
        int rc = sc_json_pointer_span(t, strlen(t), cases[i].ptr, &a, &b);
        int same = rc == cases[i].found &&
                   (!cases[i].value || (b - a == strlen(cases[i].value) &&
                                        memcmp(t + a, cases[i].value, b - a) == 0));
        if (rc == 1 && !cases[i].value)
            same = t[a] == '{' && t[b - 1] == '}';
        ok(same, "pointer '%s': %d, '%.*s'", cases[i].ptr, rc, rc == 1 ? (int)(b - a) : 0, t + a);
    }
    size_t spans[4][2];
    is_int(sc_json_array_spans(" [ 1 , \"a,]\" , [2,[3]] ] ", 25, spans, 4), 3,
           "three array members, commas inside strings and nesting");
    is_int(sc_json_array_spans("[1,]", 4, spans, 4), -1, "a trailing comma is not JSON");
    is_int(sc_json_array_spans("[] x", 4, spans, 4), -1, "text after the array is not JSON");
}

int main(void)
{
    test_binary();
    test_batch();
    test_plain();
    test_uuid_v5();
    test_pointer();
    return done();
}
