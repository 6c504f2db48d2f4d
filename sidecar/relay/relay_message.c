#include "relay_message.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envelope/json_span.h"
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

/* Header x-ordering-key = aggregate_id on every message, whatever the
 * ordering: what a consistent-hash exchange partitions by, so one
 * aggregate's events stay on one ordered queue. */
static void set_ordering_key(struct sc_relay_row *o)
{
    o->ordering_key.key = amqp_cstring_bytes("x-ordering-key");
    o->ordering_key.value.kind = AMQP_FIELD_KIND_UTF8;
    o->ordering_key.value.value.bytes = amqp_cstring_bytes(o->aggregate_id);
    o->props._flags |= AMQP_BASIC_HEADERS_FLAG;
    o->props.headers.num_entries = 1;
    o->props.headers.entries = &o->ordering_key;
}

enum sc_relay_build sc_relay_message_build(struct sc_relay_row *o, const char *exchange,
                                           struct sc_publish *m, char *why, size_t why_len)
{
    int rule = sc_rules_event_check(o->event_id, o->aggregate_type, o->aggregate_id, o->event_type,
                                    o->payload, why, why_len);
    if (rule < 0)
        return SC_RELAY_NO_MEMORY;
    if (rule == 0)
        return SC_RELAY_INVALID;
    /* `data` is the payload text exactly as the server returned it (checked
     * above to be one JSON value, never re-encoded: numbers keep their
     * digits), so the body is assembled as text. */
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
    o->body = t.b;
    memset(&o->props, 0, sizeof o->props);
    o->props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
                      AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_TYPE_FLAG;
    o->props.content_type = amqp_cstring_bytes("application/cloudevents+json");
    o->props.delivery_mode = AMQP_DELIVERY_PERSISTENT;
    o->props.message_id = amqp_cstring_bytes(o->event_id);
    o->props.type = amqp_cstring_bytes(o->event_type);
    set_ordering_key(o);
    memset(m, 0, sizeof *m);
    m->exchange = exchange;
    m->routing_key = o->event_type;
    m->props = &o->props;
    m->body.bytes = o->body;
    m->body.len = t.len;
    m->mandatory = 1;
    return SC_RELAY_BUILT;
}

void sc_relay_row_clear(struct sc_relay_row *o)
{
    free(o->aggregate_type);
    free(o->aggregate_id);
    free(o->event_type);
    free(o->payload);
    free(o->body);
    memset(o, 0, sizeof *o);
}
