#include "json_span.h"

#include "ce_rules.h"
#include "json_walk.h"

#include <stdlib.h>
#include <string.h>

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
    if (sc_utf8_next(&u, (const unsigned char *)s->end) == UINT32_MAX)
        return -1;
    s->p = (const char *)u;
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

/* The containers open around the scan position, one bit each (set: an
 * object), in words that grow with the nesting: a value may nest as deep as
 * it likes (the scan is a loop, not a recursion) for a bit of memory per
 * level. */
struct nesting {
    unsigned long local[4];
    unsigned long *bits;
    size_t depth, cap; /* levels open; bits available */
};

#define WORD_BITS (sizeof(unsigned long) * 8)

static int push(struct nesting *n, int object)
{
    if (n->depth == n->cap) {
        size_t words = n->cap / WORD_BITS * 2;
        unsigned long *more = malloc(words * sizeof *more);
        if (!more)
            return -1;
        memcpy(more, n->bits, n->cap / 8);
        if (n->bits != n->local)
            free(n->bits);
        n->bits = more;
        n->cap = words * WORD_BITS;
    }
    unsigned long bit = 1ul << (n->depth % WORD_BITS);
    if (object)
        n->bits[n->depth / WORD_BITS] |= bit;
    else
        n->bits[n->depth / WORD_BITS] &= ~bit;
    n->depth++;
    return 0;
}

static int innermost_is_object(const struct nesting *n)
{
    size_t i = n->depth - 1;
    return (n->bits[i / WORD_BITS] >> (i % WORD_BITS)) & 1;
}

/* `"key" :` inside an object, before its value. */
static int member_key(struct scan *s)
{
    ws(s);
    if (string(s))
        return -1;
    ws(s);
    if (s->p >= s->end || *s->p++ != ':')
        return -1;
    return 0;
}

static int scalar(struct scan *s)
{
    switch (*s->p) {
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

/* One JSON value at s->p, nested to any depth. 0 with s->p after it, or -1. */
static int value(struct scan *s)
{
    struct nesting n = {.depth = 0, .cap = sizeof n.local * 8};
    n.bits = n.local;
    int rc = -1;
    for (;;) {
        /* A value starts here. */
        ws(s);
        if (s->p >= s->end)
            break;
        if (*s->p == '{' || *s->p == '[') {
            int object = *s->p++ == '{';
            if (push(&n, object))
                break;
            ws(s);
            if (s->p < s->end && *s->p == (object ? '}' : ']')) {
                s->p++;
                n.depth--; /* empty: a complete value, go on below */
            } else {
                if (object && member_key(s))
                    break;
                continue;
            }
        } else if (scalar(s)) {
            break;
        }
        /* A value ended: close what it ends, or go to the next element. */
        int next = 0;
        while (n.depth > 0) {
            ws(s);
            if (s->p >= s->end)
                break;
            int object = innermost_is_object(&n);
            if (*s->p == (object ? '}' : ']')) {
                s->p++;
                n.depth--;
                continue;
            }
            if (*s->p++ != ',' || (object && member_key(s)))
                break;
            next = 1;
            break;
        }
        if (!next) {
            rc = n.depth == 0 ? 0 : -1;
            break;
        }
    }
    if (n.bits != n.local)
        free(n.bits);
    return rc;
}

static unsigned hex4(const unsigned char *p)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++)
        v = v << 4 | (unsigned)(p[i] <= '9' ? p[i] - '0' : (p[i] | 0x20) - 'a' + 10);
    return v;
}

/* A key token (quotes included) that spells key, escapes decoded: "d\u0061ta"
 * is the member data as much as "data" is. The token is valid (string()). */
