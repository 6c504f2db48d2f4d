#include "envelope/trace_context.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>

static int lower_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* 1 when s[0..n) is lowercase hex and not all zeros. */
static int hex_id(const char *s, size_t n)
{
    int nonzero = 0;
    for (size_t i = 0; i < n; i++) {
        if (!lower_hex(s[i]))
            return 0;
        nonzero |= s[i] != '0';
    }
    return nonzero;
}

int sc_traceparent_check(const char *s, size_t n, char *why, size_t why_len)
{
    if (n != SC_TRACEPARENT_LEN) {
        snprintf(why, why_len, "traceparent must be %d characters (00-<32 hex>-<16 hex>-<2 hex>), "
                 "not %zu", SC_TRACEPARENT_LEN, n);
        return 0;
    }
    if (memcmp(s, "00-", 3) != 0) {
        snprintf(why, why_len, "traceparent version must be 00");
        return 0;
    }
    if (s[35] != '-' || s[52] != '-') {
        snprintf(why, why_len, "traceparent must be 00-<32 hex>-<16 hex>-<2 hex>");
        return 0;
    }
    for (size_t i = 3; i < 35; i++)
        if (!lower_hex(s[i])) {
            snprintf(why, why_len, "traceparent trace-id must be 32 lowercase hex digits");
            return 0;
        }
    if (!hex_id(s + 3, 32)) {
        snprintf(why, why_len, "traceparent trace-id must not be all zeros");
        return 0;
    }
    for (size_t i = 36; i < 52; i++)
        if (!lower_hex(s[i])) {
            snprintf(why, why_len, "traceparent parent-id must be 16 lowercase hex digits");
            return 0;
        }
    if (!hex_id(s + 36, 16)) {
        snprintf(why, why_len, "traceparent parent-id must not be all zeros");
        return 0;
    }
    if (!lower_hex(s[53]) || !lower_hex(s[54])) {
        snprintf(why, why_len, "traceparent trace-flags must be 2 lowercase hex digits");
        return 0;
    }
    return 1;
}

static int key_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '*' ||
           c == '/';
}

/* simple-key = lcalpha 0*255(keychar); multi-tenant-key = tenant-id "@"
 * system-id, tenant-id = (lcalpha / DIGIT) 0*240(keychar), system-id =
 * lcalpha 0*13(keychar). */
static int key_valid(const char *k, size_t n)
{
    const char *at = memchr(k, '@', n);
    if (!at) {
        if (n < 1 || n > 256 || !(k[0] >= 'a' && k[0] <= 'z'))
            return 0;
        for (size_t i = 1; i < n; i++)
            if (!key_char(k[i]))
                return 0;
        return 1;
    }
    size_t tn = (size_t)(at - k), sn = n - tn - 1;
    if (tn < 1 || tn > 241 || sn < 1 || sn > 14)
        return 0;
    if (!((k[0] >= 'a' && k[0] <= 'z') || (k[0] >= '0' && k[0] <= '9')) ||
        !(at[1] >= 'a' && at[1] <= 'z'))
        return 0;
    for (size_t i = 1; i < tn; i++)
        if (!key_char(k[i]))
            return 0;
    for (size_t i = 2; i <= sn; i++)
        if (!key_char(at[i]))
            return 0;
    return 1;
}

/* value = 0*255(chr) nblk-chr; chr = %x20 / nblk-chr; nblk-chr = %x21-2B /
 * %x2D-3C / %x3E-7E (no comma, no equals sign). */
static int value_valid(const char *v, size_t n)
{
    if (n < 1 || n > 256 || v[n - 1] == ' ')
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c < 0x20 || c > 0x7e || c == ',' || c == '=')
            return 0;
    }
    return 1;
}

int sc_tracestate_check(const char *s, size_t n, char *why, size_t why_len)
{
    if (n > SC_TRACESTATE_MAX) {
        snprintf(why, why_len, "tracestate is longer than %d characters", SC_TRACESTATE_MAX);
        return 0;
    }
    if (memchr(s, 0, n)) {
        snprintf(why, why_len, "tracestate contains a NUL character");
        return 0;
    }
    const char *keys[SC_TRACESTATE_MEMBERS_MAX];
    size_t key_lens[SC_TRACESTATE_MEMBERS_MAX];
    int members = 0;
    size_t i = 0;
    for (;;) {
        size_t a = i, b;
        while (a < n && s[a] != ',')
            a++;
        /* member s[i..a), trimmed of blanks (OWS) */
        b = a;
        while (i < b && (s[i] == ' ' || s[i] == '\t'))
            i++;
        while (b > i && (s[b - 1] == ' ' || s[b - 1] == '\t'))
            b--;
        if (b > i) {
            const char *eq = memchr(s + i, '=', b - i);
            if (!eq || !key_valid(s + i, (size_t)(eq - (s + i))) ||
                !value_valid(eq + 1, (size_t)(s + b - eq - 1))) {
                snprintf(why, why_len, "tracestate member %d '%.*s' is not key=value as the W3C "
                         "grammar says", members + 1, (int)(b - i > 64 ? 64 : b - i), s + i);
                return 0;
            }
            if (members == SC_TRACESTATE_MEMBERS_MAX) {
                snprintf(why, why_len, "tracestate has more than %d members",
                         SC_TRACESTATE_MEMBERS_MAX);
                return 0;
            }
            size_t kn = (size_t)(eq - (s + i));
            for (int k = 0; k < members; k++)
                if (key_lens[k] == kn && memcmp(keys[k], s + i, kn) == 0) {
                    snprintf(why, why_len, "tracestate key '%.*s' appears twice", (int)kn, s + i);
                    return 0;
                }
            keys[members] = s + i;
            key_lens[members++] = kn;
        }
        if (a >= n)
            break;
        i = a + 1;
    }
    return 1;
}

void sc_trace_id_of(const char *traceparent, char out[33])
{
    memcpy(out, traceparent + 3, 32);
    out[32] = 0;
}

void sc_trace_parent_id_of(const char *traceparent, char out[17])
{
    memcpy(out, traceparent + 36, 16);
    out[16] = 0;
}

int sc_span_id_new(char out[17])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char b[8];
    do {
        if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b)
            return -1;
    } while (!(b[0] | b[1] | b[2] | b[3] | b[4] | b[5] | b[6] | b[7]));
    for (int i = 0; i < 8; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[16] = 0;
    return 0;
}
