/* sql.so's parameter values: an envelope attribute, or the part of `data`
 * a JSON Pointer names, read from the text exactly as written.
 *
 * Nothing of `data` is converted but the values the parameters point at: a
 * parser that builds the whole tree (doubles, 64-bit integers) would refuse
 * or change numbers in fields no statement uses, where the envelope accepts
 * and keeps them. The scanner walks the text along the pointer, skipping
 * what it passes without recursion (any depth), and converts only the value
 * it lands on: numbers keep their digits, strings are unescaped. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql_config.h"

enum jkind { J_OBJECT, J_ARRAY, J_STRING, J_NUMBER, J_TRUE, J_FALSE, J_NULL };

/* One value: its kind and its text as written ([text, text + len)). */
struct jval {
    enum jkind kind;
    const char *text;
    size_t len;
};

static const char *ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

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

/* A string token starting at p ('"'): returns the position after its
 * closing quote, or NULL when it is not one. */
static const char *scan_string(const char *p, const char *end)
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

/* The value starting at p (no leading blanks): fills v and returns the
 * position after it, or NULL when the text is not JSON there. Containers
 * are skipped by counting brackets outside strings, without recursion. */
static const char *scan_value(const char *p, const char *end, struct jval *v)
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
                if (!(q = scan_string(q, end)))
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
        after = scan_string(p, end);
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

/* Unescapes string token s (quotes included, already scanned) into out,
 * which holds at least its length. Returns the byte count, or -1 for a
 * \u escape that is half of a surrogate pair alone. */
static long unescape(const char *s, size_t len, char *out)
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
    long n = unescape(k, len, buf);
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

enum found { FOUND, MISSING, NOT_JSON, TWICE };

/* Walks p's pointer through data: FOUND with v, or why not. *twice names
 * the token found twice in one object (ambiguous: refused). */
static enum found resolve(const struct sc_sql_param *p, const char *data, size_t len,
                          struct jval *v, const char **twice)
{
    const char *end = data + len, *cur = ws(data, end);
    for (size_t t = 0; t < p->n_tokens; t++) {
        const char *tok = p->tokens[t], *hit = NULL;
        if (cur >= end)
            return NOT_JSON;
        if (*cur == '{') {
            cur = ws(cur + 1, end);
            if (cur < end && *cur == '}')
                return MISSING;
            for (;;) {
                const char *k = cur, *k_end = scan_string(cur, end);
                if (!k_end)
                    return NOT_JSON;
                cur = ws(k_end, end);
                if (cur >= end || *cur != ':')
                    return NOT_JSON;
                cur = ws(cur + 1, end);
                struct jval skip;
                const char *val = cur;
                if (!(cur = scan_value(cur, end, &skip)))
                    return NOT_JSON;
                if (key_is(k, (size_t)(k_end - k), tok)) {
                    if (hit) {
                        *twice = tok;
                        return TWICE;
                    }
                    hit = val;
                }
                cur = ws(cur, end);
                if (cur < end && *cur == ',') {
                    cur = ws(cur + 1, end);
                    continue;
                }
                if (cur < end && *cur == '}')
                    break;
                return NOT_JSON;
            }
        } else if (*cur == '[') {
            size_t want, i = 0;
            if (array_index(tok, &want))
                return MISSING;
            cur = ws(cur + 1, end);
            if (cur < end && *cur == ']')
                return MISSING;
            for (;; i++) {
                if (i == want) {
                    hit = cur;
                    break;
                }
                struct jval skip;
                if (!(cur = scan_value(cur, end, &skip)))
                    return NOT_JSON;
                cur = ws(cur, end);
                if (cur < end && *cur == ',') {
                    cur = ws(cur + 1, end);
                    continue;
                }
                if (cur < end && *cur == ']')
                    return MISSING;
                return NOT_JSON;
            }
        } else {
            return MISSING; /* a scalar has no members */
        }
        if (!hit)
            return MISSING;
        cur = hit;
    }
    return scan_value(cur, end, v) ? FOUND : NOT_JSON;
}

