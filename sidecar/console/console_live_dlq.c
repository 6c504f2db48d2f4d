/* The console's broker reads made for one request: a page of a
 * dead-letter queue, and a search of every dead-letter queue for an id.
 * Each is bounded: it looks at most DLQ_WINDOW messages of a queue, without
 * acking them, and cuts every body to a stated size. With a tenant chosen
 * both keep only the dead letters whose x-sidecar-tenant header names it
 * (a page then counts the tenant's dead letters, in queue order, and says
 * whether the window holds more of them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console.h"
#include "console_text.h"
#include "admin/dlq_browse.h"
#include "consume/republish.h"
#include "envelope/sidecar_headers.h"
#include "envelope/uuid_text.h"
#include "io/amqp_conn.h"
#include "io/sc_rabbitmq.h"

#define DLQ_WINDOW 1000      /* the deepest message a DLQ page or search reaches */
#define DLQ_PAGE_MAX 100
#define BODY_SHOWN 65536     /* bytes of a dead-lettered body in a page */
#define HIT_BODY_SHOWN 16384 /* in a search's hit (up to 20 of them) */

/* A header's value as text (strings, integers, else the type). */
static json_t *header_value(const amqp_field_value_t *v)
{
    char buf[64];
    switch (v->kind) {
    case AMQP_FIELD_KIND_UTF8:
    case AMQP_FIELD_KIND_BYTES:
        return sc_console_text_json(v->value.bytes.bytes, v->value.bytes.len);
    case AMQP_FIELD_KIND_I8: snprintf(buf, sizeof buf, "%d", v->value.i8); break;
    case AMQP_FIELD_KIND_U8: snprintf(buf, sizeof buf, "%u", v->value.u8); break;
    case AMQP_FIELD_KIND_I16: snprintf(buf, sizeof buf, "%d", v->value.i16); break;
    case AMQP_FIELD_KIND_U16: snprintf(buf, sizeof buf, "%u", v->value.u16); break;
    case AMQP_FIELD_KIND_I32: snprintf(buf, sizeof buf, "%d", v->value.i32); break;
    case AMQP_FIELD_KIND_U32: snprintf(buf, sizeof buf, "%u", v->value.u32); break;
    case AMQP_FIELD_KIND_I64: snprintf(buf, sizeof buf, "%lld", (long long)v->value.i64); break;
    case AMQP_FIELD_KIND_U64:
    case AMQP_FIELD_KIND_TIMESTAMP:
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)v->value.u64);
        break;
    case AMQP_FIELD_KIND_BOOLEAN: snprintf(buf, sizeof buf, "%s", v->value.boolean ? "true" : "false"); break;
    case AMQP_FIELD_KIND_TABLE: snprintf(buf, sizeof buf, "(table)"); break;
    case AMQP_FIELD_KIND_ARRAY: snprintf(buf, sizeof buf, "(array)"); break;
    default: snprintf(buf, sizeof buf, "(value)"); break;
    }
    return json_string(buf);
}

/* The event id a dead letter carries, as `sidecar dlq list` shows it (and
 * `dlq replay --id` finds it by): admin/dlq_browse.h. */
static json_t *message_event_id(const amqp_message_t *m, const struct sc_consumer_config *k)
{
    char id[72], *raw;
    sc_dlq_event_id(m, k, id, &raw);
    free(raw);
    return id[0] ? sc_console_text_json((const unsigned char *)id, strlen(id)) : json_null();
}

