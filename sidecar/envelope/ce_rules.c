#include "ce_rules.h"

#include <string.h>
#include <strings.h>

int sc_ce_name_valid(const char *name, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9')))
            return 0;
    return 1;
}

int sc_ce_string_valid(const char *s, size_t n, uint32_t *cp)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        uint32_t c = sc_utf8_next(&p, end);
        if (c == UINT32_MAX || c < 0x20 || (c >= 0x7F && c <= 0x9F) ||
            (c >= 0xFDD0 && c <= 0xFDEF) || (c & 0xFFFE) == 0xFFFE) {
            *cp = c;
            return 0;
        }
    }
    return 1;
}

/* n digits at s as a number, or -1 when one is not a digit. */
static int digits(const char *s, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

static int days_in(int year, int month)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    return month == 2 && leap ? 29 : days[month - 1];
}

int sc_ce_time_valid(const char *s, size_t n)
{
    /* full-date "T" partial-time: 19 characters at least */
    if (n < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' ||
        s[16] != ':')
        return 0;
    int year = digits(s, 4), month = digits(s + 5, 2), day = digits(s + 8, 2);
    int hour = digits(s + 11, 2), minute = digits(s + 14, 2), second = digits(s + 17, 2);
    if (year < 0 || month < 1 || month > 12 || day < 1 || day > days_in(year, month) ||
        hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 60)
        return 0;
    size_t i = 19;
    if (s[i] == '.') {
        size_t from = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == from)
            return 0;
    }
    int offset = 0; /* minutes east of UTC */
    if (i < n && (s[i] == 'Z' || s[i] == 'z')) {
        i++;
    } else if (i < n && (s[i] == '+' || s[i] == '-')) {
        if (n - i < 6 || s[i + 3] != ':')
            return 0;
        int oh = digits(s + i + 1, 2), om = digits(s + i + 4, 2);
        if (oh < 0 || oh > 23 || om < 0 || om > 59)
            return 0;
        offset = (s[i] == '+' ? 1 : -1) * (oh * 60 + om);
        i += 6;
    } else {
        return 0;
    }
    if (i != n)
        return 0;
    /* A leap second is inserted at the end of a UTC day only. */
    if (second == 60 && ((hour * 60 + minute - offset) % 1440 + 1440) % 1440 != 23 * 60 + 59)
        return 0;
    return 1;
}

/* RFC 2045 5.1: any US-ASCII CHAR except SPACE, CTLs, or tspecials. */
static int token_char(char c)
{
    return c > 0x20 && c < 0x7F && !strchr("()<>@,;:\\\"/[]?=", c);
}

static size_t token(const char *s, size_t n, size_t i)
{
    size_t from = i;
    while (i < n && token_char(s[i]))
        i++;
    return i - from;
}

static size_t ows(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    return i;
}

int sc_ce_media_type_valid(const char *s, size_t n)
{
    size_t t = token(s, n, 0);
    if (t == 0 || t >= n || s[t] != '/')
        return 0;
    size_t st = token(s, n, t + 1);
    if (st == 0)
        return 0;
    size_t i = t + 1 + st;
    for (;;) {
        i = ows(s, n, i);
        if (i == n)
            return 1;
        if (s[i] != ';')
            return 0;
        i = ows(s, n, i + 1);
        size_t a = token(s, n, i);
        if (a == 0 || i + a >= n || s[i + a] != '=')
            return 0;
        i += a + 1;
        if (i < n && s[i] == '"') {
            /* quoted-string: qdtext and quoted-pairs, no CTLs but HTAB */
            for (i++; i < n && s[i] != '"'; i++) {
                unsigned char c = (unsigned char)s[i];
                if (c == '\\' && i + 1 < n)
                    i++;
                else if ((c < 0x20 && c != '\t') || c == 0x7F)
                    return 0;
            }
            if (i == n)
                return 0;
            i++;
        } else {
            size_t v = token(s, n, i);
            if (v == 0)
                return 0;
            i += v;
        }
    }
}

int sc_ce_media_type_is_json(const char *s, size_t n)
{
    const char *slash = memchr(s, '/', n);
    if (!slash)
        return 0;
    size_t end = (size_t)(slash - s) + 1;
    while (end < n && s[end] != ';' && s[end] != ' ' && s[end] != '\t')
        end++;
    const char *sub = slash + 1;
    size_t len = (size_t)(s + end - sub);
    return (len == 4 && strncasecmp(sub, "json", 4) == 0) ||
           (len > 5 && strncasecmp(sub + len - 5, "+json", 5) == 0);
}

int sc_ce_integer_text(const char *s, size_t n)
{
    size_t i = 0;
    int neg = n > 0 && s[0] == '-';
    i += (size_t)neg;
    if (i == n || (s[i] == '0' && n - i > 1))
        return 0;
    long long v = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (s[i] - '0');
        if (v > SC_CE_INT_MAX + 1LL)
            return 0;
    }
    return neg ? -v >= SC_CE_INT_MIN : v <= SC_CE_INT_MAX;
}

static int b64(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

long sc_base64_decode(const char *s, size_t n, unsigned char *out)
{
    if (n % 4)
        return -1;
    size_t pad = n >= 1 && s[n - 1] == '=' ? (n >= 2 && s[n - 2] == '=' ? 2 : 1) : 0;
    long o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        for (int j = 0; j < 4; j++) {
            size_t at = i + (size_t)j;
            v[j] = at >= n - pad ? 0 : b64(s[at]);
            if (v[j] < 0)
                return -1;
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        size_t take = i + 4 < n ? 3 : 3 - pad;
        out[o++] = (unsigned char)(w >> 16);
        if (take > 1)
            out[o++] = (unsigned char)(w >> 8);
        if (take > 2)
            out[o++] = (unsigned char)w;
    }
    return o;
}
