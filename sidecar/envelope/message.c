#include "message.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "envelope/attributes.h"
#include "envelope/ce_rules.h"
#include "json_span.h"

void sc_media_type(const amqp_basic_properties_t *p, char *out, size_t len)
{
    out[0] = 0;
    if (!p || !(p->_flags & AMQP_BASIC_CONTENT_TYPE_FLAG) || len == 0)
        return;
    const char *s = p->content_type.bytes;
    size_t n = p->content_type.len, a = 0, o = 0;
    while (a < n && (s[a] == ' ' || s[a] == '\t'))
        a++;
    for (; a < n && s[a] != ';' && o + 1 < len; a++)
        out[o++] = (char)(s[a] >= 'A' && s[a] <= 'Z' ? s[a] + 32 : s[a]);
    while (o > 0 && (out[o - 1] == ' ' || out[o - 1] == '\t'))
        o--;
    out[o] = 0;
}

int sc_media_type_is_json(const char *t)
{
    return sc_ce_media_type_is_json(t, strlen(t));
}

struct sc_envelope_opts sc_envelope_opts_for(const struct sc_consumer_config *k)
{
    return (struct sc_envelope_opts){.plain = k->envelope && strcmp(k->envelope, "plain") == 0,
                                     .plain_source = k->plain_source,
                                     .plain_subject = k->plain_subject};
}

int sc_message_is_batch(const amqp_basic_properties_t *p)
{
    char t[64];
    sc_media_type(p, t, sizeof t);
    return strcmp(t, SC_CT_BATCH) == 0;
}

const amqp_field_value_t *sc_envelope_header(const struct sc_message *m, const char *key)
{
    const amqp_basic_properties_t *p = m->props;
    if (!p || !(p->_flags & AMQP_BASIC_HEADERS_FLAG))
        return NULL;
    size_t klen = strlen(key);
    for (int i = 0; i < p->headers.num_entries; i++) {
        const amqp_table_entry_t *e = &p->headers.entries[i];
        if (e->key.len == klen && memcmp(e->key.bytes, key, klen) == 0)
            return &e->value;
    }
    return NULL;
}

int sc_envelope_integer(const amqp_field_value_t *f, int64_t *v)
{
    switch (f->kind) {
    case AMQP_FIELD_KIND_I8: *v = f->value.i8; return 1;
    case AMQP_FIELD_KIND_U8: *v = f->value.u8; return 1;
    case AMQP_FIELD_KIND_I16: *v = f->value.i16; return 1;
    case AMQP_FIELD_KIND_U16: *v = f->value.u16; return 1;
    case AMQP_FIELD_KIND_I32: *v = f->value.i32; return 1;
    case AMQP_FIELD_KIND_U32: *v = f->value.u32; return 1;
    case AMQP_FIELD_KIND_I64: *v = f->value.i64; return 1;
    case AMQP_FIELD_KIND_U64:
        if (f->value.u64 > INT64_MAX)
            return 0;
        *v = (int64_t)f->value.u64;
        return 1;
    default:
        return 0;
    }
}

void sc_envelope_time(uint64_t seconds, char *out, size_t len)
{
    struct tm tm;
    time_t t = (time_t)seconds;
    if ((uint64_t)t != seconds || !gmtime_r(&t, &tm) || !strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(out, len, "%llu", (unsigned long long)seconds); /* then refused as a time */
}

const char *sc_message_mode_name(enum sc_message_mode m)
{
    static const char *const names[] = {[SC_MODE_STRUCTURED] = "structured",
                                        [SC_MODE_BINARY] = "binary", [SC_MODE_BATCH] = "batch",
                                        [SC_MODE_PLAIN] = "plain"};
    return names[m];
}

/* A batch: the members' spans, each checked to be there; what each member
 * is, is its own parse's business. */
static int open_batch(const struct sc_message *m, struct sc_message_events *out, char *reason,
                      size_t reason_len)
{
    const char *body = m->body.bytes ? m->body.bytes : ""; /* an empty body may have none */
    long n = sc_json_array_spans(body, m->body.len, NULL, 0);
    if (n < 0) {
        snprintf(reason, reason_len, "body is not a JSON array (content type %s)", SC_CT_BATCH);
        return -1;
    }
    if (n == 0)
        return 0; /* "[]": a valid batch (JSON format 4.3) with nothing to do */
    if (n > SC_MESSAGE_BATCH_MAX) {
        snprintf(reason, reason_len, "batch of %ld events is more than %d", n,
                 SC_MESSAGE_BATCH_MAX);
        return -1;
    }
    if (!(out->spans = malloc((size_t)n * sizeof *out->spans))) {
        snprintf(reason, reason_len, "out of memory");
        return -1;
    }
    sc_json_array_spans(body, m->body.len, out->spans, (size_t)n);
    out->n = (int)n;
    return 0;
}

int sc_message_open(const struct sc_message *m, const struct sc_envelope_opts *o,
                    struct sc_message_events *out, char *reason, size_t reason_len)
{
    memset(out, 0, sizeof *out);
    out->n = 1;
    if (o && o->plain) {
        out->mode = SC_MODE_PLAIN;
        return 0;
    }
    char type[256];
    sc_media_type(m->props, type, sizeof type);
    if (strcmp(type, SC_CT_BATCH) == 0) {
        out->mode = SC_MODE_BATCH;
        out->n = 0;
        return open_batch(m, out, reason, reason_len);
    }
    if (strncmp(type, "application/cloudevents", 23) == 0 && strcmp(type, SC_CT_STRUCTURED) != 0) {
        snprintf(reason, reason_len, "content type '%.100s' is not a CloudEvents JSON format "
                 "(%s or %s)", type, SC_CT_STRUCTURED, SC_CT_BATCH);
        return -1;
    }
    /* AMQP binding 3: a content type prefixed with application/cloudevents
     * is structured mode, anything else binary mode. One exception, kept
     * from the contract's first versions: a message with no content type at
     * all and no CloudEvents header is a structured event (producers that set
     * no properties); an application/json one without headers is binary. */
    if (strcmp(type, SC_CT_STRUCTURED) == 0 || (!type[0] && sc_binary_prefix(m) < 0))
        out->mode = SC_MODE_STRUCTURED;
    else
        out->mode = SC_MODE_BINARY;
    return 0;
}

int sc_message_event(const struct sc_message *m, const struct sc_envelope_opts *o,
                     const struct sc_message_events *evs, int i, struct sc_parsed_event *out,
                     char *reason, size_t reason_len)
{
    const amqp_basic_properties_t *p = m->props;
    const char *mid = p && (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG) ? p->message_id.bytes : NULL;
    size_t mid_len = mid ? p->message_id.len : 0;
    memset(out, 0, sizeof *out);
    switch (evs->mode) {
    case SC_MODE_PLAIN:
        return sc_event_parse_plain(m, o, out, reason, reason_len);
    case SC_MODE_BINARY:
        return sc_event_parse_binary(m, sc_binary_prefix(m), out, reason, reason_len);
    case SC_MODE_BATCH: {
        /* A member is a structured event; the message's message_id (if any)
         * names the batch, not the member. */
        const char *b = (const char *)m->body.bytes + evs->spans[i][0];
        return sc_event_parse(b, evs->spans[i][1] - evs->spans[i][0], NULL, 0, out, reason,
                              reason_len);
    }
    default:
        return sc_event_parse(m->body.bytes, m->body.len, mid, mid_len, out, reason, reason_len);
    }
}

void sc_message_events_free(struct sc_message_events *e)
{
    free(e->spans);
    e->spans = NULL;
}