static json_t *message_json(const amqp_message_t *m, const struct sc_consumer_config *owner,
                            int position, size_t body_max)
{
    const amqp_basic_properties_t *p = &m->properties;
    json_t *o = json_object(), *headers = json_object();
    json_object_set_new(o, "position", json_integer(position));
    json_object_set_new(o, "event_id", message_event_id(m, owner));
    json_object_set_new(o, "message_id",
                        (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG)
                            ? sc_console_text_json(p->message_id.bytes, p->message_id.len)
                            : json_null());
    json_object_set_new(o, "content_type",
                        (p->_flags & AMQP_BASIC_CONTENT_TYPE_FLAG)
                            ? sc_console_text_json(p->content_type.bytes, p->content_type.len)
                            : json_null());
    static const struct {
        const char *header, *field;
    } known[] = {{SC_H_REASON, "reason"}, {SC_H_ATTEMPTS, "attempts"},
                 {SC_H_FAILED_AT, "failed_at"}, {SC_H_CONSUMER, "consumer"},
                 {SC_H_ORIG_EXCHANGE, "original_exchange"},
                 {SC_H_ORIG_ROUTING_KEY, "original_routing_key"}};
    for (size_t k = 0; k < sizeof known / sizeof *known; k++)
        json_object_set_new(o, known[k].field, json_null());
    if (p->_flags & AMQP_BASIC_HEADERS_FLAG)
        for (int i = 0; i < p->headers.num_entries && i < 64; i++) {
            const amqp_table_entry_t *e = &p->headers.entries[i];
            char key[256];
            snprintf(key, sizeof key, "%.*s", (int)(e->key.len < 255 ? e->key.len : 255),
                     (const char *)e->key.bytes);
            json_t *v = header_value(&e->value);
            for (size_t k = 0; k < sizeof known / sizeof *known; k++)
                if (strcmp(key, known[k].header) == 0)
                    json_object_set(o, known[k].field, v);
            /* a key that is not UTF-8 is shown by the replacement form */
            json_t *kj = sc_console_text_json((const unsigned char *)key, strlen(key));
            if (json_is_string(kj))
                json_object_set(headers, json_string_value(kj), v);
            json_decref(kj);
            json_decref(v);
        }
    json_object_set_new(o, "headers", headers);
    size_t shown = m->body.len < body_max ? m->body.len : body_max;
    json_object_set_new(o, "body", sc_console_text_json(m->body.bytes, shown));
    json_object_set_new(o, "body_bytes", json_integer((json_int_t)m->body.len));
    json_object_set_new(o, "body_truncated", json_boolean(m->body.len > shown));
    return o;
}

/* 1 when m's x-sidecar-tenant header is tenant (or no tenant is asked). */
static int of_tenant(const amqp_message_t *m, const char *tenant)
{
    if (!tenant)
        return 1;
    const amqp_basic_properties_t *p = &m->properties;
    if (!(p->_flags & AMQP_BASIC_HEADERS_FLAG))
        return 0;
    size_t n = strlen(tenant), hl = strlen(SC_H_TENANT);
    for (int i = 0; i < p->headers.num_entries; i++) {
        const amqp_table_entry_t *e = &p->headers.entries[i];
        if (e->key.len != hl || memcmp(e->key.bytes, SC_H_TENANT, hl) != 0)
            continue;
        const amqp_field_value_t *v = &e->value;
        return (v->kind == AMQP_FIELD_KIND_UTF8 || v->kind == AMQP_FIELD_KIND_BYTES) &&
               v->value.bytes.len == n && memcmp(v->value.bytes.bytes, tenant, n) == 0;
    }
    return 0;
}

/* Looks at the first `window` messages of queue without acking them (they
 * go back when the connection closes): each is passed to visit, which
 * returns 1 to stop early. Returns the number looked at, or -1 with err. */
static int browse(struct sc_amqp *a, const char *queue, int window,
                  int (*visit)(const amqp_message_t *m, int position, void *arg), void *arg,
                  char *err, size_t err_len)
{
    int n = 0;
    while (n < window) {
        amqp_rpc_reply_t r = amqp_basic_get(a->conn, SC_AMQP_CHANNEL, amqp_cstring_bytes(queue), 0);
        if (r.reply_type != AMQP_RESPONSE_NORMAL) {
            if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION && r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
                amqp_channel_close_t *m = r.reply.decoded;
                snprintf(err, err_len, "basic.get on %s: %.*s", queue, (int)m->reply_text.len,
                         (const char *)m->reply_text.bytes);
            } else {
                snprintf(err, err_len, "basic.get on %s: %s", queue,
                         r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION
                             ? amqp_error_string2(r.library_error) : "the broker closed the connection");
            }
            return -1;
        }
        if (r.reply.id == AMQP_BASIC_GET_EMPTY_METHOD)
            break;
        amqp_message_t msg;
        r = amqp_read_message(a->conn, SC_AMQP_CHANNEL, &msg, 0);
        if (r.reply_type != AMQP_RESPONSE_NORMAL) {
            snprintf(err, err_len, "reading a message of %s failed", queue);
            return -1;
        }
        int stop = visit(&msg, n, arg);
        amqp_destroy_message(&msg);
        amqp_maybe_release_buffers(a->conn);
        n++;
        if (stop)
            break;
    }
    return n;
}

