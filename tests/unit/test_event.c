/* CloudEvents envelope: every malformed kind of the contract is refused with
 * a reason, and a good event is parsed field by field. */
#include <string.h>

#include "sidecar/event.h"
#include "tap.h"

#define ID "4dc2061a-8b9e-44fe-b436-3ed01fc9eb6e"

static int parse(const char *body, const char *mid, char *reason)
{
    struct sc_parsed_event e;
    int rc = sc_event_parse(body, strlen(body), mid, mid ? strlen(mid) : 0, &e, reason, 256);
    if (rc == 0)
        sc_event_free(&e);
    return rc;
}

static void refused(const char *body, const char *mid, const char *want_in_reason, const char *label)
{
    char reason[256] = "";
    int rc = parse(body, mid, reason);
    ok(rc != 0 && strstr(reason, want_in_reason) != NULL, "%s (reason: %s)", label, reason);
}

int main(void)
{
    char reason[256];
    struct sc_parsed_event e;
    const char *good = "{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"ORDER_ACCEPTED\","
                       "\"source\":\"ORDER\",\"subject\":\"1001\",\"time\":\"2026-11-29T10:00:00.123456Z\","
                       "\"eventversion\":3,\"datacontenttype\":\"application/json\",\"data\":{\"a\":[1,2]}}";
    ok(sc_event_parse(good, strlen(good), ID, 36, &e, reason, sizeof reason) == 0, "good event parses");
    is_str(e.ev.id, ID, "id");
    is_str(e.ev.type, "ORDER_ACCEPTED", "type");
    is_str(e.ev.source, "ORDER", "source");
    is_str(e.ev.subject, "1001", "subject");
    is_str(e.ev.time, "2026-11-29T10:00:00.123456Z", "time");
    ok(e.ev.has_eventversion && e.ev.eventversion == 3, "eventversion");
    is_str(e.ev.data_json, "{\"a\":[1,2]}", "data as compact JSON");
    sc_event_free(&e);

    const char *minimal = "{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"T\",\"source\":\"S\"}";
    ok(sc_event_parse(minimal, strlen(minimal), NULL, 0, &e, reason, sizeof reason) == 0,
       "minimal event without message_id parses");
    ok(e.ev.subject == NULL && e.ev.data_json == NULL && !e.ev.has_eventversion, "absent optionals are NULL");
    sc_event_free(&e);

    refused("not json", NULL, "not valid JSON", "body that is not JSON");
    refused("", NULL, "not valid JSON", "empty body");
    refused("[1,2]", NULL, "not a JSON object", "array body");
    refused("\"x\"", NULL, "not valid JSON", "string body");
    refused("{\"id\":\"" ID "\",\"type\":\"T\",\"source\":\"S\"}", NULL, "'specversion'", "missing specversion");
    refused("{\"specversion\":1.0,\"id\":\"" ID "\",\"type\":\"T\",\"source\":\"S\"}", NULL, "'specversion'", "specversion not a string");
    refused("{\"specversion\":\"0.3\",\"id\":\"" ID "\",\"type\":\"T\",\"source\":\"S\"}", NULL, "specversion", "unsupported specversion");
    refused("{\"specversion\":\"1.0\",\"type\":\"T\",\"source\":\"S\"}", NULL, "'id'", "missing id");
    refused("{\"specversion\":\"1.0\",\"id\":42,\"type\":\"T\",\"source\":\"S\"}", NULL, "'id'", "id not a string");
    refused("{\"specversion\":\"1.0\",\"id\":\"not-a-uuid\",\"type\":\"T\",\"source\":\"S\"}", NULL, "UUID", "id not a UUID");
    refused("{\"specversion\":\"1.0\",\"id\":\"4DC2061A-8B9E-44FE-B436-3ED01FC9EB6E\",\"type\":\"T\",\"source\":\"S\"}", NULL, "UUID", "uppercase id is not canonical");
    refused("{\"specversion\":\"1.0\",\"id\":\"4dc2061a8b9e44feb4363ed01fc9eb6e\",\"type\":\"T\",\"source\":\"S\"}", NULL, "UUID", "id without dashes");
    refused("{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"source\":\"S\"}", NULL, "'type'", "missing type");
    refused("{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"\",\"source\":\"S\"}", NULL, "'type'", "empty type");
    refused("{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"T\"}", NULL, "'source'", "missing source");
    refused("{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"T\",\"source\":[]}", NULL, "'source'", "source not a string");
    refused(minimal, "5dc2061a-8b9e-44fe-b436-3ed01fc9eb6e", "differs from id", "message_id differs from id");
    refused(minimal, "", "differs from id", "empty message_id differs from id");
    refused("{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"T\",\"source\":\"S\",\"subject\":5}", NULL, "'subject'", "subject not a string");
    refused("{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"T\",\"source\":\"S\",\"eventversion\":\"2\"}", NULL, "'eventversion'", "eventversion not an integer");
    refused("{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"id\":\"" ID "\",\"type\":\"T\",\"source\":\"S\"}", NULL, "not valid JSON", "duplicate member names");
    refused("{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"T\\u0000x\",\"source\":\"S\"}", NULL, "NUL", "NUL inside an attribute");

    ok(sc_is_canonical_uuid(ID, 36), "canonical uuid accepted");
    ok(!sc_is_canonical_uuid(ID, 35), "short uuid refused");
    ok(!sc_is_canonical_uuid("4dc2061a-8b9e-44fe-b436-3ed01fc9eb6g", 36), "non-hex refused");
    return done();
}
