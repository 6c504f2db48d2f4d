/* Unit tests of sql.so's config loader and parameter grammar (no server). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql_config.h"
#include "tests/unit/tap.h"

static void refused_config(const char *json, const char *want, const char *label)
{
    struct sc_sql_config c;
    char err[512] = "";
    int rc = sc_sql_config_parse(json, strlen(json), &c, err, sizeof err);
    ok(rc != 0 && strstr(err, want) != NULL, "%s refused naming '%s' (got: %s)", label, want, err);
    if (rc == 0)
        sc_sql_config_free(&c);
}

static void test_placeholders(void)
{
    is_int(sc_sql_count_placeholders("INSERT INTO t VALUES (?, ?, ?)"), 3, "three marks");
    is_int(sc_sql_count_placeholders("SELECT '?', \"?\", `a?b`, ? -- ?\n"), 1,
           "marks in strings, identifiers and -- comments do not count");
    is_int(sc_sql_count_placeholders("SELECT 'it''s ?' , 'a\\'?', ? # ?"), 1,
           "doubled and escaped quotes stay inside the string");
    is_int(sc_sql_count_placeholders("SELECT /* ? */ ?, 1--?"), 2,
           "block comments skipped; '--' without a space is an operator");
    is_int(sc_sql_count_placeholders("SELECT 'unterminated ?"), 0, "unterminated string");
}

static void test_params(void)
{
    struct sc_sql_param p;
    char err[256];
    ok(sc_sql_param_parse("subject:int", &p, err, sizeof err) == 0 && p.src == SC_SQL_SRC_SUBJECT &&
           p.type == SC_SQL_T_INT, "subject:int");
    sc_sql_param_free(&p);
    ok(sc_sql_param_parse("data/a~1b/c~0d/0", &p, err, sizeof err) == 0 && p.n_tokens == 3 &&
           strcmp(p.tokens[0], "a/b") == 0 && strcmp(p.tokens[1], "c~d") == 0 &&
           strcmp(p.tokens[2], "0") == 0 && p.type == SC_SQL_T_AUTO,
       "JSON Pointer with ~1 and ~0 escapes");
    sc_sql_param_free(&p);
    ok(sc_sql_param_parse("data", &p, err, sizeof err) == 0 && p.n_tokens == 0, "data: the whole value");
    sc_sql_param_free(&p);
    ok(sc_sql_param_parse("data/a:b:string", &p, err, sizeof err) == 0 && p.n_tokens == 1 &&
           strcmp(p.tokens[0], "a:b") == 0 && p.type == SC_SQL_T_STRING,
       "a ':' inside a token with an explicit type");
    sc_sql_param_free(&p);
    ok(sc_sql_param_parse("data/a~2", &p, err, sizeof err) != 0 && strstr(err, "~"), "bad ~ escape: %s", err);
    ok(sc_sql_param_parse("subject:intt", &p, err, sizeof err) != 0 && strstr(err, "unknown type 'intt'"),
       "unknown type: %s", err);
    ok(sc_sql_param_parse("subjekt", &p, err, sizeof err) != 0 && strstr(err, "unknown attribute"),
       "unknown attribute: %s", err);
    ok(sc_sql_param_parse("database", &p, err, sizeof err) != 0, "'database' is not data");
}

static int value_of(const char *spec, const struct sc_event *ev, struct sc_sql_value *v, char *reason,
                    size_t len)
{
    struct sc_sql_param p;
    char err[256];
    if (sc_sql_param_parse(spec, &p, err, sizeof err))
        return -2;
    int rc = sc_sql_param_value(&p, ev, v, reason, len);
    if (rc == 0 && v->s && !v->owned) {
        /* it may point into the event's text: keep a copy for the checks */
        v->owned = malloc(v->len + 1);
        memcpy(v->owned, v->s, v->len);
        v->owned[v->len] = 0;
        v->s = v->owned;
    }
    sc_sql_param_free(&p);
    return rc;
}