struct page {
    int offset, limit;
    json_t *list;
    const struct sc_consumer_config *k;
    const char *tenant;
    int matched; /* the tenant's dead letters seen so far */
    int more;    /* one more of them past the page */
};

/* Without a tenant the page is positions [offset, offset + limit); with one
 * it is the tenant's dead letters number offset to offset + limit - 1, and
 * one more is looked for to say whether a next page exists. */
static int visit_page(const amqp_message_t *m, int position, void *arg)
{
    struct page *pg = arg;
    if (!of_tenant(m, pg->tenant))
        return 0;
    int nth = pg->matched++;
    if (nth >= pg->offset + pg->limit) {
        pg->more = 1;
        return 1;
    }
    if (nth >= pg->offset)
        json_array_append_new(pg->list, message_json(m, pg->k, position, BODY_SHOWN));
    return !pg->tenant && nth + 1 >= pg->offset + pg->limit;
}

/* A broker connection for one request, or NULL with *out set (busy or
 * unreachable: 503). */
static int amqp_open(struct sc_console *con, struct sc_amqp *a, json_t **out, unsigned *status)
{
    if (atomic_fetch_add(&con->amqp_busy, 1) >= SC_CONSOLE_AMQP_SLOTS) {
        atomic_fetch_sub(&con->amqp_busy, 1);
        *status = 503;
        *out = json_pack("{s:s}", "error", "broker: this console's other requests are still "
                                           "waiting for it (slow or not answering); try again");
        return -1;
    }
    char err[400];
    memset(a, 0, sizeof *a);
    if (sc_amqp_connect(a, &con->cfg_short, "sidecar console dlq", err, sizeof err)) {
        atomic_fetch_sub(&con->amqp_busy, 1);
        char msg[500];
        snprintf(msg, sizeof msg, "broker: %s", err);
        *status = 503;
        *out = json_pack("{s:s}", "error", msg);
        return -1;
    }
    return 0;
}

static void amqp_done(struct sc_console *con, struct sc_amqp *a)
{
    sc_amqp_close(a); /* every message looked at goes back to its queue */
    atomic_fetch_sub(&con->amqp_busy, 1);
}

json_t *sc_console_dlq(struct sc_console *con, const char *consumer, const char *tenant, int offset,
                       int limit, unsigned *status)
{
    const struct sc_consumer_config *k = consumer ? sc_config_consumer(con->cfg, consumer) : NULL;
    if (!k) {
        *status = 404;
        return json_pack("{s:s}", "error", "consumer: not a consumer of the console's config");
    }
    if (limit < 1 || limit > DLQ_PAGE_MAX)
        limit = limit < 1 ? 20 : DLQ_PAGE_MAX;
    if (offset < 0)
        offset = 0;
    if (offset + limit > DLQ_WINDOW) {
        *status = 400;
        return json_pack("{s:s, s:i}", "error", "the console pages through the first 1000 dead "
                         "letters of a queue; use `sidecar dlq list` for the rest", "window", DLQ_WINDOW);
    }
    struct sc_amqp a;
    json_t *out;
    if (amqp_open(con, &a, &out, status))
        return out;
    char err[400] = "";
    struct page pg = {.offset = offset, .limit = limit, .list = json_array(), .k = k, .tenant = tenant};
    /* The depth first: the page says "51-100 of N". */
    amqp_queue_declare_ok_t *d = amqp_queue_declare(a.conn, SC_AMQP_CHANNEL,
                                                    amqp_cstring_bytes(k->dead_letter_queue), 1, 0,
                                                    0, 0, amqp_empty_table);
    long long depth = d ? (long long)d->message_count : -1;
    int n = d ? browse(&a, k->dead_letter_queue, tenant ? DLQ_WINDOW : offset + limit, visit_page,
                       &pg, err, sizeof err) : -1;
    if (!d)
        snprintf(err, sizeof err, "queue %s cannot be read (does it exist? may this user read it?)",
                 k->dead_letter_queue);
    amqp_done(con, &a);
    if (n < 0) {
        json_decref(pg.list);
        char msg[500];
        snprintf(msg, sizeof msg, "broker: %s", err);
        *status = 502;
        return json_pack("{s:s}", "error", msg);
    }
    *status = 200;
    json_t *o = json_pack("{s:s, s:s, s:I, s:i, s:i, s:i, s:o}", "consumer", k->name, "queue",
                          k->dead_letter_queue, "depth", (json_int_t)depth, "offset", offset,
                          "limit", limit, "window", DLQ_WINDOW, "messages", pg.list);
    json_object_set_new(o, "tenant", tenant ? json_string(tenant) : json_null());
    if (tenant) {
        json_object_set_new(o, "looked_at", json_integer(n));
        json_object_set_new(o, "more", json_boolean(pg.more));
    }
    return o;
}

