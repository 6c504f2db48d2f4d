/* What makes an outbox row publishable (relay/outbox_rules.h): the routing
 * key limit of basic.publish and I-JSON member names, beside the rules that
 * were there before; and the member-name check on its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sidecar/envelope/json_names.h"
#include "sidecar/relay/outbox_rules.h"
#include "tap.h"

#define ID "4dc2061a-8b9e-44fe-b436-3ed01fc9eb6e"

static int rule(const char *type, const char *payload, char *why)
{
    return sc_rules_event(ID, "ORDER", "1", type, payload, why, 256);
}

static int dup(const char *json, char *name)
{
    return sc_json_duplicate_name(json, strlen(json), name, 64);
}

int main(void)
{
    char why[256] = "", name[64] = "";
    char type[300];

    /* event_type is the routing key: at most 255 bytes */
    memset(type, 'T', 255);
    type[255] = 0;
    ok(rule(type, "{}", why), "a 255-byte event_type is publishable");
    memset(type, 'T', 256);
    type[256] = 0;
    ok(!rule(type, "{}", why) && strstr(why, "event_type") && strstr(why, "256 bytes") &&
           strstr(why, "255"),
       "a 256-byte event_type is not, and the reason names the column and both sizes (%s)", why);
    /* bytes, not characters: 64 four-byte characters fit VARCHAR(128) utf8mb4
     * and are 256 bytes */
    type[0] = 0;
    for (int i = 0; i < 64; i++)
        strcat(type, "\xf0\x9f\x98\x80");
    ok(!rule(type, "{}", why), "64 four-byte characters (256 bytes) are refused");

    /* duplicate member names, at any depth, after decoding escapes */
    ok(!rule("T", "{\"a\":1,\"a\":2}", why) && strstr(why, "\"a\"") && strstr(why, "I-JSON"),
       "payload {\"a\":1,\"a\":2} is refused naming the member (%s)", why);
    ok(!rule("T", "{\"x\":[{\"k\":1},{\"b\":{\"c\":1,\"c\":1}}]}", why) && strstr(why, "\"c\""),
       "a repeated name deep inside is refused (%s)", why);
    ok(!rule("T", "{\"a\":1,\"\\u0061\":2}", why), "\"a\" and \"\\u0061\" are the same name");
    ok(!rule("T", "{\"\\ud83d\\ude00\":1,\"\xf0\x9f\x98\x80\":2}", why),
       "a surrogate pair escape and the literal character are the same name");
    ok(rule("T", "{\"a\":{\"a\":{\"a\":1}},\"b\":[{\"a\":1},{\"a\":2}]}", why),
       "the same name in different objects is fine");
    ok(rule("T", "[1,\"a\",{\"a\":\"a\",\"b\":\"a,\\\"a\\\":\"}]", why),
       "names inside string values are not names");
    ok(rule("T", "{\"A\":1,\"a\":2,\"a \":3,\"\":4}", why), "names differing in case or spaces differ");
    ok(!rule("T", "{\"\":1,\"\":2}", why), "two empty names are a repeat");
    ok(rule("T", "123456789012345678901234567890", why), "a bare number is still fine");

    is_int(dup("{\"a\":1,\"b\":{\"x\":1},\"a\":3}", name), 1, "json_names: found");
    is_str(name, "a", "json_names: the repeated name");
    is_int(dup("{\"k\\n\":1,\"k\\u000a\":2}", name), 1, "json_names: escapes decoded (\\n = \\u000a)");
    is_str(name, "k?", "json_names: a control character shows as '?'");
    is_int(dup("{}", name), 0, "json_names: empty object");
    is_int(dup("\"{\\\"a\\\":1,\\\"a\\\":2}\"", name), 0, "json_names: text inside a string is not an object");
    is_int(dup("{\"a\":1,\"b\" : 2 , \"c\":[{},{\"a\":[]}]}", name), 0, "json_names: whitespace and nesting");

    /* A big object: sorted, not compared pairwise, and depth is not bounded. */
    size_t n = 200000, cap = n * 16 + 16, len = 0;
    char *big = malloc(cap);
    big[len++] = '{';
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(big + len, cap - len, "%s\"k%zu\":%zu", i ? "," : "", i, i);
    big[len++] = '}';
    big[len] = 0;
    is_int(dup(big, name), 0, "200,000 distinct names");
    len--;
    len += (size_t)snprintf(big + len, cap - len, ",\"k7\":0}");
    is_int(dup(big, name), 1, "... and one repeated at the end");
    free(big);
    size_t depth = 100000;
    char *deep = malloc(depth * 6 + 16);
    len = 0;
    for (size_t i = 0; i < depth; i++)
        len += (size_t)sprintf(deep + len, "{\"a\":");
    len += (size_t)sprintf(deep + len, "{\"z\":1,\"z\":2}");
    for (size_t i = 0; i < depth; i++)
        deep[len++] = '}';
    deep[len] = 0;
    is_int(dup(deep, name), 1, "a repeat 100,000 levels deep");
    free(deep);
    return done();
}
