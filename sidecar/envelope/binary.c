/* Binary content mode: the attributes are headers under one CloudEvents
 * prefix, `data` is the body, `datacontenttype` the content_type property.
 * The headers become the same attribute object a structured body is, so
 * the rules after that are the structured mode's own. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "envelope/attributes.h"
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

int sc_event_parse_binary(const struct sc_message *m, int prefix, struct sc_parsed_event *out,
                          char *reason, size_t reason_len)
{
    const amqp_basic_properties_t *p = m->props;
    json_t *root = json_object();
    reason[0] = 0;
    if (!root || prefix < 0) {
        json_decref(root);
        snprintf(reason, reason_len, "%s", root ? "no specversion header" : "out of memory");
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
        size_t plen = strlen(sc_binary_prefixes[at]), n = e->key.len - plen;
        char name[128];
        if (n == 0 || n >= sizeof name) {
            snprintf(reason, reason_len, "header '%.*s' names no attribute", (int)e->key.len,
                     (const char *)e->key.bytes);
            goto bad;
        }
        for (size_t j = 0; j < n; j++) {
            char c = ((const char *)e->key.bytes)[plen + j];
            name[j] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        }
        name[n] = 0;
        if (strcmp(name, "data") == 0) {
            snprintf(reason, reason_len, "header '%.*s': in binary mode the data is the body",
                     (int)e->key.len, (const char *)e->key.bytes);
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
    /* datacontenttype is the content_type property (the header only when
     * that is absent); data with no type is JSON, as in structured mode. */
    char type[256];
    sc_media_type(p, type, sizeof type);
    if (!type[0] && json_is_string(json_object_get(root, "datacontenttype"))) {
        amqp_basic_properties_t from_header = {._flags = AMQP_BASIC_CONTENT_TYPE_FLAG};
        const char *s = json_string_value(json_object_get(root, "datacontenttype"));
        from_header.content_type = (amqp_bytes_t){strlen(s), (void *)s};
        sc_media_type(&from_header, type, sizeof type);
    }
    if (m->body.len > 0) {
        if (type[0] && !sc_media_type_is_json(type)) {
            snprintf(reason, reason_len, "binary-mode data of content type '%.100s' is not JSON "
                     "(application/json or a +json type)", type);
            goto bad;
        }
        if (!sc_json_text_valid(m->body.bytes, m->body.len)) {
            snprintf(reason, reason_len, "binary-mode body is not valid JSON (content type %s)",
                     type[0] ? type : "none, read as application/json");
            goto bad;
        }
    }
    const char *mid = (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG) ? p->message_id.bytes : NULL;
    return sc_event_from_attributes(root, m->body.len ? m->body.bytes : NULL, m->body.len, mid,
                                    mid ? p->message_id.len : 0, out, reason, reason_len);
bad:
    json_decref(root);
    return -1;
}
