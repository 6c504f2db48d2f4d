/* A parameter's pointer through event data (sql_pointer.h): each object
 * on the way is read to its end, so a member written twice is found and
 * refused rather than one of the two taken. */
#include "sql_pointer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* 1 when the key token (quotes included) unescapes to exactly tok. */
static int key_is(const char *k, size_t len, const char *tok)
{
    size_t tl = strlen(tok);
    if (!memchr(k, '\\', len))
        return len == tl + 2 && memcmp(k + 1, tok, tl) == 0;
    if (len - 2 < tl) /* an escape never makes text longer */
        return 0;
    char small[256];
    char *buf = len <= sizeof small ? small : malloc(len);
    if (!buf)
        return 0;
    long n = sc_sql_json_unescape(k, len, buf);
    int eq = n >= 0 && (size_t)n == tl && memcmp(buf, tok, tl) == 0;
    if (buf != small)
        free(buf);
    return eq;
}

/* A decimal array index: "0" or no leading zero, digits only. */
static int array_index(const char *tok, size_t *out)
{
    if (!tok[0] || (tok[0] == '0' && tok[1]))
        return -1;
    size_t v = 0;
    for (const char *p = tok; *p; p++) {
        if (*p < '0' || *p > '9' || v > (SIZE_MAX - 9) / 10)
            return -1;
        v = v * 10 + (size_t)(*p - '0');
    }
    *out = v;
    return 0;
}

enum sc_sql_found sc_sql_pointer_resolve(const struct sc_sql_param *p, const char *data,
                                         size_t len, struct jval *v, const char **twice)
{
    const char *end = data + len, *cur = sc_sql_json_skip_ws(data, end);
    for (size_t t = 0; t < p->n_tokens; t++) {
        const char *tok = p->tokens[t], *hit = NULL;
        if (cur >= end)
            return PTR_NOT_JSON;
        if (*cur == '{') {
            cur = sc_sql_json_skip_ws(cur + 1, end);
            if (cur < end && *cur == '}')
                return PTR_MISSING;
            for (;;) {
                const char *k = cur, *k_end = sc_sql_json_scan_string(cur, end);
                if (!k_end)
                    return PTR_NOT_JSON;
                cur = sc_sql_json_skip_ws(k_end, end);
                if (cur >= end || *cur != ':')
                    return PTR_NOT_JSON;
                cur = sc_sql_json_skip_ws(cur + 1, end);
                struct jval skip;
                const char *val = cur;
                if (!(cur = sc_sql_json_scan_value(cur, end, &skip)))
                    return PTR_NOT_JSON;
                if (key_is(k, (size_t)(k_end - k), tok)) {
                    if (hit) {
                        *twice = tok;
                        return PTR_TWICE;
                    }
                    hit = val;
                }
                cur = sc_sql_json_skip_ws(cur, end);
                if (cur < end && *cur == ',') {
                    cur = sc_sql_json_skip_ws(cur + 1, end);
                    continue;
                }
                if (cur < end && *cur == '}')
                    break;
                return PTR_NOT_JSON;
            }
        } else if (*cur == '[') {
            size_t want, i = 0;
            if (array_index(tok, &want))
                return PTR_MISSING;
            cur = sc_sql_json_skip_ws(cur + 1, end);
            if (cur < end && *cur == ']')
                return PTR_MISSING;
            for (;; i++) {
                if (i == want) {
                    hit = cur;
                    break;
                }
                struct jval skip;
                if (!(cur = sc_sql_json_scan_value(cur, end, &skip)))
                    return PTR_NOT_JSON;
                cur = sc_sql_json_skip_ws(cur, end);
                if (cur < end && *cur == ',') {
                    cur = sc_sql_json_skip_ws(cur + 1, end);
                    continue;
                }
                if (cur < end && *cur == ']')
                    return PTR_MISSING;
                return PTR_NOT_JSON;
            }
        } else {
            return PTR_MISSING; /* a scalar has no members */
        }
        if (!hit)
            return PTR_MISSING;
        cur = hit;
    }
    return sc_sql_json_scan_value(cur, end, v) ? PTR_FOUND : PTR_NOT_JSON;
}
