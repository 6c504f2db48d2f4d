#include "relay_message.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envelope/json_span.h"
#include "envelope/trace_context.h"
#include "lifecycle.h"
#include "log.h"
#include "otel.h"
#include "outbox_rules.h"

struct text {
    char *b;
    size_t len, cap;
    int failed;
};

static void append(struct text *t, const char *s, size_t n)
{
    if (t->failed)
        return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = (t->len + n + 1) * 2;
        char *b = realloc(t->b, cap);
        if (!b) {
            t->failed = 1;
            return;
        }
        t->b = b;
        t->cap = cap;
    }
    memcpy(t->b + t->len, s, n);
    t->len += n;
    t->b[t->len] = 0;
}

static void append_raw(struct text *t, const char *s)
{
    append(t, s, strlen(s));
}

/* s as a JSON string, escaped as jansson would (\" \\ \b \f \n \r \t,
 * other control characters as \u00XX, everything else as it is). Returns
 * 0, or -1 when s is not UTF-8: the one JSON validator checks the result. */
static int append_json_string(struct text *t, const char *s)
{
    size_t start = t->len;
    append(t, "\"", 1);
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        const char *esc = NULL;
        char u[8];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default:
            if (c < 0x20) {
                snprintf(u, sizeof u, "\\u%04x", c);
                esc = u;
            }
            break;
        }
        if (esc) {
            append_raw(t, esc);
        } else {
            /* runs of plain bytes in one copy */
            const char *q = p;
            while (q[1] && (unsigned char)q[1] >= 0x20 && q[1] != '"' && q[1] != '\\')
                q++;
            append(t, p, (size_t)(q - p + 1));
            p = q;
        }
    }
    append(t, "\"", 1);
    if (t->failed)
        return 0; /* told apart by the caller */
    return sc_json_text_valid(t->b + start, t->len - start) ? 0 : -1;
}

void sc_relay_trace_of(const struct sc_relay_row *o, struct sc_relay_trace *out, int log_invalid)
{
    char why[160];
    struct sc_log_fields lf = {.event_id = o->event_id, .outcome = "trace_context_ignored"};
    memset(out, 0, sizeof *out);
    if (o->traceparent[0]) {
        if (sc_traceparent_check(o->traceparent, strlen(o->traceparent), why, sizeof why)) {
            out->traceparent = o->traceparent;
            sc_trace_id_of(o->traceparent, out->trace_id);
        } else if (log_invalid) {
            sc_log(SC_LOG_WARN, &lf, "outbox row's %s; published without trace context", why);
        }
    }
    /* tracestate means nothing without the traceparent it belongs to */
    if (out->traceparent && o->tracestate) {
        if (sc_tracestate_check(o->tracestate, strlen(o->tracestate), why, sizeof why))
            out->tracestate = o->tracestate;
        else if (log_invalid)
            sc_log(SC_LOG_WARN, &lf, "outbox row's %s; published without it", why);
    }
}

void sc_relay_span(const struct sc_relay_row *o, const struct sc_relay_trace *tc,
                   const char *exchange, const char *outcome, int error)
{
    if (!tc->trace_id[0] || !sc_otel_enabled())
        return;
    struct sc_otel_span s;
    memset(&s, 0, sizeof s);
    memcpy(s.trace_id, tc->trace_id, sizeof s.trace_id);
    if (sc_span_id_new(s.span_id))
        return;
    sc_trace_parent_id_of(tc->traceparent, s.parent_span_id);
    snprintf(s.name, sizeof s.name, "%.80s publish", exchange);
    s.kind = SC_OTEL_PRODUCER;
    s.start_us = o->built_us;
    s.end_us = sc_now_us();
    s.error = error;
    snprintf(s.outcome, sizeof s.outcome, "%s", outcome);
    snprintf(s.message_id, sizeof s.message_id, "%s", o->event_id);
    snprintf(s.destination, sizeof s.destination, "%s", exchange);
    snprintf(s.routing_key, sizeof s.routing_key, "%s", o->event_type);
    sc_otel_add(&s);
}

/* One AMQP header with a string value pointing into the row. */
static void header_text(struct sc_relay_row *o, const char *key, const char *value)
{
    amqp_table_entry_t *e = &o->headers[o->props.headers.num_entries++];
    e->key = amqp_cstring_bytes(key);
    e->value.kind = AMQP_FIELD_KIND_UTF8;
    e->value.value.bytes = amqp_cstring_bytes(value);
}

/* Binary mode: every attribute but data and datacontenttype (which is the
 * content_type property) as a `cloudEvents:` header (the AMQP binding's
 * prefix); eventversion an AMQP integer, time a string (an AMQP timestamp
 * would drop the microseconds). */
static void binary_headers(struct sc_relay_row *o, const struct sc_relay_trace *tc)
{
    header_text(o, "cloudEvents:specversion", "1.0");
    header_text(o, "cloudEvents:id", o->event_id);
    header_text(o, "cloudEvents:type", o->event_type);
    header_text(o, "cloudEvents:source", o->aggregate_type);
    header_text(o, "cloudEvents:subject", o->aggregate_id);
    header_text(o, "cloudEvents:time", o->time);
    amqp_table_entry_t *v = &o->headers[o->props.headers.num_entries++];
    v->key = amqp_cstring_bytes("cloudEvents:eventversion");
    v->value.kind = AMQP_FIELD_KIND_I64;
    v->value.value.i64 = o->version;
    if (o->tenant)
        header_text(o, "cloudEvents:tenant", o->tenant);
    if (tc->traceparent)
        header_text(o, "cloudEvents:traceparent", tc->traceparent);
    if (tc->tracestate)
        header_text(o, "cloudEvents:tracestate", tc->tracestate);
}