static void test_values(void)
{
    static const char data[] = "{\"n\":42,\"s\":\"12\",\"bad\":\"12x\",\"d\":\"19.90\",\"r\":0.1,"
                               "\"b\":true,\"nul\":\"a\\u0000b\",\"obj\":{\"k\":[1,\"x\"]},"
                               "\"t\":\"2026-11-29T23:30:00.5+01:00\",\"z\":null,\"a/b\":7}";
    struct sc_event ev = {.id = "00000000-0000-4000-8000-000000000001", .type = "T", .source = "S",
                          .subject = "1001", .eventversion = 3, .has_eventversion = 1,
                          .data_json = data, .data_json_len = sizeof data - 1};
    struct sc_sql_value v;
    char r[400];
    ok(value_of("subject:int", &ev, &v, r, sizeof r) == 0 && v.kind == SC_SQL_V_INT && v.i == 1001,
       "subject:int from text");
    sc_sql_value_free(&v);
    ok(value_of("eventversion", &ev, &v, r, sizeof r) == 0 && v.kind == SC_SQL_V_INT && v.i == 3,
       "eventversion is an int");
    sc_sql_value_free(&v);
    ok(value_of("data/n", &ev, &v, r, sizeof r) == 0 && v.kind == SC_SQL_V_INT && v.i == 42, "auto int");
    sc_sql_value_free(&v);
    ok(value_of("data/s:int", &ev, &v, r, sizeof r) == 0 && v.i == 12, "digits as int");
    sc_sql_value_free(&v);
    ok(value_of("data/bad:int", &ev, &v, r, sizeof r) == -1 && strstr(r, "'data/bad:int'") &&
           strstr(r, "not an integer"), "mistyped value names the parameter: %s", r);
    ok(value_of("data/missing", &ev, &v, r, sizeof r) == -1 && strstr(r, "'data/missing'") &&
           strstr(r, "missing"), "missing value names the parameter: %s", r);
    ok(value_of("data/d:decimal", &ev, &v, r, sizeof r) == 0 && v.kind == SC_SQL_V_DECIMAL &&
           strcmp(v.s, "19.90") == 0, "decimal text kept digit for digit");
    sc_sql_value_free(&v);
    ok(value_of("data/r:decimal", &ev, &v, r, sizeof r) == 0 && strcmp(v.s, "0.1") == 0,
       "decimal from a JSON number: shortest text (%s)", v.s ? v.s : "");
    sc_sql_value_free(&v);
    ok(value_of("data/b:bool", &ev, &v, r, sizeof r) == 0 && v.kind == SC_SQL_V_BOOL && v.i == 1, "bool");
    sc_sql_value_free(&v);
    ok(value_of("data/n:bool", &ev, &v, r, sizeof r) == -1, "a number is not a bool");
    ok(value_of("data/nul", &ev, &v, r, sizeof r) == 0 && v.kind == SC_SQL_V_TEXT && v.len == 3 &&
           memcmp(v.s, "a\0b", 3) == 0, "a string with NUL keeps every byte");
    sc_sql_value_free(&v);
    ok(value_of("data/obj:json", &ev, &v, r, sizeof r) == 0 && strcmp(v.s, "{\"k\":[1,\"x\"]}") == 0,
       "json: compact text");
    sc_sql_value_free(&v);
    ok(value_of("data/obj/k/1", &ev, &v, r, sizeof r) == 0 && v.kind == SC_SQL_V_TEXT &&
           strcmp(v.s, "x") == 0, "array index in a pointer");
    sc_sql_value_free(&v);
    ok(value_of("data/obj/k/01", &ev, &v, r, sizeof r) == -1, "leading zero is no index");
    ok(value_of("data/obj/k/-", &ev, &v, r, sizeof r) == -1, "'-' is no element");
    ok(value_of("data/a~1b", &ev, &v, r, sizeof r) == 0 && v.i == 7, "~1 addresses a key with '/'");
    sc_sql_value_free(&v);
    ok(value_of("data/z:int", &ev, &v, r, sizeof r) == 0 && v.kind == SC_SQL_V_NULL, "JSON null binds NULL");
    sc_sql_value_free(&v);
    ok(value_of("data/t:datetime", &ev, &v, r, sizeof r) == 0 && v.kind == SC_SQL_V_DATETIME &&
           v.dt.year == 2026 && v.dt.month == 11 && v.dt.day == 29 && v.dt.hour == 22 &&
           v.dt.minute == 30 && v.dt.usec == 500000, "datetime converted to UTC");
    sc_sql_value_free(&v);
    ok(value_of("id:json", &ev, &v, r, sizeof r) == 0 &&
           strcmp(v.s, "\"00000000-0000-4000-8000-000000000001\"") == 0, "attribute as JSON");
    sc_sql_value_free(&v);
    ev.subject = NULL;
    ok(value_of("subject", &ev, &v, r, sizeof r) == -1 && strstr(r, "'subject'"), "absent subject: %s", r);

    /* trace context: bound when the event has it, NULL when not (never a REJECT) */
    ok(value_of("traceparent", &ev, &v, r, sizeof r) == 0 && v.kind == SC_SQL_V_NULL,
       "an event without trace context (struct_size 0) binds traceparent NULL: %s", r);
    sc_sql_value_free(&v);
    ev.struct_size = sizeof ev;
    ok(value_of("trace_id", &ev, &v, r, sizeof r) == 0 && v.kind == SC_SQL_V_NULL,
       "an event that has the fields but no trace context binds trace_id NULL");
    sc_sql_value_free(&v);
    ev.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    ev.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    ok(value_of("traceparent", &ev, &v, r, sizeof r) == 0 && v.kind == SC_SQL_V_TEXT &&
           strcmp(v.s, ev.traceparent) == 0, "traceparent bound as its text");
    sc_sql_value_free(&v);
    ok(value_of("trace_id", &ev, &v, r, sizeof r) == 0 && v.kind == SC_SQL_V_TEXT &&
           strcmp(v.s, ev.trace_id) == 0, "trace_id bound as its 32 hex digits");
    sc_sql_value_free(&v);
}

