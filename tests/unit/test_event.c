/* CloudEvents envelope: every malformed kind of the contract is refused with
 * a reason, and a good event is parsed field by field. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sidecar/envelope/event.h"
#include "sidecar/envelope/json_span.h"
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

/* `data` nested depth levels deep around inner: [[...[inner]...]] */
static char *nested(int depth, const char *inner)
{
    size_t n = strlen(inner);
    char *t = malloc(2 * (size_t)depth + n + 1);
    memset(t, '[', (size_t)depth);
    memcpy(t + depth, inner, n);
    memset(t + depth + n, ']', (size_t)depth);
    t[2 * (size_t)depth + n] = 0;
    return t;
}

/* data nested depth levels deep (arrays, or objects {"k": ...} when
 * objects) is handed on exactly as written. */
static void deep_data_verbatim(int depth, int objects, const char *inner, const char *key)
{
    char *data;
    if (objects) {
        size_t n = strlen(inner);
        data = malloc(7 * (size_t)depth + n + 1);
        char *w = data;
        for (int i = 0; i < depth; i++)
            w = memcpy(w, "{\"k\": ", 6), w += 6;
        w = memcpy(w, inner, n), w += n;
        memset(w, '}', (size_t)depth);
        w[depth] = 0;
    } else {
        data = nested(depth, inner);
    }
    size_t dlen = data ? strlen(data) : 0;
    char *body = data ? malloc(dlen + 200) : NULL;
    if (!body) {
        ok(0, "out of memory building a %d-level body", depth);
        free(data);
        return;
    }
    sprintf(body, "{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"T\",\"source\":\"S\",\"%s\":%s}",
            key, data);
    struct sc_parsed_event e;
    char reason[256] = "";
    int rc = sc_event_parse(body, strlen(body), NULL, 0, &e, reason, sizeof reason);
    int same = rc == 0 && e.ev.data_json && e.ev.data_json_len == dlen && memcmp(e.ev.data_json, data, dlen) == 0;
    const char *at = rc == 0 && e.ev.data_json ? strstr(e.ev.data_json, inner) : NULL;
    ok(same, "data %s %d levels deep (%s), member spelled %s, is kept verbatim (%s; innermost: %.40s)",
       objects ? "objects" : "arrays", depth, inner, key, rc ? reason : "parsed", at ? at : "(not found)");
    ok(sc_json_text_valid(data, dlen), "and the validator takes it (%d levels)", depth);
    if (rc == 0)
        sc_event_free(&e);
    free(body);
    free(data);
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
    is_str(e.ev.data_json, "{\"a\":[1,2]}", "data as written");
    sc_event_free(&e);

    const char *minimal = "{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"T\",\"source\":\"S\"}";
    ok(sc_event_parse(minimal, strlen(minimal), NULL, 0, &e, reason, sizeof reason) == 0,
       "minimal event without message_id parses");
    ok(e.ev.subject == NULL && e.ev.data_json == NULL && !e.ev.has_eventversion, "absent optionals are NULL");
    sc_event_free(&e);

    /* Any RFC 4122 spelling of the id: the dedup key is the lowercase form. */
    static const char *const spellings[] = {
        "4DC2061A-8B9E-44FE-B436-3ED01FC9EB6E", "{4dc2061a-8b9e-44fe-b436-3ed01fc9eb6e}",
        "urn:uuid:4dc2061a-8b9e-44fe-b436-3ED01FC9EB6E", "{4DC2061A-8b9e-44fe-b436-3ed01fc9eb6e}"};
    for (size_t i = 0; i < sizeof spellings / sizeof *spellings; i++) {
        char body[512];
        snprintf(body, sizeof body, "{\"specversion\":\"1.0\",\"id\":\"%s\",\"type\":\"T\",\"source\":\"S\"}",
                 spellings[i]);
        int rc = sc_event_parse(body, strlen(body), spellings[i], strlen(spellings[i]), &e, reason,
                                sizeof reason);
        ok(rc == 0 && strcmp(e.ev.id, ID) == 0, "id spelled %s is accepted as %s (%s)", spellings[i],
           ID, rc ? reason : e.ev.id);
        if (rc == 0)
            sc_event_free(&e);
    }
    const char *upper = "{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"T\",\"source\":\"S\"}";
    ok(sc_event_parse(upper, strlen(upper), "4DC2061A-8B9E-44FE-B436-3ED01FC9EB6E", 36, &e, reason,
                      sizeof reason) == 0, "message_id in another spelling of the same UUID matches");
    sc_event_free(&e);

    /* data is handed on exactly as written: big and precise numbers keep
     * their digits, nothing is turned into a string. */
    static const char *const datas[] = {
        "{\"n\":123456789012345678901234567890}", "{\"u64\":18446744073709551615}",
        "{\"inf\":1E400}", "{\"s\":\"a\\u0000b\"}", "{\"price\":19.99,\"p\":0.1}",
        "[1, 2.50, {\"x\" : null}]", "\"text\"", "12.30",
        "{\"a\": 1, \"b\": {\"c\": 2, \"d\": [1, 2]}}"};
    for (size_t i = 0; i < sizeof datas / sizeof *datas; i++) {
        char body[512];
        snprintf(body, sizeof body, "{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"T\","
                 "\"source\":\"S\",\"data\":%s}", datas[i]);
        int rc = sc_event_parse(body, strlen(body), NULL, 0, &e, reason, sizeof reason);
        ok(rc == 0 && strcmp(e.ev.data_json, datas[i]) == 0 && e.ev.data_json_len == strlen(datas[i]),
           "data %s is kept verbatim (%s)", datas[i], rc ? reason : e.ev.data_json);
        if (rc == 0)
            sc_event_free(&e);
    }
    /* ... at any depth: no parser of fixed depth ever sees it, so it is
     * never re-encoded (1.10 stays 1.10, 30 digits stay 30 digits). */
    deep_data_verbatim(513, 0, "1.10", "data");
    deep_data_verbatim(600, 0, "123456789012345678901234567890", "data");
    deep_data_verbatim(600, 1, "{\"price\": 1.10, \"n\": 123456789012345678901234567890}", "data");
    deep_data_verbatim(3000, 1, "1.10", "d\\u0061ta");
    deep_data_verbatim(100000, 0, "1E400", "data");
    {
        char *deep = nested(100000, "1");
        ok(!sc_json_text_valid(deep, strlen(deep) - 1), "unbalanced, 100000 deep: refused");
        deep[200000] = '}';
        ok(!sc_json_text_valid(deep, strlen(deep)), "closed by the wrong bracket, 100000 deep: refused");
        free(deep);
        /* Outside data the parser's own bound holds, with its reason. */
        char *ext = nested(5000, "1");
        char *body = malloc(strlen(ext) + 200);
        sprintf(body, "{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"T\",\"source\":\"S\",\"ext\":%s}", ext);
        refused(body, NULL, "not valid JSON", "an attribute other than data nested 5000 deep is refused with a reason");
        free(body);
        free(ext);
    }
    /* The validator the relay and the producer helper use (json_span.c). */
    ok(sc_json_text_valid(" {\"a\": 1, \"b\": [true, null, \"x\"]} ", 34), "valid JSON text accepted");
    ok(!sc_json_text_valid("{\"a\": 1,}", 10) && !sc_json_text_valid("{\"a\":1} 2", 9) &&
       !sc_json_text_valid("\"\xff\"", 3), "invalid JSON text refused (trailing comma, two values, bad UTF-8)");
    refused("{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"T\",\"source\":\"S\",\"data\":{\"a\":01}}",
            NULL, "not valid JSON", "data with a bad number is refused");
    refused("{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"T\",\"source\":\"S\",\"data\":\"\xff\"}",
            NULL, "not valid JSON", "data with invalid UTF-8 is refused");
    refused("{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"T\",\"source\":\"S\",\"data\":1,\"data\":2}",
            NULL, "not valid JSON", "two data members are refused");
    refused("{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"T\",\"source\":\"S\",\"data\":1,\"d\\u0061ta\":2}",
            NULL, "not valid JSON", "a second data member spelled with escapes is refused");
    {
        const char *b = "{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":42,\"source\":\"S\"}";
        ok(sc_event_parse(b, strlen(b), NULL, 0, &e, reason, sizeof reason) != 0 &&
           strcmp(e.log_id, ID) == 0, "a malformed event still names its id for the log (%s)", e.log_id);
        b = "{\"specversion\":\"1.0\",\"id\":\"nope\",\"type\":\"T\",\"source\":\"S X\"}";
        ok(sc_event_parse(b, strlen(b), NULL, 0, &e, reason, sizeof reason) != 0 &&
           strcmp(e.log_id, "nope") == 0, "a non-UUID id beside a source that is not a URI-reference "
           "is named as written (%s)", e.log_id);
        b = "{\"specversion\":\"1.0\",\"id\":\"nope\",\"type\":42,\"source\":\"S\"}";
        ok(sc_event_parse(b, strlen(b), NULL, 0, &e, reason, sizeof reason) != 0 &&
           strcmp(e.log_id, "43463bc6-8bb8-5d56-859a-2e4cd0270298") == 0 && strcmp(e.id_from, "nope") == 0 &&
           e.id_of_source, "a refused event with a non-UUID id is named by the UUIDv5 it would have (%s)",
           e.log_id);
    }

    refused("not json", NULL, "not valid JSON", "body that is not JSON");
    refused("", NULL, "not valid JSON", "empty body");
    refused("[1,2]", NULL, "not a JSON object", "array body");
    refused("\"x\"", NULL, "not valid JSON", "string body");
    refused("{\"id\":\"" ID "\",\"type\":\"T\",\"source\":\"S\"}", NULL, "'specversion'", "missing specversion");
    refused("{\"specversion\":1.0,\"id\":\"" ID "\",\"type\":\"T\",\"source\":\"S\"}", NULL, "'specversion'", "specversion not a string");
    refused("{\"specversion\":\"0.3\",\"id\":\"" ID "\",\"type\":\"T\",\"source\":\"S\"}", NULL, "specversion", "unsupported specversion");
    refused("{\"specversion\":\"1.0\",\"type\":\"T\",\"source\":\"S\"}", NULL, "'id'", "missing id");
    refused("{\"specversion\":\"1.0\",\"id\":42,\"type\":\"T\",\"source\":\"S\"}", NULL, "'id'", "id not a string");
    /* An id that is not a UUID (CloudEvents asks for a non-empty string):
     * the UUIDv5 of source NUL id, as Python's uuid5 computes it. */
    static const char *const mapped[][3] = {
        {"not-a-uuid", "S", "1e049698-c3a7-54a6-9884-a662ceed3e57"},
        {"4dc2061a8b9e44feb4363ed01fc9eb6e", "S", "19271148-bb8c-59f7-a5b3-efda0dfa46a9"},
        {"order-1", "S", "e6eee875-2411-5add-9411-c21ec9b401e4"},
        {"order-1", "ORDER", "d391cb19-6645-52a1-8e91-2a9e967362ad"},
    };
    for (size_t i = 0; i < sizeof mapped / sizeof *mapped; i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"specversion\":\"1.0\",\"id\":\"%s\",\"type\":\"T\",\"source\":\"%s\"}",
                 mapped[i][0], mapped[i][1]);
        int rc = sc_event_parse(body, strlen(body), mapped[i][0], strlen(mapped[i][0]), &e, reason,
                                sizeof reason);
        ok(rc == 0 && strcmp(e.ev.id, mapped[i][2]) == 0 && strcmp(e.ev.original_id, mapped[i][0]) == 0 &&
               strcmp(e.id_from, mapped[i][0]) == 0,
           "id '%s' of source '%s' is consumed as %s, its message_id the id as written (%s)",
           mapped[i][0], mapped[i][1], mapped[i][2], rc ? reason : e.ev.id);
        if (rc == 0)
            sc_event_free(&e);
    }
    refused("{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"source\":\"S\"}", NULL, "'type'", "missing type");
    refused("{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"\",\"source\":\"S\"}", NULL, "'type'", "empty type");
    refused("{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"T\"}", NULL, "'source'", "missing source");
    refused("{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"T\",\"source\":[]}", NULL, "'source'", "source not a string");
    refused(minimal, "5dc2061a-8b9e-44fe-b436-3ed01fc9eb6e", "differs from id", "message_id differs from id");
    refused(minimal, "", "differs from id", "empty message_id differs from id");
    refused("{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"T\",\"source\":\"S\",\"subject\":5}", NULL, "'subject'", "subject not a string");
    refused("{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"T\",\"source\":\"S\",\"eventversion\":\"2\"}", NULL, "'eventversion'", "eventversion not an integer");
    refused("{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"id\":\"" ID "\",\"type\":\"T\",\"source\":\"S\"}", NULL, "not valid JSON", "duplicate member names");
    refused("{\"specversion\":\"1.0\",\"id\":\"" ID "\",\"type\":\"T\\u0000x\",\"source\":\"S\"}", NULL, "holds U+0000", "NUL inside an attribute");

    ok(sc_is_canonical_uuid(ID, 36), "canonical uuid accepted");
    ok(!sc_is_canonical_uuid(ID, 35), "short uuid refused");
    ok(!sc_is_canonical_uuid("4dc2061a-8b9e-44fe-b436-3ed01fc9eb6g", 36), "non-hex refused");
    return done();
}