/* Header x-ordering-key = aggregate_id on every message, whatever the
 * ordering: what a consistent-hash exchange partitions by, so one
 * aggregate's events stay on one ordered queue. The first header: binary
 * mode appends its attributes. */
static void set_ordering_key(struct sc_relay_row *o)
{
    o->props._flags |= AMQP_BASIC_HEADERS_FLAG;
    o->props.headers.entries = o->headers;
    o->props.headers.num_entries = 0;
    header_text(o, "x-ordering-key", o->aggregate_id);
}

enum sc_relay_build sc_relay_message_build(struct sc_relay_row *o, const struct sc_relay_params *p,
                                           struct sc_publish *m, char *why, size_t why_len)
{
    int rule = sc_rules_event_check(o->event_id, o->aggregate_type, o->aggregate_id, o->event_type,
                                    o->payload, why, why_len);
    if (rule < 0)
        return SC_RELAY_NO_MEMORY;
    if (rule == 0)
        return SC_RELAY_INVALID;
    /* The body holds the payload: a payload above the bound is refused
     * before a body that large is built. */
    size_t payload_len = strlen(o->payload);
    if (payload_len > (size_t)p->max_message_bytes) {
        snprintf(why, why_len, "its payload alone is %zu bytes, above relay.max_message_bytes (%d): "
                 "not sent", payload_len, p->max_message_bytes);
        return SC_RELAY_TOO_LARGE;
    }
    struct sc_relay_trace tc;
    sc_relay_trace_of(o, &tc, 1);
    o->built_us = sc_now_us();
    /* `data` is the payload text exactly as the server returned it (checked
     * above to be one JSON value, never re-encoded: numbers keep their
     * digits), so the body is assembled as text. The attributes are
     * written as JSON in both modes: that is also the check that each text
     * field is UTF-8, which a header must be too. */
    struct text t = {0};
    char num[32];
    snprintf(num, sizeof num, "%lld", o->version);
    int bad = 0;
    append_raw(&t, "{\"specversion\":\"1.0\",\"id\":");
    bad |= append_json_string(&t, o->event_id);
    append_raw(&t, ",\"type\":");
    bad |= append_json_string(&t, o->event_type);
    append_raw(&t, ",\"source\":");
    bad |= append_json_string(&t, o->aggregate_type);
    append_raw(&t, ",\"subject\":");
    bad |= append_json_string(&t, o->aggregate_id);
    append_raw(&t, ",\"time\":");
    bad |= append_json_string(&t, o->time);
    append_raw(&t, ",\"eventversion\":");
    append_raw(&t, num);
    if (o->tenant) { /* with tenants: the extension attribute tenants.key can name */
        append_raw(&t, ",\"tenant\":");
        bad |= append_json_string(&t, o->tenant);
    }
    if (tc.traceparent) {
        append_raw(&t, ",\"traceparent\":");
        bad |= append_json_string(&t, tc.traceparent);
    }
    if (tc.tracestate) {
        append_raw(&t, ",\"tracestate\":");
        bad |= append_json_string(&t, tc.tracestate);
    }
    append_raw(&t, ",\"datacontenttype\":\"application/json\",\"data\":");
    append_raw(&t, o->payload);
    append_raw(&t, "}");
    if (t.failed || bad) {
        free(t.b);
        if (t.failed)
            return SC_RELAY_NO_MEMORY;
        snprintf(why, why_len, "a text field is not UTF-8");
        return SC_RELAY_INVALID;
    }
    memset(&o->props, 0, sizeof o->props);
    o->props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
                      AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_TYPE_FLAG;
    o->props.delivery_mode = AMQP_DELIVERY_PERSISTENT;
    o->props.message_id = amqp_cstring_bytes(o->event_id);
    o->props.type = amqp_cstring_bytes(o->event_type);
    set_ordering_key(o);
    memset(m, 0, sizeof *m);
    if (p->binary) {
        /* The payload itself is the body: a reader that knows nothing of
         * CloudEvents gets its plain JSON. */
        free(t.b);
        o->props.content_type = amqp_cstring_bytes("application/json");
        binary_headers(o, &tc);
        m->body.bytes = o->payload;
        m->body.len = strlen(o->payload);
    } else {
        o->body = t.b;
        o->props.content_type = amqp_cstring_bytes("application/cloudevents+json");
        m->body.bytes = o->body;
        m->body.len = t.len;
    }
    m->exchange = p->exchange;
    m->routing_key = o->event_type;
    m->props = &o->props;
    m->mandatory = 1;
    if (m->body.len > (size_t)p->max_message_bytes) {
        snprintf(why, why_len, "the message is %zu bytes, above relay.max_message_bytes (%d): not sent",
                 m->body.len, p->max_message_bytes);
        return SC_RELAY_TOO_LARGE; /* row->body is freed with the row */
    }
    return SC_RELAY_BUILT;
}

void sc_relay_row_clear(struct sc_relay_row *o)
{
    free(o->aggregate_type);
    free(o->aggregate_id);
    free(o->event_type);
    free(o->payload);
    free(o->tracestate);
    free(o->body);
    memset(o, 0, sizeof *o);
}
