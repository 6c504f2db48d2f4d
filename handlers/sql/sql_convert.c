/* A parameter's value converted to its type (sql_convert.h) from the
 * value's text as written, so numbers keep their digits: an integer beyond
 * 64 bits is bound as DECIMAL, every digit; a DECIMAL's exponent moves its
 * point, nothing is rounded. */
#include "sql_convert.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *sc_sql_jval_kind_name(const struct jval *v)
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
            const char *s_end = sc_sql_json_scan_string(q, end);
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
            const char *s_end = sc_sql_json_scan_string(p, end); /* checked above */
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
    long n = sc_sql_json_unescape(v->text, v->len, o);
    if (n < 0) {
        free(o);
        *why = "holds a \\u escape of half a surrogate pair";
        return -1;
    }
    o[n] = 0;
    return set_owned(out, SC_SQL_V_TEXT, o, (size_t)n);
}

int sc_sql_convert(const struct sc_sql_param *p, const struct jval *v, struct sc_sql_value *out,
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
