/* Binary content mode: the attributes are headers under one CloudEvents
 * prefix, `data` is the body, `datacontenttype` the content_type property.
 * The headers become the same attribute object a structured body is, so
 * the rules after that are the structured mode's own, and the same data
 * rules: a JSON type's body is JSON data, any other type's is bytes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "envelope/attributes.h"
#include "envelope/ce_rules.h"
#include "envelope/message.h"
#include "json_span.h"

/* The AMQP binding's prefix first, then what other bindings and SDKs write
 * (Kafka and others `ce_`, HTTP `ce-`), matched without regard to case. */
const char *const sc_binary_prefixes[4] = {"cloudEvents:", "cloudEvents_", "ce-", "ce_"};

static int prefix_of(const amqp_bytes_t *key)
{
    for (int i = 0; i < 4; i++) {
        size_t n = strlen(sc_binary_prefixes[i]);
        if (key->len >= n && strncasecmp(key->bytes, sc_binary_prefixes[i], n) == 0)
            return i;
    }
    return -1;
}

static int names(const amqp_bytes_t *key, int prefix, const char *attr)
{
    size_t n = strlen(sc_binary_prefixes[prefix]);
    return key->len - n == strlen(attr) &&
           strncasecmp((const char *)key->bytes + n, attr, key->len - n) == 0;
}

int sc_binary_prefix(const struct sc_message *m)
{
    const amqp_basic_properties_t *p = m->props;
    if (!p || !(p->_flags & AMQP_BASIC_HEADERS_FLAG))
        return -1;
    for (int i = 0; i < p->headers.num_entries; i++) {
        const amqp_bytes_t *k = &p->headers.entries[i].key;
        int at = prefix_of(k);
        if (at >= 0 && names(k, at, "specversion"))
            return at;
    }
    return -1;
}

/* A header's value as an attribute: strings (UTF-8) as strings, integers
 * as integers, an AMQP timestamp as an RFC 3339 time, booleans and floats as
 * themselves (the attribute's own check then refuses what it cannot take).
 * eventversion, the one integer attribute, may also come as a string of
 * digits (the HTTP binding writes every attribute as a string). NULL with
 * reason when the value cannot be an attribute at all. */
static json_t *attribute_value(const char *name, const amqp_table_entry_t *e, char *reason,
                               size_t reason_len)
{
    const amqp_field_value_t *f = &e->value;
    int64_t i;
    if (sc_envelope_integer(f, &i))
        return json_integer(i);
    switch (f->kind) {
    case AMQP_FIELD_KIND_UTF8:
    case AMQP_FIELD_KIND_BYTES: {
        const char *s = f->value.bytes.bytes;
        size_t n = f->value.bytes.len;
        if (strcmp(name, "eventversion") == 0 && n > 0 && n < 20) {
            char digits[24];
            memcpy(digits, s, n);
            digits[n] = 0;
            char *end;
            errno = 0;
            long long v = strtoll(digits, &end, 10);
            if (*end == 0 && errno == 0 && (digits[0] == '-' || (digits[0] >= '0' && digits[0] <= '9')))
                return json_integer(v);
        }
        json_t *str = json_stringn(n ? s : "", n);
        if (!str)
            snprintf(reason, reason_len, "header '%.*s' is not valid UTF-8", (int)e->key.len,
                     (const char *)e->key.bytes);
        return str;
    }
    case AMQP_FIELD_KIND_TIMESTAMP: {
        char t[64];
        sc_envelope_time(f->value.u64, t, sizeof t);
        return json_string(t);
    }
    case AMQP_FIELD_KIND_BOOLEAN:
        return json_boolean(f->value.boolean);
    case AMQP_FIELD_KIND_F32:
        return json_real(f->value.f32);
    case AMQP_FIELD_KIND_F64:
        return json_real(f->value.f64);
    case AMQP_FIELD_KIND_VOID:
        return json_null();
    default:
        snprintf(reason, reason_len, "header '%.*s' has a type no attribute can take (kind '%c')",
                 (int)e->key.len, (const char *)e->key.bytes, f->kind);
        return NULL;
    }
}

/* The attribute name a header under prefix spells: as written, but
 * lowercased after ce-, whose HTTP header names are case-insensitive (RFC
 * 9110 5.1). 0, or -1 when it spells none. */
