/* RFC 6901 JSON Pointers and the members of a JSON array, found by the
 * strict scanner (json_span.c) without converting any value: what a
 * pointer names is handed on as written. */
#include <string.h>

#include "json_span.h"
#include "json_walk.h"

long sc_json_array_spans(const char *body, size_t len, size_t (*spans)[2], size_t max)
{
    struct sc_json_walk w;
    if (sc_json_walk_open(&w, body, body + len) || w.object)
        return -1;
    long n = 0;
    int rc;
    const char *k, *v, *v_end;
    size_t k_len;
    while ((rc = sc_json_walk_next(&w, &k, &k_len, &v, &v_end)) == 1) {
        if ((size_t)n < max) {
            spans[n][0] = (size_t)(v - body);
            spans[n][1] = (size_t)(v_end - body);
        }
        n++;
    }
    return rc == 0 && sc_json_walk_ends_text(&w) ? n : -1;
}

int sc_json_pointer_valid(const char *pointer)
{
    if (!pointer || (pointer[0] && pointer[0] != '/'))
        return 0;
    for (const char *p = pointer; *p; p++)
        if (*p == '~' && p[1] != '0' && p[1] != '1')
            return 0;
    return 1;
}

/* The next reference token of a pointer, unescaped (~1 is '/', ~0 is '~'),
 * into tok (NUL-terminated). Returns the rest of the pointer. */
static const char *pointer_token(const char *p, char *tok, size_t cap, size_t *tok_len)
{
    size_t n = 0;
    for (p++; *p && *p != '/'; p++) {
        char c = *p;
        if (c == '~')
            c = *++p == '1' ? '/' : '~';
        if (n + 1 < cap)
            tok[n] = c;
        n++;
    }
    tok[n < cap ? n : cap - 1] = 0;
    *tok_len = n;
    return p;
}

/* An array index token: "0", or digits without a leading zero. -1 when
 * the token is not one (or too large to be an index here). */
static long array_index(const char *tok, size_t len)
{
    if (len == 0 || len > 9 || (len > 1 && tok[0] == '0'))
        return -1;
    long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (tok[i] < '0' || tok[i] > '9')
            return -1;
        v = v * 10 + (tok[i] - '0');
    }
    return v;
}

int sc_json_pointer_span(const char *text, size_t len, const char *pointer, size_t *start,
                         size_t *end)
{
    if (!sc_json_pointer_valid(pointer) || !sc_json_text_valid(text, len))
        return -1;
    /* The whole text's value, without the whitespace around it. */
    const char *v = text, *v_end = text + len;
    while (v < v_end && strchr(" \t\n\r", *v))
        v++;
    while (v_end > v && strchr(" \t\n\r", v_end[-1]))
        v_end--;
    char tok[1024];
    for (const char *p = pointer; *p;) {
        size_t tok_len;
        p = pointer_token(p, tok, sizeof tok, &tok_len);
        if (tok_len >= sizeof tok)
            return 0; /* no key of the text is that long and matched by a truncated token */
        struct sc_json_walk w;
        if (sc_json_walk_open(&w, v, v_end))
            return 0; /* a scalar has no children */
        long want = w.object ? 0 : array_index(tok, tok_len);
        if (want < 0)
            return 0;
        const char *k = NULL, *cv, *cv_end;
        size_t k_len = 0;
        int found = 0;
        for (long i = 0; sc_json_walk_next(&w, &k, &k_len, &cv, &cv_end) == 1; i++) {
            if (w.object ? sc_json_key_is(k, k_len, tok) : i == want) {
                found = 1;
                v = cv;
                v_end = cv_end;
                if (!w.object)
                    break; /* a later duplicate key wins in an object: keep walking */
            }
        }
        if (!found)
            return 0;
    }
    *start = (size_t)(v - text);
    *end = (size_t)(v_end - text);
    return 1;
}


int sc_json_pointer_scalar(const char *text, size_t len, const char *pointer, const char **value,
                           size_t *value_len, const char **kind)
{
    size_t a, b;
    if (!text || sc_json_pointer_span(text, len, pointer, &a, &b) <= 0)
        return 0;
    const char *v = text + a;
    size_t n = b - a;
    if (*v == '"') {
        v++;
        n -= 2;
    } else if (!(*v == '-' || (*v >= '0' && *v <= '9'))) {
        *kind = *v == '{' ? "an object" : *v == '[' ? "an array" : *v == 'n' ? "null" : "a boolean";
        return -1;
    }
    *value = v;
    *value_len = n;
    return 1;
}