/* data is read only where a parameter points, exactly as written. */
static void test_exact_values(void)
{
    static const char data[] =
        "{ \"huge\" : 123456789012345678901234567890123 , \"real\": 1e400,"
        " \"deep\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[{\"x\": 18446744073709551616}]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],"
        " \"id\": 7, \"price\": 19.90, \"big\": 98765432109876543210987654321,"
        " \"neg\": -9223372036854775808, \"over\": 9223372036854775808,"
        " \"exp\": 1.5e3, \"tiny\": 25e-4, \"zero\": 0e10, \"far\": 1e70,"
        " \"caf\\u00e9\": \"accent\", \"emoji\": \"\\ud83d\\ude00\", \"lone\": \"\\ud800x\","
        " \"ws\": { \"a\" : [ 1 , \"x y\" ] }, \"dup\": 1, \"dup\": 2, \"esc\": \"a\\\"b\\\\c\\/d\" }";
    struct sc_event ev = {.id = "00000000-0000-4000-8000-000000000002", .type = "T", .source = "S",
                          .data_json = data, .data_json_len = sizeof data - 1};
    struct sc_sql_value v;
    char r[400];
    ok(value_of("data/id:int", &ev, &v, r, sizeof r) == 0 && v.kind == SC_SQL_V_INT && v.i == 7,
       "an integer beyond 64 bits, a real beyond DOUBLE and deep nesting elsewhere do not matter (%s)", r);
    sc_sql_value_free(&v);
    ok(value_of("data/price:decimal", &ev, &v, r, sizeof r) == 0 && v.kind == SC_SQL_V_DECIMAL &&
           strcmp(v.s, "19.90") == 0, "decimal from a JSON number: digit for digit (%s)", v.s ? v.s : r);
    sc_sql_value_free(&v);
    ok(value_of("data/price:string", &ev, &v, r, sizeof r) == 0 && strcmp(v.s, "19.90") == 0,
       "string from a JSON number: its text as written");
    sc_sql_value_free(&v);
    ok(value_of("data/big:decimal", &ev, &v, r, sizeof r) == 0 &&
           strcmp(v.s, "98765432109876543210987654321") == 0, "a 29-digit integer as DECIMAL, every digit");
    sc_sql_value_free(&v);
    ok(value_of("data/big", &ev, &v, r, sizeof r) == 0 && v.kind == SC_SQL_V_DECIMAL &&
           strcmp(v.s, "98765432109876543210987654321") == 0,
       "untyped, an integer beyond 64 bits binds as DECIMAL with every digit");
    sc_sql_value_free(&v);
    ok(value_of("data/big:string", &ev, &v, r, sizeof r) == 0 &&
           strcmp(v.s, "98765432109876543210987654321") == 0, "and as a string, every digit");
    sc_sql_value_free(&v);
    ok(value_of("data/big:int", &ev, &v, r, sizeof r) == -1 && strstr(r, "'data/big:int'") &&
           strstr(r, "beyond 64 bits"), "as int it is refused naming the parameter: %s", r);
    ok(value_of("data/neg:int", &ev, &v, r, sizeof r) == 0 && v.i == INT64_MIN, "INT64_MIN is an int");
    sc_sql_value_free(&v);
    ok(value_of("data/over:int", &ev, &v, r, sizeof r) == -1, "INT64_MAX + 1 is not");
    ok(value_of("data/deep/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/x:string",
                &ev, &v, r, sizeof r) == 0 && strcmp(v.s, "18446744073709551616") == 0,
       "a pointer 33 levels deep reads the number there (%s)", r);
    sc_sql_value_free(&v);
    ok(value_of("data/exp:decimal", &ev, &v, r, sizeof r) == 0 && strcmp(v.s, "1500") == 0,
       "an exponent moves the point exactly (1.5e3: %s)", v.s ? v.s : r);
    sc_sql_value_free(&v);
    ok(value_of("data/tiny:decimal", &ev, &v, r, sizeof r) == 0 && strcmp(v.s, "0.0025") == 0,
       "25e-4 is 0.0025 (%s)", v.s ? v.s : r);
    sc_sql_value_free(&v);
    ok(value_of("data/zero:decimal", &ev, &v, r, sizeof r) == 0 && strcmp(v.s, "0") == 0, "0e10 is 0");
    sc_sql_value_free(&v);
    ok(value_of("data/far:decimal", &ev, &v, r, sizeof r) == -1 && strstr(r, "65 digits"),
       "1e70 needs more than 65 digits: %s", r);
    ok(value_of("data/exp", &ev, &v, r, sizeof r) == 0 && v.kind == SC_SQL_V_DOUBLE && v.d == 1500.0,
       "untyped, a number with an exponent is a DOUBLE");
    sc_sql_value_free(&v);
    ok(value_of("data/real", &ev, &v, r, sizeof r) == -1 && strstr(r, "DOUBLE's range"),
       "where a parameter points at 1e400 untyped, it is refused: %s", r);
    ok(value_of("data/real:string", &ev, &v, r, sizeof r) == 0 && strcmp(v.s, "1e400") == 0,
       "and as a string it is its text");
    sc_sql_value_free(&v);
    ok(value_of("data/caf\xc3\xa9", &ev, &v, r, sizeof r) == 0 && strcmp(v.s, "accent") == 0,
       "a key written with a \\u escape matches its UTF-8 token (%s)", r);
    sc_sql_value_free(&v);
    ok(value_of("data/emoji", &ev, &v, r, sizeof r) == 0 && v.len == 4 &&
           memcmp(v.s, "\xf0\x9f\x98\x80", 4) == 0, "a surrogate pair is one 4-byte character");
    sc_sql_value_free(&v);
    ok(value_of("data/lone", &ev, &v, r, sizeof r) == -1 && strstr(r, "'data/lone'") &&
           strstr(r, "surrogate"), "half a surrogate pair is refused where it is read: %s", r);
    ok(value_of("data/lone:json", &ev, &v, r, sizeof r) == 0 && strcmp(v.s, "\"\\ud800x\"") == 0,
       "and as json it is the text as written");
    sc_sql_value_free(&v);
    ok(value_of("data/ws:json", &ev, &v, r, sizeof r) == 0 && strcmp(v.s, "{\"a\":[1,\"x y\"]}") == 0,
       "json: the blanks between tokens go, those in strings stay (%s)", v.s ? v.s : r);
    sc_sql_value_free(&v);
    ok(value_of("data/ws/a/1", &ev, &v, r, sizeof r) == 0 && strcmp(v.s, "x y") == 0,
       "a pointer through blanks");
    sc_sql_value_free(&v);
    ok(value_of("data/dup", &ev, &v, r, sizeof r) == -1 && strstr(r, "twice"),
       "a member written twice is ambiguous where a pointer reads it: %s", r);
    ok(value_of("data/esc", &ev, &v, r, sizeof r) == 0 && strcmp(v.s, "a\"b\\c/d") == 0,
       "escapes in a string value are unescaped");
    sc_sql_value_free(&v);
    ok(value_of("data/ws/a/2", &ev, &v, r, sizeof r) == -1 && strstr(r, "missing"),
       "an index past the end is missing");
    ok(value_of("data/id/x", &ev, &v, r, sizeof r) == -1 && strstr(r, "missing"),
       "a scalar has no members");
    static const char broken[] = "{\"a\": [1, 2";
    struct sc_event bad = {.id = ev.id, .type = "T", .source = "S", .data_json = broken,
                           .data_json_len = sizeof broken - 1};
    ok(value_of("data/a/1", &bad, &v, r, sizeof r) == -1 && strstr(r, "'data/a/1'") &&
           strstr(r, "not JSON"), "text that is not JSON on the way is refused naming the parameter: %s", r);
    /* deep nesting on the path skipped over, far beyond any recursion limit */
    size_t depth = 100000;
    char *deep = malloc(depth * 2 + 32);
    size_t n = 0;
    n += (size_t)sprintf(deep, "{\"d\":");
    for (size_t i = 0; i < depth; i++)
        deep[n++] = '[';
    for (size_t i = 0; i < depth; i++)
        deep[n++] = ']';
    n += (size_t)sprintf(deep + n, ",\"k\":5}");
    struct sc_event dev = {.id = ev.id, .type = "T", .source = "S", .data_json = deep, .data_json_len = n};
    ok(value_of("data/k", &dev, &v, r, sizeof r) == 0 && v.i == 5,
       "a value after 100,000 levels of nesting is found (no recursion)");
    sc_sql_value_free(&v);
    free(deep);
}

