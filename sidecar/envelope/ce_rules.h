/* The CloudEvents 1.0.2 rules an attribute value is held to, each one the
 * spec's own (the table in docs/contract.md names the section): attribute
 * names, the type system's String and Integer, Timestamp (RFC 3339), media
 * types (RFC 2046) and Binary (Base64, RFC 4648); and the one UTF-8 decoder
 * (the JSON scanner's too). No dependencies beyond the C library. */
#ifndef SC_CE_RULES_H
#define SC_CE_RULES_H

#include <stddef.h>
#include <stdint.h>

/* The code point of the UTF-8 sequence at *p (then advanced past it), or
 * UINT32_MAX when none starts there: no overlongs, no surrogates, at most
 * U+10FFFF. Inline: the JSON scanner calls it for every byte it reads. */
static inline uint32_t sc_utf8_next(const unsigned char **p, const unsigned char *end)
{
    const unsigned char *u = *p;
    uint32_t c = u[0], min;
    size_t n;
    if (c < 0x80)
        n = 1, min = 0;
    else if ((c & 0xE0) == 0xC0)
        n = 2, min = 0x80, c &= 0x1F;
    else if ((c & 0xF0) == 0xE0)
        n = 3, min = 0x800, c &= 0x0F;
    else if ((c & 0xF8) == 0xF0)
        n = 4, min = 0x10000, c &= 0x07;
    else
        return UINT32_MAX;
    if ((size_t)(end - u) < n)
        return UINT32_MAX;
    for (size_t i = 1; i < n; i++) {
        if ((u[i] & 0xC0) != 0x80)
            return UINT32_MAX;
        c = (c << 6) | (u[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return UINT32_MAX;
    *p = u + n;
    return c;
}

/* The range of a CloudEvents Integer: a signed 32-bit value. */
#define SC_CE_INT_MIN (-2147483647LL - 1)
#define SC_CE_INT_MAX 2147483647LL

/* 1 when name[0..n) is a valid attribute name: one or more of 'a'-'z' and
 * '0'-'9' ("Attribute Naming Convention"). */
int sc_ce_name_valid(const char *name, size_t n);

/* For UTF-8 text s[0..n): 1 when it holds only characters a String may
 * hold; 0 with the offending code point in *cp when it holds a control
 * character (U+0000-U+001F, U+007F-U+009F) or a noncharacter (U+FDD0-U+FDEF,
 * U+xFFFE, U+xFFFF). Text that is not valid UTF-8: 0, *cp UINT32_MAX. */
int sc_ce_string_valid(const char *s, size_t n, uint32_t *cp);

/* 1 when s[0..n) is an RFC 3339 date-time ("T"/"Z" in either case), with a
 * day that exists in its month and year, hours 00-23, minutes 00-59, seconds
 * 00-59 (60 only at 23:59 UTC, a leap second), an offset up to 23:59. */
int sc_ce_time_valid(const char *s, size_t n);

/* 1 when s[0..n) is a media type (RFC 2045 5.1, RFC 2046; parameters as RFC
 * 7231 3.1.1.1 writes them): type "/" subtype *(OWS ";" OWS attribute "="
 * (token / quoted-string)). */
int sc_ce_media_type_valid(const char *s, size_t n);

/* 1 when the media type s[0..n) declares JSON data: stripped of parameters
 * it has the form * / json or * / *+json (JSON format 3.1.1), any case. */
int sc_ce_media_type_is_json(const char *s, size_t n);

/* 1 when s[0..n) is the JSON text of a number that is a CloudEvents
 * Integer: only the integer component, optionally after a minus sign, and
 * within SC_CE_INT_MIN..SC_CE_INT_MAX. */
int sc_ce_integer_text(const char *s, size_t n);

/* Decodes the Base64 text s[0..n) (RFC 4648 section 4: the standard
 * alphabet, padded to a multiple of 4 with '=') into out, which has room
 * for n / 4 * 3 bytes. Returns the decoded length, or -1 when the text is
 * not Base64 (a character outside the alphabet, a length that is not a
 * multiple of 4, '=' other than at the end). */
long sc_base64_decode(const char *s, size_t n, unsigned char *out);

#endif
