/* The console's reads made for one request: outbox rows of a status, one
 * event, one aggregate, a page of a dead-letter queue. Each is bounded: a
 * page holds at most PAGE_MAX rows read through one index range in the
 * index's order (keyset pagination: the cursor is the last row's sort key,
 * so page 1,000 costs what page 1 costs), a DLQ page looks at most
 * DLQ_WINDOW messages, and every text cell is cut to a stated size. */
#include <amqp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/admin_aggregate.h"
#include "admin/admin_effects.h"
#include "admin/admin_rows.h"
#include "console.h"
#include "consume/republish.h"
#include "envelope/uuid_text.h"
#include "io/amqp_conn.h"
#include "io/db_rows.h"
#include "relay/outbox_rules.h"

#define PAGE_MAX 200
#define DLQ_WINDOW 1000      /* the deepest message a DLQ page or search reaches */
#define DLQ_PAGE_MAX 100
#define BODY_SHOWN 65536     /* bytes of a dead-lettered body in a reply */
#define PAYLOAD_SHOWN 16384  /* bytes of an outbox payload in a reply */
#define PAYLOAD_CHECKED (1 << 20)

json_t *sc_console_db_error(const char *what, const struct sc_db_err *e, unsigned *status)
{
    char msg[700];
    snprintf(msg, sizeof msg, "database: %s: error %u: %s", what, e->code, e->msg);
    *status = e->cls == SC_DBERR_CONNECTION || e->code >= 2000 ? 503 : 500;
    return json_pack("{s:s}", "error", msg);
}

struct sc_db *sc_console_db_get(struct sc_console *con, int *slot, json_t **err,
                                unsigned *status)
{
    struct sc_console_pool *p = &con->pool;
    int i;
    pthread_mutex_lock(&p->lock);
    for (i = 0; i < SC_CONSOLE_DB_SLOTS && (p->busy[i] || !sc_db_connected(&p->db[i])); i++)
        ;
    if (i == SC_CONSOLE_DB_SLOTS) /* no idle session: a free slot to connect in */
        for (i = 0; i < SC_CONSOLE_DB_SLOTS && p->busy[i]; i++)
            ;
    if (i < SC_CONSOLE_DB_SLOTS)
        p->busy[i] = 1;
    pthread_mutex_unlock(&p->lock);
    if (i == SC_CONSOLE_DB_SLOTS) {
        *status = 503;
        *err = json_pack("{s:s}", "error",
                         "database: " "4" " requests of this console are already waiting for it "
                         "(slow or not answering); try again");
        return NULL;
    }
    if (!sc_db_connected(&p->db[i])) {
        struct sc_db_err e = {0};
        if (sc_db_connect(&p->db[i], &con->cfg_short, &e)) {
            *err = sc_console_db_error("connect", &e, status);
            *status = 503;
            pthread_mutex_lock(&p->lock);
            p->busy[i] = 0;
            pthread_mutex_unlock(&p->lock);
            return NULL;
        }
        sc_console_db_session(&p->db[i]);
    }
    *slot = i;
    return &p->db[i];
}

void sc_console_db_put(struct sc_console *con, int slot, int broken)
{
    struct sc_console_pool *p = &con->pool;
    struct sc_db_err e = {0};
    if (broken || sc_db_rollback(&p->db[slot], &e))
        sc_db_close(&p->db[slot]);
    pthread_mutex_lock(&p->lock);
    p->busy[slot] = 0;
    pthread_mutex_unlock(&p->lock);
}

static int broken_by(const struct sc_db_err *e)
{
    return e->cls == SC_DBERR_CONNECTION || e->code >= 2000;
}

/* Bytes as a JSON string: invalid UTF-8 becomes U+FFFD, so any body can be
 * shown (as text, by the page). */
