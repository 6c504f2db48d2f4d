#include "event.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envelope/attributes.h"
#include "envelope/ce_rules.h"
#include "envelope/json_walk.h"
#include "envelope/trace_context.h"
#include "envelope/uuid_v5.h"
#include "json_span.h"
#include "relay/outbox_rules.h"

/* The body with the value span [a, b) replaced by `null`, for a parser that
 * must not see `data` (it would convert or refuse its numbers). */
static char *without_span(const char *body, size_t len, size_t a, size_t b, size_t *out_len)
{
    char *t = malloc(len - (b - a) + 5);
    if (!t)
        return NULL;
    memcpy(t, body, a);
    memcpy(t + a, "null", 4);
    memcpy(t + a + 4, body + b, len - b);
    *out_len = len - (b - a) + 4;
    t[*out_len] = 0;
    return t;
}

/* A string member, NULL when absent, null or not a string. */
static const char *string_of(json_t *root, const char *key, size_t *len)
{
    json_t *v = json_object_get(root, key);
    if (!json_is_string(v))
        return NULL;
    *len = json_string_length(v);
    return json_string_value(v);
}

/* A required attribute: a non-empty string. Returns it, or NULL with reason. */
static const char *required_string(json_t *root, const char *key, char *reason, size_t len)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        snprintf(reason, len, "missing required attribute '%s'", key);
        return NULL;
    }
    if (!json_is_string(v) || json_string_length(v) == 0) {
        snprintf(reason, len, "attribute '%s' must be a non-empty string (CloudEvents 1.0 %s: "
                 "REQUIRED, a non-empty String)", key, key);
        return NULL;
    }
    return json_string_value(v);
}

/* An optional string attribute (null is unset: JSON format 2.2); *ok = 0
 * when present with another type. */
static const char *optional_string(json_t *root, const char *key, int *ok, char *reason, size_t len)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v))
        return NULL;
    if (!json_is_string(v)) {
        snprintf(reason, len, "attribute '%s' must be a string", key);
        *ok = 0;
        return NULL;
    }
    return json_string_value(v);
}

void sc_event_id_of(const char *id, size_t id_len, const char *source, size_t source_len,
                    char out[37])
{
    if (sc_uuid_canonical(id, id_len, out) != 0)
        sc_uuid_v5_pair(SC_MESSAGE_ID_NAMESPACE, source, source_len, id, id_len, out);
}

void sc_event_log_id(struct sc_parsed_event *out, const char *id, size_t id_len,
                     const char *source, size_t source_len)
{
    char canon[37];
    uint32_t cp;
    if (!id || id_len == 0) {
        out->log_id[0] = 0;
        return;
    }
    if (sc_uuid_canonical(id, id_len, canon) == 0) {
        memcpy(out->log_id, canon, sizeof canon);
        return;
    }
    if (source && source_len && strlen(source) == source_len && sc_rules_uri_reference(source) &&
        sc_ce_string_valid(id, id_len, &cp)) {
        sc_event_id_of(id, id_len, source, source_len, canon);
        memcpy(out->log_id, canon, sizeof canon);
        size_t keep = id_len < sizeof out->id_from ? id_len : sizeof out->id_from - 1;
        memcpy(out->id_from, id, keep);
        out->id_from[keep] = 0;
        out->id_of_source = 1;
        return;
    }
    snprintf(out->log_id, sizeof out->log_id, "%.*s", (int)(id_len > 64 ? 64 : id_len), id);
}

