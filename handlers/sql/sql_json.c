/* sql.so's JSON scanner (sql_json.h). Strings, numbers and literals are
 * checked against RFC 8259's grammar as they are scanned; a container is
 * only matched for its brackets and strings, so one passed over on the way
 * to a value costs no more than reading it. */
#include "sql_json.h"

#include <string.h>

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

const char *sc_sql_json_scan_string(const char *p, const char *end)
{
    if (p >= end || *p != '"')
        return NULL;
    for (p++; p < end; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"')
            return p + 1;
        if (c < 0x20)
            return NULL;
        if (c == '\\') {
            if (++p >= end)
                return NULL;
            if (*p == 'u') {
                for (int i = 0; i < 4; i++)
                    if (++p >= end || hexval(*p) < 0)
                        return NULL;
            } else if (!strchr("\"\\/bfnrt", *p) || !*p) {
                return NULL;
            }
        }
    }
    return NULL;
}

/* A number token (RFC 8259 grammar): the position after it, or NULL. */
static const char *scan_number(const char *p, const char *end)
{
    if (p < end && *p == '-')
        p++;
    if (p < end && *p == '0') {
        p++;
    } else {
        const char *d = p;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
        if (p == d)
            return NULL;
    }
    if (p < end && *p == '.') {
        const char *d = ++p;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
        if (p == d)
            return NULL;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        const char *d = p;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
        if (p == d)
            return NULL;
    }
    return p;
}

static const char *scan_literal(const char *p, const char *end, const char *word)
{
    size_t n = strlen(word);
    return (size_t)(end - p) >= n && memcmp(p, word, n) == 0 ? p + n : NULL;
}

const char *sc_sql_json_scan_value(const char *p, const char *end, struct jval *v)
{
    const char *after = NULL;
    if (p >= end)
        return NULL;
    v->text = p;
    switch (*p) {
    case '{':
    case '[': {
        v->kind = *p == '{' ? J_OBJECT : J_ARRAY;
        size_t depth = 0;
        const char *q = p;
        while (q < end) {
            char c = *q;
            if (c == '"') {
                if (!(q = sc_sql_json_scan_string(q, end)))
                    return NULL;
                continue;
            }
            if (c == '{' || c == '[') {
                depth++;
            } else if (c == '}' || c == ']') {
                if (--depth == 0) {
                    after = q + 1;
                    break;
                }
            }
            q++;
        }
        break;
    }
    case '"':
        v->kind = J_STRING;
        after = sc_sql_json_scan_string(p, end);
        break;
    case 't':
        v->kind = J_TRUE;
        after = scan_literal(p, end, "true");
        break;
    case 'f':
        v->kind = J_FALSE;
        after = scan_literal(p, end, "false");
        break;
    case 'n':
        v->kind = J_NULL;
        after = scan_literal(p, end, "null");
        break;
    default:
        v->kind = J_NUMBER;
        after = scan_number(p, end);
        break;
    }
    if (after)
        v->len = (size_t)(after - p);
    return after;
}

static size_t put_utf8(unsigned cp, char *o)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static unsigned hex4(const char *p)
{
    return (unsigned)(hexval(p[0]) << 12 | hexval(p[1]) << 8 | hexval(p[2]) << 4 | hexval(p[3]));
}

long sc_sql_json_unescape(const char *s, size_t len, char *out)
{
    const char *p = s + 1, *end = s + len - 1;
    size_t n = 0;
    while (p < end) {
        if (*p != '\\') {
            out[n++] = *p++;
            continue;
        }
        char e = p[1];
        p += 2;
        switch (e) {
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        case 'u': {
            unsigned cp = hex4(p);
            p += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                return -1;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u')
                    return -1;
                unsigned lo = hex4(p + 2);
                if (lo < 0xDC00 || lo > 0xDFFF)
                    return -1;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                p += 6;
            }
            n += put_utf8(cp, out + n);
            break;
        }
        default: out[n++] = e; break; /* " \ / */
        }
    }
    return (long)n;
}