static json_t *text_json(const unsigned char *s, size_t len)
{
    char *buf = malloc(len * 3 + 1);
    if (!buf)
        return json_null();
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        unsigned char c = s[i];
        size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        int good = n > 0 && i + n <= len;
        for (size_t k = 1; good && k < n; k++)
            good = (s[i + k] & 0xC0) == 0x80;
        if (good && n == 2 && c < 0xC2)
            good = 0; /* overlong */
        if (good && n == 3) {
            unsigned cp = ((c & 0x0Fu) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu);
            good = cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF);
        }
        if (good && n == 4) {
            unsigned cp = ((c & 0x07u) << 18) | ((s[i + 1] & 0x3Fu) << 12) |
                          ((s[i + 2] & 0x3Fu) << 6) | (s[i + 3] & 0x3Fu);
            good = cp >= 0x10000 && cp <= 0x10FFFF;
        }
        if (good) {
            memcpy(buf + o, s + i, n);
            o += n;
            i += n;
        } else {
            memcpy(buf + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    json_t *j = json_stringn(buf, o);
    free(buf);
    return j ? j : json_null();
}

/* ---- outbox rows ---------------------------------------------------------- */

json_t *sc_console_outbox_rows(struct sc_console *con, const char *status_name,
                               const char *after, int limit, unsigned *status)
{
    static const char *const allowed[] = {"PENDING", "PUBLISHING", "FAILED", "PUBLISHED"};
    const char *st = NULL;
    for (size_t i = 0; i < sizeof allowed / sizeof *allowed; i++)
        if (status_name && strcmp(status_name, allowed[i]) == 0)
            st = allowed[i];
    if (!st) {
        *status = 400;
        return json_pack("{s:s}", "error", "status: one of PENDING, PUBLISHING, FAILED, PUBLISHED");
    }
    if (limit < 1 || limit > PAGE_MAX)
        limit = limit < 1 ? 50 : PAGE_MAX;
    int leases = strcmp(st, "PUBLISHING") == 0, failed = strcmp(st, "FAILED") == 0;
    /* The cursor: the last row's sort key, "key,event_id". */
    char k[64], eid[64];
    int paged = sc_cursor_parse(after, k, sizeof k, eid, sizeof eid);
    const char *key = leases ? "lease_until" : "created_at";
    char sql[1400];
    /* PUBLISHING in lease order (ix_outbox_event_lease: status, lease_until,
     * then the primary key), the others in creation order
     * (ix_outbox_event_claim: status, created_at, event_id). The other
     * columns are read for the page's rows only. */
    snprintf(sql, sizeof sql,
             "SELECT event_id, aggregate_type, aggregate_id, event_type, event_version, status, "
             SC_SQL_TSF("created_at") " AS created, lease_owner, " SC_SQL_TSF("lease_until") " AS lease, "
             "publish_attempts, " SC_SQL_TSF("published_at") " AS published, %s AS sort_key%s "
             "FROM outbox_event FORCE INDEX (%s) WHERE status = ?%s%s%s%s "
             "ORDER BY %s, event_id LIMIT %d",
             key, failed ? ", payload" : "", leases ? "ix_outbox_event_lease" : "ix_outbox_event_claim",
             paged ? " AND (" : "", paged ? key : "", paged ? " > ? OR (" : "",
             paged ? (leases ? "lease_until = ? AND event_id > ?))" : "created_at = ? AND event_id > ?))") : "",
             key, limit + 1);
    const char *params[4] = {st, k, k, eid};
    int slot;
    json_t *err;
    struct sc_db *db = sc_console_db_get(con, &slot, &err, status);
    if (!db)
        return err;
    struct sc_rows rows;
    struct sc_db_err e = {0};
    if (sc_db_select_params(db, sql, params, paged ? 4 : 1, (size_t)limit + 1,
                            failed ? PAYLOAD_CHECKED + 1 : 0, &rows, &e)) {
        sc_console_db_put(con, slot, broken_by(&e));
        return sc_console_db_error("outbox rows", &e, status);
    }
    sc_console_db_put(con, slot, 0);
    size_t n = rows.n_rows > (size_t)limit ? (size_t)limit : rows.n_rows;
    json_t *list = json_array();
    for (size_t r = 0; r < n; r++) {
        json_t *o = json_object();
        static const char *const text_cols[] = {"event_id", "aggregate_type", "aggregate_id",
                                                "event_type", "status", "lease_owner"};
        for (size_t c = 0; c < sizeof text_cols / sizeof *text_cols; c++)
            json_object_set_new(o, text_cols[c], sc_cell_text(&rows, r, text_cols[c]));
        json_object_set_new(o, "event_version", sc_cell_int(&rows, r, "event_version"));
        json_object_set_new(o, "publish_attempts", sc_cell_int(&rows, r, "publish_attempts"));
        json_object_set_new(o, "created_at", sc_cell_text(&rows, r, "created"));
        json_object_set_new(o, "lease_until", sc_cell_text(&rows, r, "lease"));
        json_object_set_new(o, "published_at", sc_cell_text(&rows, r, "published"));
        if (failed) {
            /* The reason is the relay's own rule, applied to the row as it
             * is now (the relay logs it; the row has no column for it). */
            int pc = sc_rows_col(&rows, "payload");
            const char *payload = sc_rows_get(&rows, r, (size_t)pc);
            unsigned long plen = payload ? rows.lens[r * rows.n_cols + (size_t)pc] : 0;
            char why[300];
            if (plen > PAYLOAD_CHECKED)
                snprintf(why, sizeof why, "payload of %lu bytes: not checked here", plen);
            else if (sc_rules_event(sc_rows_get(&rows, r, 0), sc_rows_get(&rows, r, 1),
                                    sc_rows_get(&rows, r, 2), sc_rows_get(&rows, r, 3), payload,
                                    why, sizeof why))
                snprintf(why, sizeof why, "valid now (repaired?): set it PENDING to publish it");
            json_object_set_new(o, "reason", json_string(why));
            size_t shown = plen < PAYLOAD_SHOWN ? plen : PAYLOAD_SHOWN;
            json_object_set_new(o, "payload", payload ? text_json((const unsigned char *)payload, shown)
                                                      : json_null());
            json_object_set_new(o, "payload_bytes", json_integer((json_int_t)plen));
            json_object_set_new(o, "payload_truncated", json_boolean(plen > shown));
        }
        json_array_append_new(list, o);
    }
    json_t *next = json_null();
    if (rows.n_rows > (size_t)limit) {
        char cur[160];
        snprintf(cur, sizeof cur, "%s,%s", sc_rows_get(&rows, n - 1, (size_t)sc_rows_col(&rows, "sort_key")),
                 sc_rows_get(&rows, n - 1, 0));
        next = json_string(cur);
    }
    sc_rows_free(&rows);
    *status = 200;
    return json_pack("{s:s, s:i, s:o, s:o}", "status", st, "limit", limit, "rows", list, "next", next);
}

/* ---- one event ------------------------------------------------------------ */

json_t *sc_console_event(struct sc_console *con, const char *id, unsigned *status)
{
    char canon[37];
    size_t len = id ? strlen(id) : 0;
    while (len && (id[len - 1] == ' ' || id[len - 1] == '\n'))
        len--;
    while (len && (*id == ' ' || *id == '\n'))
        id++, len--;
    if (!len || len > 255) {
        *status = 400;
        return json_pack("{s:s}", "error", "id: an event id (a UUID in any spelling) or a message id");
    }
    if (sc_uuid_canonical(id, len, canon)) {
        /* Not a UUID: nothing in the database is keyed by it; the page
         * looks for it as a message id in the dead-letter queues. */
        *status = 200;
        return json_pack("{s:s%, s:b, s:b, s:s}", "query", id, len, "uuid", 0, "known", 0, "note",
                         "not a UUID: no outbox or consumed_event row can have this id; a message "
                         "that failed with it as message_id is in a dead-letter queue");
    }
    int slot;
    json_t *err;
    struct sc_db *db = sc_console_db_get(con, &slot, &err, status);
    if (!db)
        return err;
    struct sc_db_err e = {0};
    const char *p[1] = {canon};
    struct sc_rows rows;
    json_t *out = json_pack("{s:s%, s:s, s:b}", "query", id, len, "event_id", canon, "uuid", 1);
    int known = 0;
    if (sc_db_select_params(db,
            "SELECT status, lease_owner, " SC_SQL_TS("lease_until") " AS lease, " SC_SQL_TS("published_at")
            " AS published, event_type, event_version, aggregate_type, aggregate_id, "
            SC_SQL_TS("created_at") " AS created, publish_attempts, payload FROM outbox_event "
            "WHERE event_id = ?", p, 1, 1, PAYLOAD_SHOWN, &rows, &e))
        goto fail;
    if (rows.n_rows) {
        known = 1;
        json_t *o = json_object();
        static const char *const cols[] = {"status", "lease_owner", "event_type", "aggregate_type",
                                           "aggregate_id"};
        for (size_t c = 0; c < sizeof cols / sizeof *cols; c++)
            json_object_set_new(o, cols[c], sc_cell_text(&rows, 0, cols[c]));
        json_object_set_new(o, "lease_until", sc_cell_text(&rows, 0, "lease"));
        json_object_set_new(o, "published_at", sc_cell_text(&rows, 0, "published"));
        json_object_set_new(o, "created_at", sc_cell_text(&rows, 0, "created"));
        json_object_set_new(o, "event_version", sc_cell_int(&rows, 0, "event_version"));
        json_object_set_new(o, "publish_attempts", sc_cell_int(&rows, 0, "publish_attempts"));
        int pc = sc_rows_col(&rows, "payload");
        const char *payload = sc_rows_get(&rows, 0, (size_t)pc);
        unsigned long plen = payload ? rows.lens[(size_t)pc] : 0;
        size_t shown = plen < PAYLOAD_SHOWN ? plen : PAYLOAD_SHOWN;
        json_object_set_new(o, "payload", payload ? text_json((const unsigned char *)payload, shown)
                                                  : json_null());
        json_object_set_new(o, "payload_bytes", json_integer((json_int_t)plen));
        json_object_set_new(out, "outbox", o);
    } else {
        json_object_set_new(out, "outbox", json_null());
    }
    sc_rows_free(&rows);

    json_t *names = sc_consumer_names_json(db, con->cfg, &e);
    if (!names)
        goto fail;
    const char *ids[1] = {canon};
    json_t *consumed = sc_consumption_json(db, con->cfg, names, ids, 1, NULL, &e);
    json_decref(names);
    if (!consumed)
        goto fail;
    json_t *mine = json_object_get(consumed, canon);
    const char *name;
    json_t *at;
    json_object_foreach(mine, name, at)
        known |= json_is_string(at);
    json_object_set_new(out, "consumed", mine ? json_incref(mine) : json_object());
    json_decref(consumed);

    /* Each consumer's effect, where its inspect_effects names it (as
     * `sidecar inspect` shows it). */
    int gone = 0;
    json_t *effects = sc_inspect_effects_json(db, con->cfg, canon, &gone);
    if (!effects || gone) {
        /* The connection was lost at the last entry: its error is the page's. */
        json_t *er = json_object_get(json_array_get(effects, json_array_size(effects) - 1), "error");
        e.code = er ? (unsigned)json_integer_value(json_object_get(er, "code")) : 2008;
        snprintf(e.sqlstate, sizeof e.sqlstate, "%s",
                 er ? json_string_value(json_object_get(er, "sqlstate")) : "HY000");
        snprintf(e.msg, sizeof e.msg, "%s", er ? json_string_value(json_object_get(er, "message"))
                                               : "out of memory");
        e.cls = SC_DBERR_CONNECTION;
        json_decref(effects);
        goto fail;
    }
    size_t ei;
    json_t *x;
    json_array_foreach(effects, ei, x)
        known |= json_array_size(json_object_get(x, "rows")) > 0;
    json_object_set_new(out, "effects", effects);
    sc_console_db_put(con, slot, 0);
    json_object_set_new(out, "known", json_boolean(known));
    *status = 200;
    return out;
fail:
    sc_console_db_put(con, slot, broken_by(&e));
    json_decref(out);
    return sc_console_db_error("event", &e, status);
}

json_t *sc_console_aggregate(struct sc_console *con, const char *type, const char *id,
                             const char *after, int limit, unsigned *status)
{
    if (!type || !type[0] || !id || !id[0] || strlen(type) > 64 || strlen(id) > 64) {
        *status = 400;
        return json_pack("{s:s}", "error", "type and id: the aggregate_type and aggregate_id "
                                           "(at most 64 characters each)");
    }
    if (limit < 1)
        limit = 50;
    int slot;
    json_t *err;
    struct sc_db *db = sc_console_db_get(con, &slot, &err, status);
    if (!db)
        return err;
    struct sc_db_err e = {0};
    json_t *names = sc_consumer_names_json(db, con->cfg, &e);
    json_t *out = names ? sc_aggregate_json(db, con->cfg, names, type, id, after, limit, &e) : NULL;
    json_decref(names);
    sc_console_db_put(con, slot, out ? 0 : broken_by(&e));
    if (!out)
        return sc_console_db_error(e.code == 1176 ? "aggregate (apply sql/schema/007_outbox_aggregate.sql)"
                                                  : "aggregate", &e, status);
    *status = 200;
    return out;
}

/* ---- dead-letter queues --------------------------------------------------- */

/* A header's value as text (strings, integers, else the type). */
static json_t *header_value(const amqp_field_value_t *v)
{
    char buf[64];
    switch (v->kind) {
    case AMQP_FIELD_KIND_UTF8:
    case AMQP_FIELD_KIND_BYTES:
        return text_json(v->value.bytes.bytes, v->value.bytes.len);
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

/* The event id a dead letter carries: the body's "id", else message_id. */
static json_t *message_event_id(const amqp_message_t *m)
{
    json_t *j = json_loadb(m->body.bytes, m->body.len, 0, NULL);
    const char *id = j ? json_string_value(json_object_get(j, "id")) : NULL;
    json_t *out = id ? json_string(id) : NULL;
    json_decref(j);
    if (out)
        return out;
    if (m->properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG)
        return text_json(m->properties.message_id.bytes, m->properties.message_id.len);
    return json_null();
}

static json_t *message_json(const amqp_message_t *m, int position, size_t body_max)
{
    const amqp_basic_properties_t *p = &m->properties;
    json_t *o = json_object(), *headers = json_object();
    json_object_set_new(o, "position", json_integer(position));
    json_object_set_new(o, "event_id", message_event_id(m));
    json_object_set_new(o, "message_id", (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG)
                                             ? text_json(p->message_id.bytes, p->message_id.len)
                                             : json_null());
    json_object_set_new(o, "content_type", (p->_flags & AMQP_BASIC_CONTENT_TYPE_FLAG)
                                               ? text_json(p->content_type.bytes, p->content_type.len)
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
            json_t *kj = text_json((const unsigned char *)key, strlen(key));
            if (json_is_string(kj))
                json_object_set(headers, json_string_value(kj), v);
            json_decref(kj);
            json_decref(v);
        }
    json_object_set_new(o, "headers", headers);
    size_t shown = m->body.len < body_max ? m->body.len : body_max;
    json_object_set_new(o, "body", text_json(m->body.bytes, shown));
    json_object_set_new(o, "body_bytes", json_integer((json_int_t)m->body.len));
    json_object_set_new(o, "body_truncated", json_boolean(m->body.len > shown));
    return o;
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
};

static int visit_page(const amqp_message_t *m, int position, void *arg)
{
    struct page *pg = arg;
    if (position >= pg->offset)
        json_array_append_new(pg->list, message_json(m, position, BODY_SHOWN));
    return position + 1 >= pg->offset + pg->limit;
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

json_t *sc_console_dlq(struct sc_console *con, const char *consumer, int offset, int limit,
                       unsigned *status)
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
    struct page pg = {offset, limit, json_array()};
    /* The depth first: the page says "51-100 of N". */
    amqp_queue_declare_ok_t *d = amqp_queue_declare(a.conn, SC_AMQP_CHANNEL,
                                                    amqp_cstring_bytes(k->dead_letter_queue), 1, 0,
                                                    0, 0, amqp_empty_table);
    long long depth = d ? (long long)d->message_count : -1;
    int n = d ? browse(&a, k->dead_letter_queue, offset + limit, visit_page, &pg, err, sizeof err) : -1;
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
    return json_pack("{s:s, s:s, s:I, s:i, s:i, s:i, s:o}", "consumer", k->name, "queue",
                     k->dead_letter_queue, "depth", (json_int_t)depth, "offset", offset, "limit",
                     limit, "window", DLQ_WINDOW, "messages", pg.list);
}

struct find {
    char canon[37];
    int is_uuid;
    const char *id;
    json_t *hits;
};

static int visit_find(const amqp_message_t *m, int position, void *arg)
{
    struct find *f = arg;
    json_t *eid = message_event_id(m);
    const char *s = json_string_value(eid);
    int hit = 0;
    char c[37];
    if (s && f->is_uuid)
        hit = sc_uuid_canonical(s, strlen(s), c) == 0 && strcmp(c, f->canon) == 0;
    else if (s)
        hit = strcmp(s, f->id) == 0;
    if (!hit && (m->properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG))
        hit = m->properties.message_id.len == strlen(f->id) &&
              memcmp(m->properties.message_id.bytes, f->id, strlen(f->id)) == 0;
    json_decref(eid);
    if (hit && json_array_size(f->hits) < 20)
        json_array_append_new(f->hits, message_json(m, position, PAYLOAD_SHOWN));
    return 0;
}

json_t *sc_console_dlq_find(struct sc_console *con, const char *id, unsigned *status)
{
    if (!id || !id[0] || strlen(id) > 255) {
        *status = 400;
        return json_pack("{s:s}", "error", "id: an event id or a message id");
    }
    struct sc_amqp a;
    json_t *out;
    if (amqp_open(con, &a, &out, status))
        return out;
    struct find f = {.id = id, .hits = json_array()};
    f.is_uuid = sc_uuid_canonical(id, strlen(id), f.canon) == 0;
    json_t *searched = json_array(), *errors = json_array();
    for (size_t i = 0; i < con->cfg->n_consumers; i++) {
        const struct sc_consumer_config *k = &con->cfg->consumers[i];
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
    return json_pack("{s:s, s:o, s:o, s:o, s:i}", "query", id, "hits", f.hits, "searched",
                     searched, "errors", errors, "window", DLQ_WINDOW);
}