/* The type system's rules for one attribute's value (null: unset). */
static int attribute_value_ok(const char *name, json_t *v, char *reason, size_t len)
{
    uint32_t cp;
    switch (json_typeof(v)) {
    case JSON_NULL:
    case JSON_TRUE:
    case JSON_FALSE:
        return 1;
    case JSON_STRING:
        if (sc_ce_string_valid(json_string_value(v), json_string_length(v), &cp))
            return 1;
        if (cp == UINT32_MAX)
            snprintf(reason, len, "attribute '%s' is not valid UTF-8", name);
        else
            snprintf(reason, len, "attribute '%s' holds U+%04X, %s (CloudEvents 1.0 String: %s "
                     "are disallowed)", name, (unsigned)cp,
                     cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) ? "a control character"
                                                              : "a noncharacter",
                     cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)
                         ? "the control characters U+0000-U+001F and U+007F-U+009F"
                         : "code points Unicode identifies as noncharacters");
        return 0;
    case JSON_INTEGER: {
        json_int_t i = json_integer_value(v);
        if (i >= SC_CE_INT_MIN && i <= SC_CE_INT_MAX)
            return 1;
        snprintf(reason, len, "attribute '%s' is %lld, beyond 32 bits (CloudEvents 1.0 Integer: "
                 "-2,147,483,648 to +2,147,483,647 inclusive)", name, (long long)i);
        return 0;
    }
    case JSON_REAL:
        snprintf(reason, len, "attribute '%s' is a number with a fraction or an exponent "
                 "(CloudEvents 1.0 Integer: only the integer component; no other number type)",
                 name);
        return 0;
    default:
        snprintf(reason, len, "attribute '%s' is a JSON %s (CloudEvents 1.0 type system: Boolean, "
                 "Integer, String, Binary, URI, URI-reference and Timestamp only)", name,
                 json_is_object(v) ? "object" : "array");
        return 0;
    }
}

/* Every attribute's name and value against the spec's naming convention and
 * type system. In a structured body `data` and `data_base64` are the event
 * format's members, not attributes. */
static int attributes_ok(json_t *root, int structured, char *reason, size_t len)
{
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (structured && (strcmp(key, "data") == 0 || strcmp(key, "data_base64") == 0))
            continue;
        if (!sc_ce_name_valid(key, strlen(key))) {
            snprintf(reason, len, "attribute name '%.64s' is not lower-case letters and digits "
                     "(CloudEvents 1.0 naming convention: 'a' to 'z' and '0' to '9' only)", key);
            return 0;
        }
        if (!attribute_value_ok(key, v, reason, len))
            return 0;
    }
    return 1;
}

/* The distributed-tracing extension attributes: kept when valid; an
 * invalid one is noted in trace_ignored and left out (tracing must never
 * cost an event). A tracestate is kept only beside a valid traceparent. */
static void trace_context(json_t *root, struct sc_parsed_event *out)
{
    json_t *tp = json_object_get(root, "traceparent"), *ts = json_object_get(root, "tracestate");
    char why[160];
    if (!tp || json_is_null(tp))
        return;
    if (!json_is_string(tp)) {
        snprintf(out->trace_ignored, sizeof out->trace_ignored,
                 "traceparent is not a string: trace context ignored");
        return;
    }
    const char *s = json_string_value(tp);
    if (!sc_traceparent_check(s, json_string_length(tp), why, sizeof why)) {
        snprintf(out->trace_ignored, sizeof out->trace_ignored, "%s: trace context ignored", why);
        return;
    }
    if (sc_span_id_new(out->span_id)) {
        snprintf(out->trace_ignored, sizeof out->trace_ignored,
                 "no randomness for a span id: trace context ignored");
        return;
    }
    sc_trace_id_of(s, out->trace_id);
    sc_trace_parent_id_of(s, out->parent_span_id);
    out->ev.traceparent = s;
    out->ev.trace_id = out->trace_id;
    out->ev.span_id = out->span_id;
    if (!ts || json_is_null(ts))
        return;
    if (!json_is_string(ts) ||
        !sc_tracestate_check(json_string_value(ts), json_string_length(ts), why, sizeof why)) {
        snprintf(out->trace_ignored, sizeof out->trace_ignored, "%s: tracestate ignored",
                 json_is_string(ts) ? why : "tracestate is not a string");
        return;
    }
    out->ev.tracestate = json_string_value(ts);
}

/* Keeps the id readable for the log even when the event is refused. */
static void refuse(struct sc_parsed_event *out, json_t *root)
{
    json_decref(root);
    free(out->data_buf);
    free(out->plain_message_id);
    char keep[sizeof out->log_id], from[sizeof out->id_from];
    int of_source = out->id_of_source;
    memcpy(keep, out->log_id, sizeof keep);
    memcpy(from, out->id_from, sizeof from);
    memset(out, 0, sizeof *out);
    memcpy(out->log_id, keep, sizeof keep);
    memcpy(out->id_from, from, sizeof from);
    out->id_of_source = of_source;
}

