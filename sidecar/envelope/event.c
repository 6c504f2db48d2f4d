#include "event.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envelope/attributes.h"
#include "envelope/trace_context.h"
#include "json_span.h"

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

/* A required attribute: a non-empty string. Returns it, or NULL with reason. */
static const char *required_string(json_t *root, const char *key, char *reason, size_t len)
{
    json_t *v = json_object_get(root, key);
    if (!v) {
        snprintf(reason, len, "missing required attribute '%s'", key);
        return NULL;
    }
    if (!json_is_string(v) || json_string_length(v) == 0) {
        snprintf(reason, len, "attribute '%s' must be a non-empty string", key);
        return NULL;
    }
    if (strlen(json_string_value(v)) != json_string_length(v)) {
        snprintf(reason, len, "attribute '%s' contains a NUL character", key);
        return NULL;
    }
    return json_string_value(v);
}

/* An optional string attribute; *ok = 0 when present with the wrong type. */
static const char *optional_string(json_t *root, const char *key, int *ok, char *reason, size_t len)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v))
        return NULL;
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
        snprintf(reason, len, "attribute '%s' must be a string", key);
        *ok = 0;
        return NULL;
    }
    return json_string_value(v);
}

/* The distributed-tracing extension attributes: kept when valid; an
 * invalid one is noted in trace_ignored and left out (tracing must never
 * cost an event). A tracestate is kept only beside a valid traceparent. */
static void trace_context(json_t *root, struct sc_parsed_event *out)
{
    json_t *tp = json_object_get(root, "traceparent"), *ts = json_object_get(root, "tracestate");
    char why[160];
    out->ev.struct_size = (uint32_t)sizeof out->ev;
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
    free(out->data_json);
    char keep[sizeof out->log_id], from[sizeof out->id_from];
    memcpy(keep, out->log_id, sizeof keep);
    memcpy(from, out->id_from, sizeof from);
    memset(out, 0, sizeof *out);
    memcpy(out->log_id, keep, sizeof keep);
    memcpy(out->id_from, from, sizeof from);
}

int sc_event_from_attributes(json_t *root, const char *data, size_t data_len,
                             const char *message_id, size_t message_id_len,
                             struct sc_parsed_event *out, char *reason, size_t reason_len)
{
    const char *spec = required_string(root, "specversion", reason, reason_len);
    if (!spec)
        goto bad;
    if (strcmp(spec, "1.0") != 0) {
        snprintf(reason, reason_len, "unsupported specversion '%.16s' (expected '1.0')", spec);
        goto bad;
    }
    json_t *idv = json_object_get(root, "id");
    if (json_is_string(idv))
        snprintf(out->log_id, sizeof out->log_id, "%.64s", json_string_value(idv));
    const char *raw_id = required_string(root, "id", reason, reason_len);
    if (!raw_id)
        goto bad;
    if (sc_uuid_canonical(raw_id, strlen(raw_id), out->id)) {
        snprintf(reason, reason_len, "attribute 'id' is not a UUID (RFC 4122: 8-4-4-4-12 hex "
                 "digits, optionally in braces or after urn:uuid:)");
        goto bad;
    }
    const char *id = out->id;
    memcpy(out->log_id, out->id, sizeof out->id);
    if (!(out->ev.type = required_string(root, "type", reason, reason_len)) ||
        !(out->ev.source = required_string(root, "source", reason, reason_len)))
        goto bad;
    char mid[37];
    if (message_id && (sc_uuid_canonical(message_id, message_id_len, mid) || strcmp(mid, id) != 0)) {
        snprintf(reason, reason_len, "message_id property '%.*s' differs from id '%s'",
                 (int)(message_id_len > 64 ? 64 : message_id_len), message_id, id);
        goto bad;
    }
    int ok = 1;
    out->ev.subject = optional_string(root, "subject", &ok, reason, reason_len);
    if (ok)
        out->ev.time = optional_string(root, "time", &ok, reason, reason_len);
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
    if (data) {
        if (!(out->data_json = malloc(data_len + 1))) {
            snprintf(reason, reason_len, "out of memory");
            goto bad;
        }
        memcpy(out->data_json, data, data_len);
        out->data_json[data_len] = 0;
        out->ev.data_json = out->data_json;
        out->ev.data_json_len = data_len;
    }
    trace_context(root, out);
    out->ev.id = id;
    out->json = root;
    return 0;
bad:
    refuse(out, root);
    return -1;
}

int sc_event_parse(const char *body, size_t len, const char *message_id, size_t message_id_len,
                   struct sc_parsed_event *out, char *reason, size_t reason_len)
{
    json_error_t je;
    memset(out, 0, sizeof *out);
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
    return sc_event_from_attributes(root, has_data ? body + d0 : NULL, d1 - d0, message_id,
                                    message_id_len, out, reason, reason_len);
}

void sc_event_free(struct sc_parsed_event *e)
{
    if (e->json)
        json_decref((json_t *)e->json);
    free(e->data_json);
    memset(e, 0, sizeof *e);
}