static void test_datetime(void)
{
    struct sc_sql_datetime t;
    ok(sc_sql_parse_datetime("2024-02-29T00:00:00Z", 20, &t) == 0, "leap day");
    ok(sc_sql_parse_datetime("2023-02-29T00:00:00Z", 20, &t) != 0, "no leap day in 2023");
    ok(sc_sql_parse_datetime("2026-01-01T00:30:00-01:00", 25, &t) == 0 && t.hour == 1, "negative offset");
    ok(sc_sql_parse_datetime("2026-01-01T00:30:00+01:00", 25, &t) == 0 && t.year == 2025 &&
           t.month == 12 && t.day == 31 && t.hour == 23, "offset crosses the year");
    ok(sc_sql_parse_datetime("2026-01-01 00:30:00", 19, &t) != 0, "an offset is required");
    ok(sc_sql_parse_datetime("2026-13-01T00:30:00Z", 20, &t) != 0, "month 13");
}

static void test_config(void)
{
    static const char good[] =
        "{\"events\":{\"ORDER_ACCEPTED\":[{\"sql\":\"INSERT INTO notification_job (event_id, "
        "order_id, source_version, status, created_at) VALUES (?, ?, ?, 'PENDING', "
        "UTC_TIMESTAMP(6))\",\"params\":[\"id\",\"subject:int\",\"eventversion\"]}],"
        "\"X\":[{\"sql\":\"DO 1\"},{\"sql\":\"DO ?\",\"params\":[\"data\"]}]},"
        "\"other_events\":\"reject\"}";
    struct sc_sql_config c;
    char err[512] = "";
    ok(sc_sql_config_parse(good, strlen(good), &c, err, sizeof err) == 0, "the issue's config loads (%s)", err);
    ok(c.n_all == 3 && c.reject_others && sc_sql_route_find(&c, "X") &&
           sc_sql_route_find(&c, "X")->stmts[1].index == 2 && !sc_sql_route_find(&c, "Y"),
       "routes and statement indexes");
    sc_sql_config_free(&c);
    refused_config("[]", "handler_config: expected an object", "not an object");
    refused_config("{}", "handler_config.events: missing", "no events");
    refused_config("{\"events\":{},\"other\":1}", "handler_config.other: unknown key", "unknown key");
    refused_config("{\"events\":{},\"other_events\":\"drop\"}", "handler_config.other_events",
                   "other_events value");
    refused_config("{\"events\":{\"A\":{}}}", "handler_config.events.A: expected an array", "route type");
    refused_config("{\"events\":{\"A\":[{\"sql\":\"DO ?\"}]}}",
                   "handler_config.events.A[0]: the sql has 1 placeholder, params has 0", "too few params");
    refused_config("{\"events\":{\"A\":[{\"sql\":\"DO 1\",\"params\":[\"id\"]}]}}",
                   "placeholders, params has 1", "too many params");
    refused_config("{\"events\":{\"A\":[{\"sql\":\"DO 1\"},{\"sql\":\"DO ?\",\"params\":[\"id:number\"]}]}}",
                   "handler_config.events.A[1].params[0]: unknown type 'number'", "unknown type");
    refused_config("{\"events\":{\"A\":[{\"sql\":\"DO ?\",\"params\":[\"data/x~\"]}]}}",
                   "handler_config.events.A[0].params[0]", "bad pointer");
    refused_config("{\"events\":{\"A\":[{\"sql\":\"DO 1\",\"sqll\":\"\"}]}}",
                   "handler_config.events.A[0].sqll: unknown key", "unknown statement key");
    refused_config("{\"events\":{\"A\":[{\"sql\":\"\"}]}}", "handler_config.events.A[0].sql", "empty sql");
}

int main(void)
{
    test_placeholders();
    test_params();
    test_values();
    test_exact_values();
    test_datetime();
    test_config();
    return done();
}