/* data_buf = a NUL-terminated copy of p[0..n). */
static int keep_data(struct sc_parsed_event *out, const void *p, size_t n, char *reason,
                     size_t reason_len)
{
    if (!(out->data_buf = malloc(n + 1))) {
        snprintf(reason, reason_len, "out of memory");
        return -1;
    }
    memcpy(out->data_buf, p, n);
    out->data_buf[n] = 0;
    out->ev.data_bytes = (const unsigned char *)out->data_buf;
    out->ev.data_bytes_len = n;
    return 0;
}

/* The event's data: JSON data goes to the handler as data_json (and as
 * bytes); any other as bytes only (JSON format 3.1; AMQP binding 3.1.2). */
static int event_data(json_t *root, const struct sc_event_data *d, const char *type,
                      struct sc_parsed_event *out, char *reason, size_t reason_len)
{
    int is_json = !type || sc_ce_media_type_is_json(type, strlen(type));
    json_t *b64 = d->structured ? json_object_get(root, "data_base64") : NULL;
    if (b64 && json_is_null(b64))
        b64 = NULL;
    if (b64 && d->p) {
        snprintf(reason, reason_len, "members 'data' and 'data_base64' together (JSON format "
                 "3.1.1: the presence of the data and data_base64 members is mutually exclusive)");
        return -1;
    }
    if (b64) {
        if (!json_is_string(b64)) {
            snprintf(reason, reason_len, "member 'data_base64' is not a string (JSON format 3.1.1: "
                     "Binary data is a JSON string of its Base64 encoding)");
            return -1;
        }
        size_t n = json_string_length(b64);
        unsigned char *bytes = malloc(n / 4 * 3 + 1);
        long got = bytes ? sc_base64_decode(json_string_value(b64), n, bytes) : -1;
        if (got < 0) {
            free(bytes);
            snprintf(reason, reason_len, bytes ? "member 'data_base64' is not Base64 (RFC 4648 "
                     "section 4: the standard alphabet, padded with '=')" : "out of memory");
            return -1;
        }
        bytes[got] = 0;
        out->data_buf = (char *)bytes;
        out->ev.data_bytes = bytes;
        out->ev.data_bytes_len = (size_t)got;
        /* The deserializer MAY further interpret this binary data according
         * to the datacontenttype (3.1.2): declared JSON, it is JSON data as
         * it would be in binary mode. No type: bytes, nothing implied. */
        if (type && is_json) {
            if (!sc_json_text_valid(out->data_buf, (size_t)got)) {
                snprintf(reason, reason_len, "data_base64 decodes to data that is not valid JSON, "
                         "and datacontenttype '%.100s' says JSON", type);
                return -1;
            }
            out->ev.data_json = out->data_buf;
            out->ev.data_json_len = (size_t)got;
        }
        return 0;
    }
    if (!d->p)
        return 0;
    if (d->structured && !is_json) {
        /* A non-JSON type: `data` is the content as a string (3.1.2). */
        if (d->p[0] == 'n')
            return 0;
        json_error_t je;
        json_t *s = d->p[0] == '"' ? json_loadb(d->p, d->len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je)
                                   : NULL;
        if (!s) {
            snprintf(reason, reason_len, "member 'data' is not a string while datacontenttype "
                     "'%.100s' is not JSON (JSON format 3.1.2: such data is an encoded content "
                     "string)", type);
            return -1;
        }
        int rc = keep_data(out, json_string_value(s), json_string_length(s), reason, reason_len);
        json_decref(s);
        return rc;
    }
    if (!d->structured && is_json && !d->json_checked && !sc_json_text_valid(d->p, d->len)) {
        snprintf(reason, reason_len, "binary-mode body is not valid JSON (content type %.100s)",
                 type ? type : "none, read as application/json");
        return -1;
    }
    if (keep_data(out, d->p, d->len, reason, reason_len))
        return -1;
    if (is_json) {
        out->ev.data_json = out->data_buf;
        out->ev.data_json_len = d->len;
    }
    return 0;
}

