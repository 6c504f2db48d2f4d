/* Plain messages ("envelope": "plain"): the body is `data`, and the
 * attributes come from what any AMQP publisher sets. The id is the
 * message_id (a UUID canonicalised, any other string mapped to its UUIDv5),
 * so a repeat of the same message meets its claim like any event. */
#include <stdio.h>
#include <string.h>

#include "envelope/attributes.h"
#include "envelope/message.h"
#include "envelope/uuid_v5.h"
#include "json_span.h"
#include "envelope/sidecar_headers.h"

/* What a copy the sidecar republished still says of the original route
 * (retry copies come back through the default exchange), else the
 * delivery's own. */
static amqp_bytes_t route(const struct sc_message *m, const char *header, amqp_bytes_t own)
{
    const amqp_field_value_t *f = sc_envelope_header(m, header);
    if (f && (f->kind == AMQP_FIELD_KIND_UTF8 || f->kind == AMQP_FIELD_KIND_BYTES))
        return f->value.bytes;
    return own;
}

static int set_string(json_t *root, const char *key, const void *s, size_t n, char *reason,
                      size_t reason_len)
{
    json_t *v = json_stringn(n ? s : "", n);
    if (!v || json_object_set_new(root, key, v)) {
        snprintf(reason, reason_len, "%s is not valid UTF-8", key);
        return -1;
    }
    return 0;
}

/* The subject plain_subject points at: a string, or a number's text as
 * written; nothing when the pointer names nothing or null. */
static int subject_from_body(json_t *root, const struct sc_message *m, const char *pointer,
                             char *reason, size_t reason_len)
{
    size_t a, b;
    int found = sc_json_pointer_span(m->body.bytes, m->body.len, pointer, &a, &b);
    if (found <= 0)
        return 0; /* the body was checked: nothing there */
    const char *v = (const char *)m->body.bytes + a;
    if (*v == 'n')
        return 0;
    if (*v == '-' || (*v >= '0' && *v <= '9'))
        return set_string(root, "subject", v, b - a, reason, reason_len);
    if (*v == '"') {
        json_error_t je;
        json_t *s = json_loadb(v, b - a, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (s && json_object_set_new(root, "subject", s) == 0)
            return 0;
        snprintf(reason, reason_len, "out of memory");
        return -1;
    }
    snprintf(reason, reason_len, "plain_subject '%.100s' names %s, not a string or a number",
             pointer, *v == '{' ? "an object" : *v == '[' ? "an array" : "a boolean");
    return -1;
}

int sc_event_parse_plain(const struct sc_message *m, const struct sc_envelope_opts *o,
                         struct sc_parsed_event *out, char *reason, size_t reason_len)
{
    const amqp_basic_properties_t *p = m->props;
    memset(out, 0, sizeof *out);
    if (!p || !(p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG) || p->message_id.len == 0) {
        snprintf(reason, reason_len, "no message_id property (a plain message's id is its "
                 "message_id)");
        return -1;
    }
    const char *mid = p->message_id.bytes;
    size_t mid_len = p->message_id.len;
    if (mid_len > 255 || memchr(mid, 0, mid_len)) {
        snprintf(reason, reason_len, "message_id is longer than 255 bytes or holds a NUL byte");
        return -1;
    }
    char id[37];
    if (sc_message_id_to_event_id(mid, mid_len, id) == 1) {
        memcpy(out->id_from, mid, mid_len);
        out->id_from[mid_len] = 0;
    }
    snprintf(out->log_id, sizeof out->log_id, "%s", id);
    if (m->body.len == 0 || !sc_json_text_valid(m->body.bytes, m->body.len)) {
        snprintf(reason, reason_len, "body is not valid JSON (a plain message's body is its data)");
        return -1;
    }
    json_t *root = json_object();
    if (!root) {
        snprintf(reason, reason_len, "out of memory");
        return -1;
    }
    json_object_set_new(root, "specversion", json_string("1.0"));
    json_object_set_new(root, "id", json_string(id));
    amqp_bytes_t type = (p->_flags & AMQP_BASIC_TYPE_FLAG) && p->type.len
                            ? p->type
                            : route(m, SC_H_ORIG_ROUTING_KEY, m->routing_key);
    if (type.len == 0) {
        snprintf(reason, reason_len, "no type: neither a type property nor a routing key");
        goto bad;
    }
    if (set_string(root, "type", type.bytes, type.len, reason, reason_len))
        goto bad;
    if (o->plain_source) {
        json_object_set_new(root, "source", json_string(o->plain_source));
    } else {
        amqp_bytes_t ex = route(m, SC_H_ORIG_EXCHANGE, m->exchange);
        if (ex.len == 0) {
            snprintf(reason, reason_len, "no source: the message came through the default "
                     "exchange (set plain_source)");
            goto bad;
        }
        if (set_string(root, "source", ex.bytes, ex.len, reason, reason_len))
            goto bad;
    }
    if (o->plain_subject && subject_from_body(root, m, o->plain_subject, reason, reason_len))
        goto bad;
    const amqp_field_value_t *ver = sc_envelope_header(m, "eventversion");
    if (ver) {
        int64_t v;
        if (!sc_envelope_integer(ver, &v)) {
            snprintf(reason, reason_len, "header 'eventversion' must be an integer");
            goto bad;
        }
        json_object_set_new(root, "eventversion", json_integer(v));
    }
    if (p->_flags & AMQP_BASIC_TIMESTAMP_FLAG) {
        char t[64];
        sc_envelope_time(p->timestamp, t, sizeof t);
        json_object_set_new(root, "time", json_string(t));
    }
    /* Trace context as W3C's AMQP propagation writes it: headers named
     * traceparent and tracestate. What is not a UTF-8 string is kept as a
     * non-string, so the one check ignores it and says why. */
    static const char *const trace_headers[] = {"traceparent", "tracestate"};
    for (int i = 0; i < 2; i++) {
        const amqp_field_value_t *h = sc_envelope_header(m, trace_headers[i]);
        if (!h)
            continue;
        json_t *v = NULL;
        if (h->kind == AMQP_FIELD_KIND_UTF8 || h->kind == AMQP_FIELD_KIND_BYTES)
            v = json_stringn(h->value.bytes.len ? h->value.bytes.bytes : "", h->value.bytes.len);
        json_object_set_new(root, trace_headers[i], v ? v : json_false());
    }
    /* The message_id as sent, for the handler (without memory: the id). */
    out->plain_message_id = strndup(mid, mid_len);
    struct sc_event_data d = {.p = m->body.bytes, .len = m->body.len, .json_checked = 1};
    return sc_event_from_attributes(root, &d, NULL, 0, out, reason, reason_len);
bad:
    json_decref(root);
    return -1;
}
