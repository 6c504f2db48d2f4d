/* Unit tests of sql.so's config loader and parameter grammar (no server). */
#include <jansson.h>
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
    void *data = sc_sql_data_parse(ev, err, sizeof err);
    int rc = sc_sql_param_value(&p, ev, data, v, reason, len);
    if (rc == 0 && v->s && !v->owned) {
        /* it points into data, freed next: keep a copy for the checks */
        v->owned = malloc(v->len + 1);
        memcpy(v->owned, v->s, v->len);
        v->owned[v->len] = 0;
        v->s = v->owned;
    }
    sc_sql_data_free(data);
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
    test_datetime();
    test_config();
    return done();
}
