#include "json_span.h"

#include <string.h>

#define MAX_DEPTH 512

struct scan {
    const char *p, *end;
};

static void ws(struct scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static int hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* One UTF-8 sequence (no overlongs, no surrogates, at most U+10FFFF). */
static int utf8(struct scan *s)
{
    const unsigned char *u = (const unsigned char *)s->p;
    size_t left = (size_t)(s->end - s->p);
    unsigned c = u[0];
    size_t n;
    unsigned min;
    if (c < 0x80)
        n = 1, min = 0;
    else if ((c & 0xE0) == 0xC0)
        n = 2, min = 0x80, c &= 0x1F;
    else if ((c & 0xF0) == 0xE0)
        n = 3, min = 0x800, c &= 0x0F;
    else if ((c & 0xF8) == 0xF0)
        n = 4, min = 0x10000, c &= 0x07;
    else
        return -1;
    if (left < n)
        return -1;
    for (size_t i = 1; i < n; i++) {
        if ((u[i] & 0xC0) != 0x80)
            return -1;
        c = (c << 6) | (u[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return -1;
    s->p += n;
    return 0;
}

static int string(struct scan *s)
{
    if (s->p >= s->end || *s->p != '"')
        return -1;
    s->p++;
    while (s->p < s->end) {
        unsigned char c = (unsigned char)*s->p;
        if (c == '"') {
            s->p++;
            return 0;
        }
        if (c < 0x20)
            return -1;
        if (c == '\\') {
            if (++s->p >= s->end)
                return -1;
            char e = *s->p++;
            if (e == 'u') {
                for (int i = 0; i < 4; i++)
                    if (s->p >= s->end || !hex(*s->p++))
                        return -1;
            } else if (!strchr("\"\\/bfnrt", e) || e == 0) {
                return -1;
            }
            continue;
        }
        if (utf8(s))
            return -1;
    }
    return -1;
}

static int digits(struct scan *s)
{
    const char *b = s->p;
    while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
        s->p++;
    return s->p > b ? 0 : -1;
}

static int number(struct scan *s)
{
    if (s->p < s->end && *s->p == '-')
        s->p++;
    if (s->p < s->end && *s->p == '0')
        s->p++;
    else if (digits(s))
        return -1;
    if (s->p < s->end && *s->p == '.') {
        s->p++;
        if (digits(s))
            return -1;
    }
    if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
        s->p++;
        if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
            s->p++;
        if (digits(s))
            return -1;
    }
    return 0;
}

static int literal(struct scan *s, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
        return -1;
    s->p += n;
    return 0;
}

static int value(struct scan *s, int depth);

static int container(struct scan *s, int depth, char close)
{
    if (depth > MAX_DEPTH)
        return -1;
    s->p++;
    ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        return 0;
    }
    for (;;) {
        if (close == '}') {
            ws(s); /* before every key, not only the first */
            if (string(s))
                return -1;
            ws(s);
            if (s->p >= s->end || *s->p++ != ':')
                return -1;
        }
        if (value(s, depth + 1))
            return -1;
        ws(s);
        if (s->p >= s->end)
            return -1;
        if (*s->p == close) {
            s->p++;
            return 0;
        }
        if (*s->p++ != ',')
            return -1;
    }
}

static int value(struct scan *s, int depth)
{
    ws(s);
    if (s->p >= s->end)
        return -1;
    switch (*s->p) {
    case '{':
        return container(s, depth, '}');
    case '[':
        return container(s, depth, ']');
    case '"':
        return string(s);
    case 't':
        return literal(s, "true");
    case 'f':
        return literal(s, "false");
    case 'n':
        return literal(s, "null");
    default:
        return number(s);
    }
}

/* A key token (quotes included) spelled exactly as key, without escapes. A
 * key written with escapes is another member to this scanner; the caller's
 * full parser still sees it (and refuses a duplicate). */
static int key_is(const char *tok, size_t tok_len, const char *key)
{
    size_t n = strlen(key);
    return tok_len == n + 2 && memcmp(tok + 1, key, n) == 0;
}

int sc_json_member_span(const char *body, size_t len, const char *key, size_t *start, size_t *end)
{
    struct scan s = {body, body + len};
    int found = 0;
    ws(&s);
    if (s.p >= s.end || *s.p != '{')
        return -1;
    s.p++;
    ws(&s);
    if (s.p < s.end && *s.p == '}') {
        s.p++;
    } else {
        for (;;) {
            const char *k = s.p;
            if (string(&s))
                return -1;
            const char *k_end = s.p;
            ws(&s);
            if (s.p >= s.end || *s.p++ != ':')
                return -1;
            ws(&s);
            const char *v = s.p;
            if (value(&s, 1))
                return -1;
            if (key_is(k, (size_t)(k_end - k), key)) {
                if (found)
                    return -1;
                found = 1;
                *start = (size_t)(v - body);
                *end = (size_t)(s.p - body);
            }
            ws(&s);
            if (s.p >= s.end)
                return -1;
            if (*s.p == '}') {
                s.p++;
                break;
            }
            if (*s.p++ != ',')
                return -1;
            ws(&s);
        }
    }
    ws(&s);
    return s.p == s.end ? found : -1;
}

int sc_json_text_valid(const char *s, size_t len)
{
    if (!s)
        return 0;
    struct scan sc = {s, s + len};
    if (value(&sc, 0))
        return 0;
    ws(&sc);
    return sc.p == sc.end;
}