struct find {
    char canon[37];
    int is_uuid;
    const char *id;
    json_t *hits;
    const struct sc_consumer_config *k;
    const char *tenant;
};

/* The id the logs show, the id as the message wrote it, or the message_id. */
static int visit_find(const amqp_message_t *m, int position, void *arg)
{
    struct find *f = arg;
    if (!of_tenant(m, f->tenant))
        return 0;
    char eid[72], *raw, c[37];
    sc_dlq_event_id(m, f->k, eid, &raw);
    const char *want = f->is_uuid ? f->canon : f->id;
    int hit = eid[0] && strcmp(eid, want) == 0;
    if (!hit && raw)
        hit = f->is_uuid ? sc_uuid_canonical(raw, strlen(raw), c) == 0 && strcmp(c, f->canon) == 0
                         : strcmp(raw, f->id) == 0;
    free(raw);
    if (!hit && (m->properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG))
        hit = m->properties.message_id.len == strlen(f->id) &&
              memcmp(m->properties.message_id.bytes, f->id, strlen(f->id)) == 0;
    if (hit && json_array_size(f->hits) < 20)
        json_array_append_new(f->hits, message_json(m, f->k, position, HIT_BODY_SHOWN));
    return 0;
}

json_t *sc_console_dlq_find(struct sc_console *con, const char *id, const char *tenant,
                            unsigned *status)
{
    if (!id || !id[0] || strlen(id) > 255) {
        *status = 400;
        return json_pack("{s:s}", "error", "id: an event id or a message id");
    }
    struct sc_amqp a;
    json_t *out;
    if (amqp_open(con, &a, &out, status))
        return out;
    struct find f = {.id = id, .hits = json_array(), .tenant = tenant};
    f.is_uuid = sc_uuid_canonical(id, strlen(id), f.canon) == 0;
    json_t *searched = json_array(), *errors = json_array();
    for (size_t i = 0; i < con->cfg->n_consumers; i++) {
        const struct sc_consumer_config *k = &con->cfg->consumers[i];
        f.k = k;
        char err[400] = "";
        size_t before = json_array_size(f.hits);
        int n = browse(&a, k->dead_letter_queue, DLQ_WINDOW, visit_find, &f, err, sizeof err);
        for (size_t h = before; h < json_array_size(f.hits); h++)
            json_object_set_new(json_array_get(f.hits, h), "dlq_consumer", json_string(k->name));
        if (n < 0) {
            json_array_append_new(errors, json_string(err));
            /* the channel is closed after a refusal: start again */
            sc_amqp_close(&a);
            if (sc_amqp_connect(&a, &con->cfg_short, "sidecar console dlq", err, sizeof err))
                break;
            continue;
        }
        json_array_append_new(searched, json_pack("{s:s, s:s, s:i}", "consumer", k->name, "queue",
                                                  k->dead_letter_queue, "looked_at", n));
    }
    amqp_done(con, &a);
    *status = 200;
    return json_pack("{s:s, s:o, s:o, s:o, s:i, s:o}", "query", id, "hits", f.hits, "searched",
                     searched, "errors", errors, "window", DLQ_WINDOW, "tenant",
                     tenant ? json_string(tenant) : json_null());
}
