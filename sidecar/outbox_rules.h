/* What an outbox_event row must hold to become a valid CloudEvent, shared by
 * the producer helper (which refuses such rows) and the relay (which marks
 * rows it finds invalid FAILED instead of publishing them). The rules are in
 * docs/contract-notes.md. Header-only: the helper library and the daemon are
 * built separately and both include it. */
#ifndef SC_OUTBOX_RULES_H
#define SC_OUTBOX_RULES_H

#include <stdio.h>
#include <string.h>

/* 1 when s is a UUID in the 8-4-4-4-12 hex form (any case). */
static inline int sc_rules_uuid(const char *s)
{
    if (!s || strlen(s) != 36)
        return 0;
    for (int i = 0; i < 36; i++) {
        char c = s[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-')
                return 0;
        } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
            return 0;
        }
    }
    return 1;
}

static inline int sc_rules_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static inline int sc_rules_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* 1 when s is a non-empty URI-reference (RFC 3986) made of printable ASCII:
 * unreserved, sub-delims, ":@/?#" and %HH escapes; a colon before the first
 * "/?#" must end a valid scheme (else the first segment reads as one). */
static inline int sc_rules_uri_reference(const char *s)
{
    if (!s || !*s)
        return 0;
    int hashes = 0;
    for (const char *p = s; *p; p++) {
        char c = *p;
        if (sc_rules_alpha(c) || (c >= '0' && c <= '9') || strchr("-._~!$&'()*+,;=:@/?", c))
            continue;
        if (c == '#' && ++hashes == 1)
            continue;
        if (c == '%' && sc_rules_hex(p[1]) && sc_rules_hex(p[2])) {
            p += 2;
            continue;
        }
        return 0;
    }
    size_t first = strcspn(s, "/?#");
    const char *colon = memchr(s, ':', first);
    if (colon) {
        if (colon == s || !sc_rules_alpha(s[0]))
            return 0;
        for (const char *p = s; p < colon; p++)
            if (!sc_rules_alpha(*p) && !(*p >= '0' && *p <= '9') && !strchr("+-.", *p))
                return 0;
    }
    return 1;
}

/* ---- strict JSON text (RFC 8259), without converting any value ---------- */

static inline const char *sc_rules_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

static inline const char *sc_rules_json_value(const char *p, const char *end, int depth);

static inline const char *sc_rules_json_string(const char *p, const char *end)
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
                for (int i = 1; i <= 4; i++)
                    if (p + i >= end || !sc_rules_hex(p[i]))
                        return NULL;
                p += 4;
            } else if (!strchr("\"\\/bfnrt", *p)) {
                return NULL;
            }
        }
    }
    return NULL;
}

static inline const char *sc_rules_json_number(const char *p, const char *end)
{
    if (p < end && *p == '-')
        p++;
    if (p >= end)
        return NULL;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    } else {
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

static inline const char *sc_rules_json_value(const char *p, const char *end, int depth)
{
    if (depth > 512)
        return NULL;
    p = sc_rules_ws(p, end);
    if (p >= end)
        return NULL;
    switch (*p) {
    case '{':
    case '[': {
        char close = *p == '{' ? '}' : ']';
        int object = *p == '{';
        p = sc_rules_ws(p + 1, end);
        if (p < end && *p == close)
            return p + 1;
        for (;;) {
            if (object) {
                p = sc_rules_json_string(sc_rules_ws(p, end), end);
                if (!p)
                    return NULL;
                p = sc_rules_ws(p, end);
                if (p >= end || *p != ':')
                    return NULL;
                p++;
            }
            p = sc_rules_json_value(p, end, depth + 1);
            if (!p)
                return NULL;
            p = sc_rules_ws(p, end);
            if (p < end && *p == ',') {
                p++;
                continue;
            }
            if (p < end && *p == close)
                return p + 1;
            return NULL;
        }
    }
    case '"':
        return sc_rules_json_string(p, end);
    case 't':
        return (size_t)(end - p) >= 4 && memcmp(p, "true", 4) == 0 ? p + 4 : NULL;
    case 'f':
        return (size_t)(end - p) >= 5 && memcmp(p, "false", 5) == 0 ? p + 5 : NULL;
    case 'n':
        return (size_t)(end - p) >= 4 && memcmp(p, "null", 4) == 0 ? p + 4 : NULL;
    default:
        return sc_rules_json_number(p, end);
    }
}

/* 1 when s[0..len) is exactly one JSON value (surrounding whitespace allowed). */
static inline int sc_rules_json_text(const char *s, size_t len)
{
    const char *end = s + len;
    const char *p = s ? sc_rules_json_value(s, end, 0) : NULL;
    return p && sc_rules_ws(p, end) == end;
}

/* Checks the fields of one outbox event. Returns 1 when valid, else 0 with
 * the reason (naming the field) in why. */
static inline int sc_rules_event(const char *event_id, const char *aggregate_type,
                                 const char *aggregate_id, const char *event_type,
                                 const char *payload, char *why, size_t why_len)
{
    if (!sc_rules_uuid(event_id))
        snprintf(why, why_len, "event_id is not a UUID");
    else if (!sc_rules_uri_reference(aggregate_type))
        snprintf(why, why_len, "aggregate_type is not a URI-reference (CloudEvents source): "
                               "use letters, digits and -._~!$&'()*+,;=:@/?# only, no spaces");
    else if (!aggregate_id || !*aggregate_id)
        snprintf(why, why_len, "aggregate_id is empty (CloudEvents subject must not be)");
    else if (!event_type || !*event_type)
        snprintf(why, why_len, "event_type is empty (CloudEvents type must not be)");
    else if (!payload || !sc_rules_json_text(payload, strlen(payload)))
        snprintf(why, why_len, "payload is not one JSON value");
    else
        return 1;
    return 0;
}

#endif