int sc_event_from_attributes(json_t *root, const struct sc_event_data *d, const char *message_id,
                             size_t message_id_len, struct sc_parsed_event *out, char *reason,
                             size_t reason_len)
{
    size_t raw_len = 0, src_len = 0;
    const char *raw_id = string_of(root, "id", &raw_len), *src = string_of(root, "source", &src_len);
    sc_event_log_id(out, raw_id, raw_len, src, src_len);
    out->ev.struct_size = (uint32_t)sizeof out->ev;
    if (!attributes_ok(root, d->structured, reason, reason_len))
        goto bad;
    const char *spec = required_string(root, "specversion", reason, reason_len);
    if (!spec)
        goto bad;
    if (strcmp(spec, "1.0") != 0) {
        snprintf(reason, reason_len, "unsupported specversion '%.16s' (expected '1.0')", spec);
        goto bad;
    }
    if (!required_string(root, "id", reason, reason_len) ||
        !required_string(root, "source", reason, reason_len))
        goto bad;
    if (!sc_rules_uri_reference(src)) {
        snprintf(reason, reason_len, "attribute 'source' ('%.64s') is not a URI-reference "
                 "(CloudEvents 1.0 source: MUST be a non-empty URI-reference, RFC 3986 4.1)", src);
        goto bad;
    }
    /* source + id is the event's identity: a UUID names it alone, anything
     * else is mapped with its source. */
    sc_event_id_of(raw_id, raw_len, src, src_len, out->id);
    const char *id = out->id;
    if (!(out->ev.type = required_string(root, "type", reason, reason_len)))
        goto bad;
    out->ev.source = src;
    if (message_id) {
        char mid[37];
        int same = out->id_of_source
                       ? message_id_len == raw_len && memcmp(message_id, raw_id, raw_len) == 0
                       : sc_uuid_canonical(message_id, message_id_len, mid) == 0 &&
                             strcmp(mid, id) == 0;
        if (!same) {
            snprintf(reason, reason_len, "message_id property '%.*s' differs from id '%.64s'",
                     (int)(message_id_len > 64 ? 64 : message_id_len), message_id,
                     out->id_of_source ? raw_id : id);
            goto bad;
        }
    }
    int ok = 1;
    out->ev.subject = optional_string(root, "subject", &ok, reason, reason_len);
    if (ok && out->ev.subject && !out->ev.subject[0]) {
        snprintf(reason, reason_len, "attribute 'subject' is empty (CloudEvents 1.0 subject: if "
                 "present, MUST be a non-empty string)");
        goto bad;
    }
    if (ok)
        out->ev.time = optional_string(root, "time", &ok, reason, reason_len);
    if (ok && out->ev.time && !sc_ce_time_valid(out->ev.time, strlen(out->ev.time))) {
        snprintf(reason, reason_len, "attribute 'time' ('%.64s') is not an RFC 3339 timestamp "
                 "(CloudEvents 1.0 time: if present, MUST adhere to RFC 3339)", out->ev.time);
        goto bad;
    }
    const char *ct = ok ? optional_string(root, "datacontenttype", &ok, reason, reason_len) : NULL;
    if (ok && ct && !sc_ce_media_type_valid(ct, strlen(ct))) {
        snprintf(reason, reason_len, "attribute 'datacontenttype' ('%.64s') is not a media type "
                 "(CloudEvents 1.0 datacontenttype: if present, MUST adhere to RFC 2046)", ct);
        goto bad;
    }
    const char *schema = ok ? optional_string(root, "dataschema", &ok, reason, reason_len) : NULL;
    if (ok && schema && (!sc_rules_uri_reference(schema) || !memchr(schema, ':', strcspn(schema, "/?#")))) {
        snprintf(reason, reason_len, "attribute 'dataschema' ('%.64s') is not an absolute URI "
                 "(CloudEvents 1.0 dataschema: if present, MUST be a non-empty URI, RFC 3986 4.3)",
                 schema);
        goto bad;
    }
    if (!ok)
        goto bad;
    json_t *ver = json_object_get(root, "eventversion");
    if (ver && !json_is_null(ver)) {
        if (!json_is_integer(ver)) {
            snprintf(reason, reason_len, "attribute 'eventversion' must be an integer");
            goto bad;
        }
        out->ev.eventversion = json_integer_value(ver);
        out->ev.has_eventversion = 1;
    }
    if (event_data(root, d, ct, out, reason, reason_len))
        goto bad;
    out->ev.datacontenttype = ct;
    out->ev.original_id = out->plain_message_id ? out->plain_message_id : raw_id;
    trace_context(root, out);
    out->ev.id = id;
    out->json = root;
    return 0;
bad:
    refuse(out, root);
    return -1;
}