static int attribute_name(const amqp_bytes_t *key, int prefix, char *name, size_t cap)
{
    size_t plen = strlen(sc_binary_prefixes[prefix]), n = key->len - plen;
    if (n == 0 || n >= cap)
        return -1;
    for (size_t j = 0; j < n; j++) {
        char c = ((const char *)key->bytes)[plen + j];
        name[j] = (char)(prefix == 2 && c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    name[n] = 0;
    return 0;
}

/* The string value of the header of attribute attr under prefix, or NULL. */
static const amqp_bytes_t *string_header(const amqp_basic_properties_t *p, int prefix,
                                         const char *attr)
{
    char name[128];
    for (int i = 0; i < p->headers.num_entries; i++) {
        const amqp_table_entry_t *e = &p->headers.entries[i];
        if (prefix_of(&e->key) == prefix && attribute_name(&e->key, prefix, name, sizeof name) == 0 &&
            strcmp(name, attr) == 0 &&
            (e->value.kind == AMQP_FIELD_KIND_UTF8 || e->value.kind == AMQP_FIELD_KIND_BYTES))
            return &e->value.value.bytes;
    }
    return NULL;
}

int sc_event_parse_binary(const struct sc_message *m, int prefix, struct sc_parsed_event *out,
                          char *reason, size_t reason_len)
{
    const amqp_basic_properties_t *p = m->props;
    reason[0] = 0;
    memset(out, 0, sizeof *out);
    if (prefix < 0) {
        char type[128];
        sc_media_type(p, type, sizeof type);
        char given[160];
        snprintf(given, sizeof given, type[0] ? "'s content type '%s' is not" : "%s has no content "
                 "type, not", type);
        snprintf(reason, reason_len, "no CloudEvents specversion header: the message%s "
                 "application/cloudevents..., so it is in binary mode (AMQP binding 3) and its "
                 "attributes must be cloudEvents: headers (JSON that is no CloudEvent needs a "
                 "consumer with \"envelope\": \"plain\")", given);
        return -1;
    }
    /* The log names the event from its headers even when it is refused. */
    const amqp_bytes_t *hid = string_header(p, prefix, "id"), *hsrc = string_header(p, prefix, "source");
    char src[256];
    int has_src = hsrc && hsrc->len < sizeof src;
    if (has_src) {
        memcpy(src, hsrc->bytes, hsrc->len);
        src[hsrc->len] = 0;
    }
    if (hid)
        sc_event_log_id(out, hid->bytes, hid->len, has_src ? src : NULL, has_src ? hsrc->len : 0);
    json_t *root = json_object();
    if (!root) {
        snprintf(reason, reason_len, "out of memory");
        return -1;
    }
    for (int i = 0; i < p->headers.num_entries; i++) {
        const amqp_table_entry_t *e = &p->headers.entries[i];
        int at = prefix_of(&e->key);
        if (at < 0)
            continue;
        if (at != prefix) {
            snprintf(reason, reason_len, "headers mix CloudEvents prefixes '%s' and '%s' (one "
                     "prefix per message)", sc_binary_prefixes[prefix], sc_binary_prefixes[at]);
            goto bad;
        }
        char name[128];
        if (attribute_name(&e->key, at, name, sizeof name)) {
            snprintf(reason, reason_len, "header '%.*s' names no attribute", (int)e->key.len,
                     (const char *)e->key.bytes);
            goto bad;
        }
        if (strcmp(name, "data") == 0) {
            snprintf(reason, reason_len, "header '%.*s': in binary mode the data is the body",
                     (int)e->key.len, (const char *)e->key.bytes);
            goto bad;
        }
        if (!sc_ce_name_valid(name, strlen(name))) {
            snprintf(reason, reason_len, "header '%.*s': attribute name '%.64s' is not lower-case "
                     "letters and digits (CloudEvents 1.0 naming convention: 'a' to 'z' and '0' "
                     "to '9' only)", (int)e->key.len, (const char *)e->key.bytes, name);
            goto bad;
        }
        if (json_object_get(root, name)) {
            snprintf(reason, reason_len, "attribute '%s' given twice in the headers", name);
            goto bad;
        }
        json_t *v = attribute_value(name, e, reason, reason_len);
        if (!v || json_object_set_new(root, name, v)) {
            if (v == NULL && !reason[0])
                snprintf(reason, reason_len, "out of memory");
            goto bad;
        }
    }
    /* datacontenttype is the content_type property (AMQP binding 3.1.1);
     * the header only when that is absent. */
    if (p->_flags & AMQP_BASIC_CONTENT_TYPE_FLAG) {
        json_t *ct = json_stringn(p->content_type.len ? p->content_type.bytes : "",
                                  p->content_type.len);
        if (!ct) {
            snprintf(reason, reason_len, "the content_type property is not valid UTF-8");
            goto bad;
        }
        json_object_set_new(root, "datacontenttype", ct);
    }
    const char *mid = (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG) ? p->message_id.bytes : NULL;
    struct sc_event_data d = {.p = m->body.len ? m->body.bytes : NULL, .len = m->body.len};
    return sc_event_from_attributes(root, &d, mid, mid ? p->message_id.len : 0, out, reason,
                                    reason_len);
bad:
    json_decref(root);
    return -1;
}