static int key_is(const char *tok, size_t tok_len, const char *key)
{
    const unsigned char *p = (const unsigned char *)tok + 1, *end = (const unsigned char *)tok + tok_len - 1;
    const unsigned char *k = (const unsigned char *)key;
    while (p < end) {
        unsigned char one[4];
        size_t len = 1;
        if (*p != '\\') {
            one[0] = *p++;
        } else if (p[1] != 'u') {
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            one[0] = (unsigned char)to[strchr(from, p[1]) - from];
            p += 2;
        } else {
            unsigned cp = hex4(p + 2);
            p += 6;
            if (cp >= 0xD800 && cp <= 0xDBFF && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
                unsigned lo = hex4(p + 2);
                if (lo < 0xDC00 || lo > 0xDFFF)
                    return 0;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                p += 6;
            } else if (cp >= 0xD800 && cp <= 0xDFFF) {
                return 0; /* a lone surrogate spells no key */
            }
            if (cp < 0x80) {
                one[0] = (unsigned char)cp;
            } else if (cp < 0x800) {
                one[0] = (unsigned char)(0xC0 | cp >> 6);
                one[1] = (unsigned char)(0x80 | (cp & 0x3F));
                len = 2;
            } else if (cp < 0x10000) {
                one[0] = (unsigned char)(0xE0 | cp >> 12);
                one[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
                one[2] = (unsigned char)(0x80 | (cp & 0x3F));
                len = 3;
            } else {
                one[0] = (unsigned char)(0xF0 | cp >> 18);
                one[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
                one[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
                one[3] = (unsigned char)(0x80 | (cp & 0x3F));
                len = 4;
            }
        }
        if (strlen((const char *)k) < len || memcmp(k, one, len) != 0)
            return 0;
        k += len;
    }
    return *k == 0;
}

int sc_json_walk_open(struct sc_json_walk *w, const char *p, const char *end)
{
    struct scan s = {p, end};
    ws(&s);
    w->p = s.p;
    w->end = end;
    w->started = 0;
    if (s.p >= end || (*s.p != '{' && *s.p != '['))
        return -1;
    w->object = *w->p++ == '{';
    return 0;
}

static int walk_step(struct sc_json_walk *w, struct scan *s, const char **key, size_t *key_len,
                     const char **v, const char **v_end)
{
    ws(s);
    if (s->p >= s->end)
        return -1;
    if (*s->p == (w->object ? '}' : ']')) {
        s->p++;
        return 0;
    }
    if (w->started) {
        if (*s->p++ != ',')
            return -1;
        ws(s);
    }
    w->started = 1;
    if (w->object) {
        const char *k = s->p;
        if (string(s))
            return -1;
        *key = k;
        *key_len = (size_t)(s->p - k);
        ws(s);
        if (s->p >= s->end || *s->p++ != ':')
            return -1;
        ws(s);
    }
    *v = s->p;
    if (value(s))
        return -1;
    *v_end = s->p;
    return 1;
}

int sc_json_walk_next(struct sc_json_walk *w, const char **key, size_t *key_len, const char **v,
                      const char **v_end)
{
    struct scan s = {w->p, w->end};
    int rc = walk_step(w, &s, key, key_len, v, v_end);
    w->p = s.p;
    return rc;
}

int sc_json_walk_ends_text(const struct sc_json_walk *w)
{
    struct scan s = {w->p, w->end};
    ws(&s);
    return s.p == s.end;
}

int sc_json_key_is(const char *tok, size_t tok_len, const char *key)
{
    return key_is(tok, tok_len, key);
}

int sc_json_member_span(const char *body, size_t len, const char *key, size_t *start, size_t *end)
{
    struct sc_json_walk w;
    if (sc_json_walk_open(&w, body, body + len) || !w.object)
        return -1;
    int found = 0, rc;
    const char *k = NULL, *v, *v_end;
    size_t k_len = 0;
    while ((rc = sc_json_walk_next(&w, &k, &k_len, &v, &v_end)) == 1) {
        if (!key_is(k, k_len, key))
            continue;
        if (found)
            return -1;
        found = 1;
        *start = (size_t)(v - body);
        *end = (size_t)(v_end - body);
    }
    return rc == 0 && sc_json_walk_ends_text(&w) ? found : -1;
}

int sc_json_text_valid(const char *s, size_t len)
{
    if (!s)
        return 0;
    struct scan sc = {s, s + len};
    if (value(&sc))
        return 0;
    ws(&sc);
    return sc.p == sc.end;
}
