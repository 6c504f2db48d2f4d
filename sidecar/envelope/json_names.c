#include "json_names.h"

#include <stdlib.h>
#include <string.h>

/* The names of the open objects, innermost last: an object's names are
 * contiguous (its children's names are dropped when the child closes), so a
 * stack of (arena offset, length) entries is enough. */
struct name {
    size_t off, len;
};

struct names {
    char *arena;
    size_t arena_len, arena_cap;
    struct name *v;
    size_t n, cap;
};

struct frame {
    size_t first;      /* index in names.v of the object's first name */
    size_t arena_mark; /* arena length when the object opened */
    char object;       /* 1: '{', 0: '[' */
    char expect_key;
};

static int reserve(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return c - 'A' + 10;
}

static unsigned hex4(const char *p)
{
    return (unsigned)(hexval(p[0]) << 12 | hexval(p[1]) << 8 | hexval(p[2]) << 4 | hexval(p[3]));
}

static size_t utf8_put(unsigned c, char *out)
{
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xC0 | c >> 6);
        out[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (char)(0xE0 | c >> 12);
        out[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | c >> 18);
    out[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    out[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* Decodes the string token at *p (opening quote) into the arena and moves
 * *p past its closing quote. A surrogate pair becomes its code point; a
 * lone surrogate keeps its own 3-byte form, which no other name has. */
static int decode_string(const char **p, const char *limit, struct names *ns)
{
    const char *s = *p + 1;
    const char *end = s;
    while (end < limit && *end != '"')
        end += *end == '\\' ? 2 : 1;
    if (end >= limit)
        return -2; /* not valid JSON: the caller promised it was */
    /* Decoding never makes a name longer than its token. */
    if (reserve((void **)&ns->arena, &ns->arena_cap, ns->arena_len + (size_t)(end - s) + 1, 1))
        return -1;
    char *out = ns->arena + ns->arena_len;
    while (s < end) {
        if (*s != '\\') {
            *out++ = *s++;
            continue;
        }
        char e = s[1];
        s += 2;
        switch (e) {
        case 'b': *out++ = '\b'; break;
        case 'f': *out++ = '\f'; break;
        case 'n': *out++ = '\n'; break;
        case 'r': *out++ = '\r'; break;
        case 't': *out++ = '\t'; break;
        case 'u': {
            unsigned c = hex4(s);
            s += 4;
            if (c >= 0xD800 && c <= 0xDBFF && s + 6 <= end && s[0] == '\\' && s[1] == 'u') {
                unsigned lo = hex4(s + 2);
                if (lo >= 0xDC00 && lo <= 0xDFFF) {
                    c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
                    s += 6;
                }
            }
            out += utf8_put(c, out);
            break;
        }
        default: *out++ = e; break; /* " \ / */
        }
    }
    struct name nm = {ns->arena_len, (size_t)(out - (ns->arena + ns->arena_len))};
    ns->arena_len += nm.len;
    if (reserve((void **)&ns->v, &ns->cap, ns->n + 1, sizeof *ns->v))
        return -1;
    ns->v[ns->n++] = nm;
    *p = end + 1;
    return 0;
}

static int cmp_name(const void *a, const void *b, void *arena)
{
    const struct name *x = a, *y = b;
    const char *sort_base = arena;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(sort_base + x->off, sort_base + y->off, n);
    if (c)
        return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

/* Sorts the names of one object; returns the index of a repeated one, or
 * (size_t)-1. */
static size_t find_repeat(struct names *ns, size_t first)
{
    size_t k = ns->n - first;
    if (k < 2)
        return (size_t)-1;
    qsort_r(ns->v + first, k, sizeof *ns->v, cmp_name, ns->arena);
    for (size_t i = first + 1; i < ns->n; i++)
        if (cmp_name(&ns->v[i - 1], &ns->v[i], ns->arena) == 0)
            return i;
    return (size_t)-1;
}

static void show(const struct names *ns, const struct name *nm, char *out, size_t out_len)
{
    if (!out_len)
        return;
    size_t n = nm->len < out_len - 1 ? nm->len : out_len - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)ns->arena[nm->off + i];
        out[i] = c >= 0x20 && c < 0x7F ? (char)c : '?';
    }
    out[n] = 0;
}

int sc_json_duplicate_name(const char *s, size_t len, char *name, size_t name_len)
{
    struct names ns = {0};
    struct frame *st = NULL;
    size_t depth = 0, st_cap = 0;
    int rc = 0;
    const char *p = s, *end = s + len;
    while (p < end && rc == 0) {
        char c = *p;
        if (c == '{' || c == '[') {
            if (reserve((void **)&st, &st_cap, depth + 1, sizeof *st)) {
                rc = -1;
                break;
            }
            st[depth++] = (struct frame){ns.n, ns.arena_len, c == '{', c == '{'};
            p++;
        } else if (c == '}' || c == ']') {
            if (!depth)
                break; /* not JSON */
            struct frame *f = &st[--depth];
            if (f->object) {
                size_t i = find_repeat(&ns, f->first);
                if (i != (size_t)-1) {
                    show(&ns, &ns.v[i], name, name_len);
                    rc = 1;
                    break;
                }
            }
            ns.n = f->first;
            ns.arena_len = f->arena_mark;
            p++;
        } else if (c == '"') {
            if (depth && st[depth - 1].object && st[depth - 1].expect_key) {
                st[depth - 1].expect_key = 0;
                int d = decode_string(&p, end, &ns);
                if (d == -2)
                    break; /* unterminated: not JSON, nothing more to say */
                if (d) {
                    rc = -1;
                    break;
                }
            } else {
                for (p++; p < end && *p != '"'; p += *p == '\\' ? 2 : 1)
                    ;
                p++;
            }
        } else if (c == ',') {
            if (depth && st[depth - 1].object)
                st[depth - 1].expect_key = 1;
            p++;
        } else {
            p++; /* whitespace, ':', numbers and literals */
        }
    }
    free(ns.arena);
    free(ns.v);
    free(st);
    return rc;
}
