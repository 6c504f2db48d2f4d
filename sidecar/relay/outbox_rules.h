/* What an outbox_event row must hold to become a valid CloudEvent, shared by
 * the producer helper (which refuses such rows) and the relay (which marks
 * rows it finds invalid FAILED instead of publishing them). The rules are in
 * docs/contract-notes.md. Header-only: the helper library and the daemon are
 * built separately and both include it (and both compile in uuid_text.c,
 * json_span.c, json_names.c and ce_rules.c: the one UUID parser, the one
 * JSON validator, the one member-name check and the consumer's own String
 * rule). */
#ifndef SC_OUTBOX_RULES_H
#define SC_OUTBOX_RULES_H

#include <stdio.h>
#include <string.h>

#include "envelope/ce_rules.h"
#include "envelope/json_names.h"
#include "envelope/json_span.h"
#include "envelope/uuid_text.h"

/* event_type is the routing key of basic.publish, an AMQP short string:
 * rabbitmq-c refuses a longer one ("invalid AMQP data"), and the column
 * (VARCHAR(128) utf8mb4) holds up to 512 bytes. */
#define SC_RULES_ROUTING_KEY_MAX 255

/* 1 when s is a UUID in the 8-4-4-4-12 hex form (any case). */
static inline int sc_rules_uuid(const char *s)
{
    char canon[37];
    return s && strlen(s) == 36 && sc_uuid_canonical(s, 36, canon) == 0;
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

/* 1 unless s (UTF-8) holds a character a CloudEvents String may not: a
 * control character or a noncharacter, which every consumer refuses. */
static inline int sc_rules_string(const char *s)
{
    uint32_t cp;
    return !s || sc_ce_string_valid(s, strlen(s), &cp) || cp == UINT32_MAX;
}

/* Checks the fields of one outbox event. Returns 1 when valid, 0 with the
 * reason (naming the field) in why, or -1 when memory ran out (nothing is
 * known about the row: try again later). */
static inline int sc_rules_event_check(const char *event_id, const char *aggregate_type,
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
    else if (!sc_rules_string(aggregate_id))
        snprintf(why, why_len, "aggregate_id holds a control character or a noncharacter "
                               "(CloudEvents subject is a String, which may not)");
    else if (!event_type || !*event_type)
        snprintf(why, why_len, "event_type is empty (CloudEvents type must not be)");
    else if (!sc_rules_string(event_type))
        snprintf(why, why_len, "event_type holds a control character or a noncharacter "
                               "(CloudEvents type is a String, which may not)");
    else if (strlen(event_type) > SC_RULES_ROUTING_KEY_MAX)
        snprintf(why, why_len, "event_type is %zu bytes long: it is the routing key, at most %d bytes "
                 "(an AMQP short string)", strlen(event_type), SC_RULES_ROUTING_KEY_MAX);
    else if (!payload || !sc_json_text_valid(payload, strlen(payload)))
        snprintf(why, why_len, "payload is not one JSON value");
    else {
        char name[64];
        int dup = sc_json_duplicate_name(payload, strlen(payload), name, sizeof name);
        if (dup == 0)
            return 1;
        if (dup > 0)
            snprintf(why, why_len, "payload has the member name \"%s\" twice in one object (I-JSON, "
                     "RFC 7493: names are unique; a strict consumer refuses it)", name);
        else {
            snprintf(why, why_len, "out of memory checking the payload's member names");
            return -1;
        }
    }
    return 0;
}

/* The same check as a yes/no: 1 valid, 0 not (or out of memory). */
static inline int sc_rules_event(const char *event_id, const char *aggregate_type,
                                 const char *aggregate_id, const char *event_type,
                                 const char *payload, char *why, size_t why_len)
{
    return sc_rules_event_check(event_id, aggregate_type, aggregate_id, event_type, payload, why,
                                why_len) == 1;
}

#endif
