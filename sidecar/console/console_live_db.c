/* The console's database reads made for one request: outbox rows of a
 * status, one event, one aggregate. Each is bounded: a page holds at most
 * PAGE_MAX rows read through one index range in the index's order (keyset
 * pagination: the cursor is the last row's sort key, so page 1,000 costs
 * what page 1 costs), and every payload is cut to a stated size. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/admin_aggregate.h"
#include "admin/admin_effects.h"
#include "admin/admin_rows.h"
#include "console.h"
#include "console_text.h"
#include "envelope/uuid_text.h"
#include "io/db_rows.h"
#include "io/db_watermark.h"
#include "relay/outbox_rules.h"

#define PAGE_MAX 200
#define PAYLOAD_SHOWN 16384  /* bytes of an outbox payload in a reply */
#define PAYLOAD_CHECKED (1 << 20)

/* ---- outbox rows ---------------------------------------------------------- */

json_t *sc_console_outbox_rows(struct sc_console *con, const char *tenant,
                               const char *status_name, const char *after, int limit,
                               unsigned *status)
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
    struct sc_db *db = sc_console_db_get(con, tenant, &slot, &err, status);
    if (!db)
        return err;
    struct sc_rows rows;
    struct sc_db_err e = {0};
    if (sc_db_select_params(db, sql, params, paged ? 4 : 1, (size_t)limit + 1,
                            failed ? PAYLOAD_CHECKED + 1 : 0, &rows, &e)) {
        sc_console_db_put(con, slot, sc_console_db_broken(&e));
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
                snprintf(why, sizeof why, "valid by the envelope rules: FAILED for its size or "
                         "refused by the broker (the relay's log line says which), or repaired "
                         "since: set it PENDING to publish it");
            json_object_set_new(o, "reason", json_string(why));
            size_t shown = plen < PAYLOAD_SHOWN ? plen : PAYLOAD_SHOWN;
            json_object_set_new(o, "payload",
                                payload ? sc_console_text_json((const unsigned char *)payload, shown)
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

json_t *sc_console_event(struct sc_console *con, const char *tenant, const char *id,
                         unsigned *status)
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
    struct sc_db *db = sc_console_db_get(con, tenant, &slot, &err, status);
    if (!db)
        return err;
    struct sc_db_err e = {0};
    const char *p[1] = {canon};
    struct sc_rows rows;
    json_t *out = json_pack("{s:s%, s:s, s:b}", "query", id, len, "event_id", canon, "uuid", 1);
    int known = 0;
    char w[SC_DB_WATERMARK_LEN + 2];
    if (sc_db_outbox_watermark_iso(db, w, sizeof w, &e) < 0)
        goto fail;
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
        /* relay.source "binlog": published rows stay PENDING (as in inspect) */
        const char *st = sc_rows_get(&rows, 0, 0), *created = sc_rows_get(&rows, 0, 8);
        /* (a PENDING row with a lease is held behind a FAILED row: not published) */
        if (w[0] && st && created && strcmp(st, "PENDING") == 0 && strcmp(created, w) < 0 &&
            !sc_rows_get(&rows, 0, 2)) {
            json_object_set_new(o, "status", json_string("PUBLISHED"));
            json_object_set_new(o, "stored_status", json_string("PENDING"));
            json_object_set_new(o, "binlog_watermark", json_string(w));
        }
        int pc = sc_rows_col(&rows, "payload");
        const char *payload = sc_rows_get(&rows, 0, (size_t)pc);
        unsigned long plen = payload ? rows.lens[(size_t)pc] : 0;
        size_t shown = plen < PAYLOAD_SHOWN ? plen : PAYLOAD_SHOWN;
        json_object_set_new(o, "payload",
                            payload ? sc_console_text_json((const unsigned char *)payload, shown)
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
    sc_console_db_put(con, slot, sc_console_db_broken(&e));
    json_decref(out);
    return sc_console_db_error("event", &e, status);
}

json_t *sc_console_aggregate(struct sc_console *con, const char *tenant, const char *type,
                             const char *id, const char *after, int limit, unsigned *status)
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
    struct sc_db *db = sc_console_db_get(con, tenant, &slot, &err, status);
    if (!db)
        return err;
    struct sc_db_err e = {0};
    json_t *names = sc_consumer_names_json(db, con->cfg, &e);
    json_t *out = names ? sc_aggregate_json(db, con->cfg, names, type, id, after, limit, &e) : NULL;
    json_decref(names);
    sc_console_db_put(con, slot, out ? 0 : sc_console_db_broken(&e));
    if (!out)
        return sc_console_db_error(e.code == 1176 ? "aggregate (apply sql/schema/007_outbox_aggregate.sql)"
                                                  : "aggregate", &e, status);
    *status = 200;
    return out;
}