/* ---- converting the one value ---- */

static const char *kind_name(const struct jval *v)
{
    switch (v->kind) {
    case J_OBJECT: return "an object";
    case J_ARRAY: return "an array";
    case J_STRING: return "a string";
    case J_NUMBER:
        return memchr(v->text, '.', v->len) || memchr(v->text, 'e', v->len) ||
                       memchr(v->text, 'E', v->len)
                   ? "a number with a fraction or exponent"
                   : "an integer";
    case J_TRUE:
    case J_FALSE: return "a boolean";
    case J_NULL: return "null";
    }
    return "?";
}

static int set_text(struct sc_sql_value *out, enum sc_sql_vkind kind, const char *s, size_t len)
{
    out->kind = kind;
    out->s = s;
    out->len = len;
    return 0;
}

static int set_owned(struct sc_sql_value *out, enum sc_sql_vkind kind, char *s, size_t len)
{
    out->owned = s;
    return set_text(out, kind, s, len);
}

static int is_integer_text(const struct jval *v)
{
    return v->kind == J_NUMBER && !memchr(v->text, '.', v->len) &&
           !memchr(v->text, 'e', v->len) && !memchr(v->text, 'E', v->len);
}

/* Integer text -?[0-9]+ (s[0..len), no NUL) within int64: 0, or -1. */
static int int64_of(const char *s, size_t len, long long *out)
{
    char buf[24];
    size_t i = len && s[0] == '-';
    if (len == i || len >= sizeof buf)
        return -1;
    for (size_t j = i; j < len; j++)
        if (s[j] < '0' || s[j] > '9')
            return -1;
    memcpy(buf, s, len);
    buf[len] = 0;
    errno = 0;
    char *end;
    long long v = strtoll(buf, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

/* Decimal text: -?digits[.digits], at most 65 digits (DECIMAL's limit). */
static int is_decimal_text(const char *s, size_t len)
{
    size_t i = 0, digits = 0, frac_digits = 0;
    if (i < len && s[i] == '-')
        i++;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++)
        digits++;
    if (i < len && s[i] == '.') {
        for (i++; i < len && s[i] >= '0' && s[i] <= '9'; i++)
            frac_digits++;
        if (!frac_digits)
            return 0;
    }
    return i == len && digits > 0 && digits + frac_digits <= 65;
}

#define DECIMAL_DIGITS 65

/* A JSON number (scanned) as DECIMAL text, digit for digit: an exponent
 * moves the point, nothing is rounded. Returns 0 with out set, or -1 when
 * it needs more than 65 digits. */
static int decimal_of_number(const struct jval *v, struct sc_sql_value *out)
{
    const char *p = v->text, *end = v->text + v->len;
    int neg = *p == '-';
    p += neg;
    const char *ip = p;
    while (p < end && *p >= '0' && *p <= '9')
        p++;
    size_t il = (size_t)(p - ip);
    const char *fp = NULL;
    size_t fl = 0;
    if (p < end && *p == '.') {
        fp = ++p;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
        fl = (size_t)(p - fp);
    }
    if (p == end) { /* no exponent: as written */
        if (il + fl > DECIMAL_DIGITS)
            return -1;
        return set_text(out, SC_SQL_V_DECIMAL, v->text, v->len);
    }
    p++; /* e or E */
    int eneg = *p == '-';
    p += *p == '-' || *p == '+';
    long long e = 0;
    for (; p < end; p++)
        if ((e = e * 10 + (*p - '0')) > 100000)
            return -1;
    if (eneg)
        e = -e;
    /* the digits without the point, and where the point goes in them */
    size_t nd = il + fl;
    long long point = (long long)il + e;
    /* leading zeros of the digits do not count, nor place the point */
    size_t lead = 0;
    while (lead < nd && (lead < il ? ip[lead] : fp[lead - il]) == '0')
        lead++;
    if (lead == nd) /* zero, whatever the exponent */
        return set_text(out, SC_SQL_V_DECIMAL, neg ? "-0" : "0", neg ? 2 : 1);
    /* output: the digits from the first non-zero up to the point (or "0"),
     * then those after the point, zeros filling where the exponent moved
     * the point past the written digits */
    long long int_digits = point - (long long)lead;
    long long frac_digits = (long long)nd - point;
    long long total = (int_digits > 0 ? int_digits : 0) + (frac_digits > 0 ? frac_digits : 0);
    if (total > DECIMAL_DIGITS)
        return -1;
    char *o = malloc((size_t)total + 4), *q = o;
    if (!o)
        return -1;
    if (neg)
        *q++ = '-';
#define DIGIT(i) ((size_t)(i) < il ? ip[i] : fp[(size_t)(i) - il])
    if (int_digits <= 0) {
        *q++ = '0';
    } else {
        for (long long i = (long long)lead; i < point; i++)
            *q++ = i < (long long)nd ? DIGIT(i) : '0';
    }
    if (frac_digits > 0) {
        *q++ = '.';
        for (long long i = point; i < (long long)nd; i++)
            *q++ = i < 0 ? '0' : DIGIT(i);
    }
#undef DIGIT
    *q = 0;
    return set_owned(out, SC_SQL_V_DECIMAL, o, (size_t)(q - o));
}

/* The text of a container, without the blanks between tokens (strings
 * and numbers as written). */
static int compact(const struct jval *v, struct sc_sql_value *out)
{
    const char *p = v->text, *end = v->text + v->len;
    int blanks = 0;
    for (const char *q = p; q < end && !blanks; q++) {
        if (*q == '"') {
            const char *s_end = scan_string(q, end);
            if (!s_end)
                return -1;
            q = s_end - 1;
        } else if (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r') {
            blanks = 1;
        }
    }
    if (!blanks)
        return set_text(out, SC_SQL_V_TEXT, v->text, v->len);
    char *o = malloc(v->len + 1), *q = o;
    if (!o)
        return -1;
    while (p < end) {
        if (*p == '"') {
            const char *s_end = scan_string(p, end); /* checked above */
            memcpy(q, p, (size_t)(s_end - p));
            q += s_end - p;
            p = s_end;
        } else if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
            p++;
        } else {
            *q++ = *p++;
        }
    }
    *q = 0;
    return set_owned(out, SC_SQL_V_TEXT, o, (size_t)(q - o));
}