/* Each top-level member that is a number must be a CloudEvents Integer
 * (`data` is not an attribute: its numbers are free). Read in the text, as
 * the parser would refuse or round what does not fit 64 bits. 1 when every
 * one is; 0 with reason; 1 too when the text is not valid JSON (the parse
 * says why). */
static int integers_ok(const char *body, size_t len, char *reason, size_t reason_len)
{
    struct sc_json_walk w;
    if (sc_json_walk_open(&w, body, body + len) || !w.object)
        return 1;
    const char *k = NULL, *v, *v_end, *bad_k = NULL, *bad_v = NULL;
    size_t k_len = 0, bad_k_len = 0, bad_v_len = 0;
    int rc;
    while ((rc = sc_json_walk_next(&w, &k, &k_len, &v, &v_end)) == 1) {
        if (bad_k || !(*v == '-' || (*v >= '0' && *v <= '9')) || sc_json_key_is(k, k_len, "data"))
            continue;
        if (!sc_ce_integer_text(v, (size_t)(v_end - v))) {
            bad_k = k + 1, bad_k_len = k_len - 2;
            bad_v = v, bad_v_len = (size_t)(v_end - v);
        }
    }
    if (rc != 0 || !bad_k)
        return 1;
    /* bad_v points into the body, which has no NUL after it. */
    if (memchr(bad_v, '.', bad_v_len) || memchr(bad_v, 'e', bad_v_len) ||
        memchr(bad_v, 'E', bad_v_len))
        snprintf(reason, reason_len, "attribute '%.*s' is a number with a fraction or an exponent "
                 "(CloudEvents 1.0 Integer: only the integer component; no other number type)",
                 (int)(bad_k_len > 64 ? 64 : bad_k_len), bad_k);
    else
        snprintf(reason, reason_len, "attribute '%.*s' is %.*s, beyond 32 bits (CloudEvents 1.0 "
                 "Integer: -2,147,483,648 to +2,147,483,647 inclusive)",
                 (int)(bad_k_len > 64 ? 64 : bad_k_len), bad_k,
                 (int)(bad_v_len > 40 ? 40 : bad_v_len), bad_v);
    return 0;
}

int sc_event_parse(const char *body, size_t len, const char *message_id, size_t message_id_len,
                   struct sc_parsed_event *out, char *reason, size_t reason_len)
{
    json_error_t je;
    memset(out, 0, sizeof *out);
    if (!body)
        body = "", len = 0; /* an empty body may come without a buffer */
    /* `data` is taken as written, at any depth and whatever its numbers: the
     * parser below only sees the rest, with `data` replaced by null (NUL may
     * appear inside string values; attributes are checked for it below). */
    size_t d0 = 0, d1 = 0, plen = len;
    int span = sc_json_member_span(body, len, "data", &d0, &d1);
    int has_data = span == 1;
    char *patched = has_data ? without_span(body, len, d0, d1, &plen) : NULL;
    if (has_data && !patched) {
        snprintf(reason, reason_len, "out of memory");
        return -1;
    }
    if (span >= 0 && !integers_ok(body, len, reason, reason_len)) {
        free(patched);
        json_t *ids = json_loadb(body, len, JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL, NULL);
        size_t il = 0, sl = 0;
        const char *i = string_of(ids, "id", &il), *s = string_of(ids, "source", &sl);
        sc_event_log_id(out, i, il, s, sl);
        json_decref(ids);
        return -1;
    }
    json_t *root = json_loadb(patched ? patched : body, plen, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    free(patched);
    if (!root) {
        snprintf(reason, reason_len, "body is not valid JSON: %s", je.text);
        return -1;
    }
    if (!json_is_object(root)) {
        snprintf(reason, reason_len, "body is not a JSON object");
        json_decref(root);
        return -1;
    }
    if (span < 0) {
        /* The strict scan refused what the parser took: never guess. */
        snprintf(reason, reason_len, "body is not valid JSON (RFC 8259)");
        json_decref(root);
        return -1;
    }
    struct sc_event_data d = {.structured = 1, .p = has_data ? body + d0 : NULL, .len = d1 - d0};
    return sc_event_from_attributes(root, &d, message_id, message_id_len, out, reason, reason_len);
}

void sc_event_free(struct sc_parsed_event *e)
{
    if (e->json)
        json_decref((json_t *)e->json);
    free(e->data_buf);
    free(e->plain_message_id);
    memset(e, 0, sizeof *e);
}