/* A string token's bytes: the text itself when it has no escape, else a
 * new unescaped copy. 0, or -1 with why. */
static int string_bytes(const struct jval *v, struct sc_sql_value *out, const char **why)
{
    if (!memchr(v->text, '\\', v->len))
        return set_text(out, SC_SQL_V_TEXT, v->text + 1, v->len - 2);
    char *o = malloc(v->len);
    if (!o) {
        *why = "cannot be converted: out of memory";
        return -1;
    }
    long n = unescape(v->text, v->len, o);
    if (n < 0) {
        free(o);
        *why = "holds a \\u escape of half a surrogate pair";
        return -1;
    }
    o[n] = 0;
    return set_owned(out, SC_SQL_V_TEXT, o, (size_t)n);
}

/* Converts v to p's type. Returns 0, or -1 with what in why. */
static int convert(const struct sc_sql_param *p, const struct jval *v, struct sc_sql_value *out,
                   const char **why)
{
    if (v->kind == J_NULL && p->type != SC_SQL_T_JSON) {
        out->kind = SC_SQL_V_NULL;
        return 0;
    }
    switch (p->type) {
    case SC_SQL_T_AUTO:
        switch (v->kind) {
        case J_STRING:
            return string_bytes(v, out, why);
        case J_NUMBER:
            if (is_integer_text(v)) {
                if (int64_of(v->text, v->len, &out->i) == 0) {
                    out->kind = SC_SQL_V_INT;
                    return 0;
                }
                /* beyond 64 bits: every digit, as DECIMAL */
                if (decimal_of_number(v, out) == 0)
                    return 0;
                *why = "is an integer of more than 65 digits";
                return -1;
            } else {
                /* a fraction or an exponent: DOUBLE, read from the text */
                char small[64], *buf = v->len < sizeof small ? small : malloc(v->len + 1);
                if (!buf) {
                    *why = "cannot be converted: out of memory";
                    return -1;
                }
                memcpy(buf, v->text, v->len);
                buf[v->len] = 0;
                out->d = strtod(buf, NULL);
                if (buf != small)
                    free(buf);
                if (!isfinite(out->d)) {
                    *why = "is out of DOUBLE's range";
                    return -1;
                }
                out->kind = SC_SQL_V_DOUBLE;
                return 0;
            }
        case J_TRUE:
        case J_FALSE:
            out->kind = SC_SQL_V_BOOL;
            out->i = v->kind == J_TRUE;
            return 0;
        default:
            break;
        }
        goto as_json;
    case SC_SQL_T_INT:
        if (is_integer_text(v)) {
            if (int64_of(v->text, v->len, &out->i) == 0) {
                out->kind = SC_SQL_V_INT;
                return 0;
            }
            *why = "is an integer beyond 64 bits";
            return -1;
        }
        if (v->kind == J_STRING) {
            struct sc_sql_value s = {0};
            if (string_bytes(v, &s, why) == 0 && memchr(s.s, 0, s.len) == NULL &&
                int64_of(s.s, s.len, &out->i) == 0) {
                sc_sql_value_free(&s);
                out->kind = SC_SQL_V_INT;
                return 0;
            }
            sc_sql_value_free(&s);
        }
        *why = "is not an integer";
        return -1;
    case SC_SQL_T_DECIMAL:
        if (v->kind == J_NUMBER) {
            if (decimal_of_number(v, out) == 0)
                return 0;
            *why = "is out of DECIMAL's range (65 digits)";
            return -1;
        }
        if (v->kind == J_STRING && !memchr(v->text, '\\', v->len) &&
            is_decimal_text(v->text + 1, v->len - 2))
            return set_text(out, SC_SQL_V_DECIMAL, v->text + 1, v->len - 2);
        *why = "is not a decimal number";
        return -1;
    case SC_SQL_T_BOOL:
        if (v->kind != J_TRUE && v->kind != J_FALSE) {
            *why = "is not a boolean";
            return -1;
        }
        out->kind = SC_SQL_V_BOOL;
        out->i = v->kind == J_TRUE;
        return 0;
    case SC_SQL_T_STRING:
        if (v->kind == J_STRING)
            return string_bytes(v, out, why);
        if (v->kind == J_NUMBER) /* its text, as written */
            return set_text(out, SC_SQL_V_TEXT, v->text, v->len);
        *why = "is not a string or a number";
        return -1;
    case SC_SQL_T_DATETIME: {
        struct sc_sql_value s = {0};
        int rc = -1;
        if (v->kind == J_STRING && string_bytes(v, &s, why) == 0 && memchr(s.s, 0, s.len) == NULL) {
            char buf[64];
            if (s.len < sizeof buf) {
                memcpy(buf, s.s, s.len);
                buf[s.len] = 0;
                rc = sc_sql_parse_datetime(buf, s.len, &out->dt);
            }
        }
        sc_sql_value_free(&s);
        if (rc) {
            *why = "is not an RFC 3339 date-time";
            return -1;
        }
        out->kind = SC_SQL_V_DATETIME;
        return 0;
    }
    case SC_SQL_T_JSON:
    as_json:
        if (v->kind == J_OBJECT || v->kind == J_ARRAY) {
            if (compact(v, out) == 0)
                return 0;
            *why = "cannot be converted: out of memory";
            return -1;
        }
        return set_text(out, SC_SQL_V_TEXT, v->text, v->len);
    }
    *why = "has an unknown type";
    return -1;
}

/* An attribute's value as a JSON string token, escaped. */
static char *json_string_token(const char *s)
{
    size_t n = strlen(s);
    char *o = malloc(n * 6 + 3), *q = o;
    if (!o)
        return NULL;
    *q++ = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            *q++ = '\\';
            *q++ = (char)*p;
        } else if (*p < 0x20) {
            q += sprintf(q, "\\u%04x", *p);
        } else {
            *q++ = (char)*p;
        }
    }
    *q++ = '"';
    *q = 0;
    return o;
}

int sc_sql_param_value(const struct sc_sql_param *p, const struct sc_event *ev,
                       struct sc_sql_value *out, char *reason, size_t reason_len)
{
    memset(out, 0, sizeof *out);
    const char *attr = NULL;
    char num[32], *token = NULL;
    struct jval v = {0};
    int have = 0;
    switch (p->src) {
    case SC_SQL_SRC_ID: attr = ev->id; break;
    case SC_SQL_SRC_TYPE: attr = ev->type; break;
    case SC_SQL_SRC_SOURCE: attr = ev->source; break;
    case SC_SQL_SRC_SUBJECT: attr = ev->subject; break;
    case SC_SQL_SRC_TIME: attr = ev->time; break;
    case SC_SQL_SRC_EVENTVERSION:
        if (ev->has_eventversion) {
            snprintf(num, sizeof num, "%lld", (long long)ev->eventversion);
            v = (struct jval){J_NUMBER, num, strlen(num)};
            have = 1;
        }
        break;
    case SC_SQL_SRC_TRACEPARENT:
    case SC_SQL_SRC_TRACE_ID: {
        /* An event without trace context (or from a sidecar without these
         * fields) binds NULL: tracing never refuses an event. */
        const char *t = NULL;
        if (SC_EVENT_HAS(ev, trace_id))
            t = p->src == SC_SQL_SRC_TRACEPARENT ? ev->traceparent : ev->trace_id;
        if (t)
            attr = t;
        else
            v = (struct jval){J_NULL, "null", 4};
        have = 1;
        break;
    }
    case SC_SQL_SRC_DATA:
        if (ev->data_json) {
            const char *twice = NULL;
            switch (resolve(p, ev->data_json, ev->data_json_len, &v, &twice)) {
            case FOUND:
                have = 1;
                break;
            case MISSING:
                break;
            case NOT_JSON:
                snprintf(reason, reason_len, "parameter '%s': data is not JSON where the pointer "
                         "leads", p->spec);
                return -1;
            case TWICE:
                snprintf(reason, reason_len, "parameter '%s': the member '%.64s' appears twice "
                         "in one object of data (ambiguous)", p->spec, twice);
                return -1;
            }
        }
        break;
    }
    if (attr) {
        if (!(token = json_string_token(attr))) {
            snprintf(reason, reason_len, "parameter '%s': out of memory", p->spec);
            return -1;
        }
        v = (struct jval){J_STRING, token, strlen(token)};
        have = 1;
    }
    if (!have) {
        snprintf(reason, reason_len, "parameter '%s': missing in the event", p->spec);
        return -1;
    }
    const char *why = NULL;
    int rc = convert(p, &v, out, &why);
    if (rc) {
        snprintf(reason, reason_len, "parameter '%s': the value (%s) %s", p->spec, kind_name(&v),
                 why);
        sc_sql_value_free(out);
    } else if (out->s && !out->owned && (token || v.text == num)) {
        /* points into a buffer that goes now: keep a copy */
        char *copy = malloc(out->len + 1);
        if (!copy) {
            snprintf(reason, reason_len, "parameter '%s': out of memory", p->spec);
            sc_sql_value_free(out);
            rc = -1;
        } else {
            memcpy(copy, out->s, out->len);
            copy[out->len] = 0;
            out->owned = copy;
            out->s = copy;
        }
    }
    free(token);
    return rc;
}

void sc_sql_value_free(struct sc_sql_value *v)
{
    free(v->owned);
    memset(v, 0, sizeof *v);
}
