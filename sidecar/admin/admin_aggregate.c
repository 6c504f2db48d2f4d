/* sidecar inspect --aggregate: every event of one aggregate, in order. */
#include "admin_aggregate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "admin_rows.h"
#include "io/db_rows.h"
#include "io/db_watermark.h"

#define NAMES_MAX 100

json_t *sc_consumer_names_json(struct sc_db *db, const struct sc_config *cfg,
                               struct sc_db_err *e)
{
    json_t *names = json_array();
    if (!names)
        return NULL;
    for (size_t i = 0; i < cfg->n_consumers && json_array_size(names) < NAMES_MAX; i++)
        json_array_append_new(names, json_string(cfg->consumers[i].name));
    /* DISTINCT on the leading column of uq_consumed_event_identity is a
     * loose index scan: one dive per distinct name, not per row. */
    struct sc_rows rows;
    if (sc_db_select_params(db, "SELECT DISTINCT consumer_name FROM consumed_event "
                                "FORCE INDEX (uq_consumed_event_identity) LIMIT 100",
                            NULL, 0, NAMES_MAX, 0, &rows, e)) {
        json_decref(names);
        return NULL;
    }
    for (size_t r = 0; r < rows.n_rows && json_array_size(names) < NAMES_MAX; r++) {
        const char *n = sc_rows_get(&rows, r, 0);
        int seen = 0;
        size_t i;
        json_t *v;
        json_array_foreach(names, i, v)
            seen |= n && strcmp(json_string_value(v), n) == 0;
        if (n && !seen)
            json_array_append_new(names, json_string(n));
    }
    sc_rows_free(&rows);
    return names;
}

json_t *sc_consumption_json(struct sc_db *db, const struct sc_config *cfg, const json_t *names,
                            const char *const *ids, int n_ids, json_t **kept,
                            struct sc_db_err *e)
{
    json_t *out = json_object();
    if (kept)
        *kept = NULL;
    if (!out)
        return NULL;
    if (n_ids <= 0) {
        if (kept) {
            *kept = json_array();
            for (size_t i = 0; i < cfg->n_consumers; i++)
                json_array_append_new(*kept, json_string(cfg->consumers[i].name));
        }
        return out;
    }
    if (n_ids > SC_AGGREGATE_PAGE_MAX)
        n_ids = SC_AGGREGATE_PAGE_MAX;
    /* A fixed number of placeholders (padded with the first id), so the
     * statement text is one per page size and never IN (). */
    char sql[256 + SC_AGGREGATE_PAGE_MAX * 3];
    size_t o = (size_t)snprintf(sql, sizeof sql,
                                "SELECT event_id, " SC_SQL_TSF("consumed_at") " FROM consumed_event "
                                "WHERE consumer_name = ? AND event_id IN (");
    for (int i = 0; i < n_ids; i++)
        o += (size_t)snprintf(sql + o, sizeof sql - o, i ? ",?" : "?");
    snprintf(sql + o, sizeof sql - o, ")");
    const char *params[1 + SC_AGGREGATE_PAGE_MAX];
    for (int i = 0; i < n_ids; i++)
        params[1 + i] = ids[i];
    for (int i = 0; i < n_ids; i++)
        json_object_set_new(out, ids[i], json_object());
    size_t k;
    json_t *name;
    json_t *keep = json_array();
    json_array_foreach(names, k, name) {
        params[0] = json_string_value(name);
        struct sc_rows rows;
        if (sc_db_select_params(db, sql, params, 1 + n_ids, (size_t)n_ids, 0, &rows, e)) {
            json_decref(out);
            json_decref(keep);
            return NULL;
        }
        if (rows.n_rows == 0 && !sc_config_consumer(cfg, params[0])) {
            sc_rows_free(&rows);
            continue;
        }
        json_array_append(keep, name);
        for (int i = 0; i < n_ids; i++)
            json_object_set_new(json_object_get(out, ids[i]), params[0], json_null());
        for (size_t r = 0; r < rows.n_rows; r++) {
            json_t *ev = json_object_get(out, sc_rows_get(&rows, r, 0));
            const char *at = sc_rows_get(&rows, r, 1);
            if (ev)
                json_object_set_new(ev, params[0], at ? json_string(at) : json_null());
        }
        sc_rows_free(&rows);
    }
    if (kept)
        *kept = keep;
    else
        json_decref(keep);
    return out;
}

json_t *sc_aggregate_json(struct sc_db *db, const struct sc_config *cfg, const json_t *names,
                          const char *type, const char *id, const char *after, int limit,
                          struct sc_db_err *e)
{
    if (limit < 1)
        limit = 1;
    if (limit > SC_AGGREGATE_PAGE_MAX)
        limit = SC_AGGREGATE_PAGE_MAX;
    /* The cursor is "created_at,event_id" of the last event shown. */
    char at[64], eid[64];
    int paged = sc_cursor_parse(after, at, sizeof at, eid, sizeof eid);
    char sql[1024];
    /* One range of ix_outbox_event_aggregate, in its order: no filesort. */
    snprintf(sql, sizeof sql,
             "SELECT event_id, event_type, event_version, status, " SC_SQL_TSF("created_at") " AS created, "
             SC_SQL_TSF("published_at") " AS published, publish_attempts, lease_owner, "
             SC_SQL_TSF("lease_until") " AS lease, created_at "
             "FROM outbox_event FORCE INDEX (ix_outbox_event_aggregate) "
             "WHERE aggregate_type = ? AND aggregate_id = ?%s "
             "ORDER BY created_at, event_id LIMIT %d",
             paged ? " AND (created_at > ? OR (created_at = ? AND event_id > ?))" : "", limit + 1);
    const char *params[5] = {type, id, at, at, eid};
    struct sc_rows rows;
    if (sc_db_select_params(db, sql, params, paged ? 5 : 2, (size_t)limit + 1, 0, &rows, e))
        return NULL;
    size_t n = rows.n_rows > (size_t)limit ? (size_t)limit : rows.n_rows;
    const char *ids[SC_AGGREGATE_PAGE_MAX];
    for (size_t r = 0; r < n; r++)
        ids[r] = sc_rows_get(&rows, r, 0);
    /* relay.source "binlog" leaves published rows PENDING: those created
     * before the checkpoint's watermark are published (as in inspect). */
    char w[SC_DB_WATERMARK_LEN + 2];
    if (sc_db_outbox_watermark_iso(db, w, sizeof w, e) < 0) {
        sc_rows_free(&rows);
        return NULL;
    }
    json_t *kept = NULL;
    json_t *consumed = sc_consumption_json(db, cfg, names, ids, (int)n, &kept, e);
    if (!consumed) {
        sc_rows_free(&rows);
        return NULL;
    }
    json_t *events = json_array();
    for (size_t r = 0; r < n; r++) {
        json_t *ev = json_object();
        json_object_set_new(ev, "event_id", sc_cell_text(&rows, r, "event_id"));
        json_object_set_new(ev, "event_type", sc_cell_text(&rows, r, "event_type"));
        json_object_set_new(ev, "event_version", sc_cell_int(&rows, r, "event_version"));
        const char *st = sc_rows_get(&rows, r, 3), *created = sc_rows_get(&rows, r, 4);
        /* (a PENDING row with a lease is held behind a FAILED row: not published) */
        if (w[0] && st && created && strcmp(st, "PENDING") == 0 && strcmp(created, w) < 0 &&
            !sc_rows_get(&rows, r, 8)) {
            json_object_set_new(ev, "status", json_string("PUBLISHED"));
            json_object_set_new(ev, "stored_status", json_string("PENDING"));
            json_object_set_new(ev, "binlog_watermark", json_string(w));
        } else {
            json_object_set_new(ev, "status", sc_cell_text(&rows, r, "status"));
        }
        json_object_set_new(ev, "created_at", sc_cell_text(&rows, r, "created"));
        json_object_set_new(ev, "published_at", sc_cell_text(&rows, r, "published"));
        json_object_set_new(ev, "publish_attempts", sc_cell_int(&rows, r, "publish_attempts"));
        json_object_set_new(ev, "lease_owner", sc_cell_text(&rows, r, "lease_owner"));
        json_object_set_new(ev, "lease_until", sc_cell_text(&rows, r, "lease"));
        json_t *c = json_object_get(consumed, ids[r]);
        json_object_set_new(ev, "consumed", c ? json_incref(c) : json_object());
        json_array_append_new(events, ev);
    }
    json_t *next = json_null();
    if (rows.n_rows > (size_t)limit) {
        char cur[160];
        snprintf(cur, sizeof cur, "%s,%s", sc_rows_get(&rows, n - 1, 9), ids[n - 1]);
        next = json_string(cur);
    }
    json_t *out = json_pack("{s:s, s:s, s:o, s:o, s:o}", "aggregate_type", type, "aggregate_id",
                            id, "consumers", kept, "events", events, "next", next);
    json_decref(consumed);
    sc_rows_free(&rows);
    return out;
}

static void print_event(const json_t *ev)
{
    printf("  %s  %s  %s v%lld  %s",
           json_string_value(json_object_get(ev, "created_at")),
           json_string_value(json_object_get(ev, "event_id")),
           json_string_value(json_object_get(ev, "event_type")),
           (long long)json_integer_value(json_object_get(ev, "event_version")),
           json_string_value(json_object_get(ev, "status")));
    if (json_is_string(json_object_get(ev, "binlog_watermark")))
        printf(" (binlog relay: checkpoint watermark %s)", json_string_value(json_object_get(ev, "binlog_watermark")));
    if (json_is_string(json_object_get(ev, "lease_owner")))
        printf(" (lease %s until %s)", json_string_value(json_object_get(ev, "lease_owner")),
               json_string_value(json_object_get(ev, "lease_until")));
    printf("\n");
    const char *name;
    json_t *at;
    json_object_foreach(json_object_get(ev, "consumed"), name, at) {
        if (json_is_string(at))
            printf("      consumed by %s at %s\n", name, json_string_value(at));
        else
            printf("      not consumed by %s\n", name);
    }
}

int sc_inspect_aggregate_run(const struct sc_config *cfg, const char *tenant, int argc,
                             char **argv)
{
    const char *type = NULL, *id = NULL;
    int as_json = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            as_json = 1;
        else if (strcmp(argv[i], "--aggregate") == 0 && i + 2 < argc && !type) {
            type = argv[++i];
            id = argv[++i];
        } else {
            fprintf(stderr, "sidecar inspect: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!type || !type[0] || !id || !id[0]) {
        fprintf(stderr, "usage: sidecar inspect -c FILE --aggregate TYPE ID [--json] "
                "[--tenant NAME]\n");
        return 2;
    }
    struct sc_db db;
    struct sc_db_err e = {0};
    if (sc_admin_connect(&db, cfg, tenant, &e)) {
        fprintf(stderr, "sidecar inspect: %s%s%smysql: error %u: %s\n", tenant ? "tenant " : "",
                tenant ? tenant : "", tenant ? ": " : "", e.code, e.msg);
        return 1;
    }
    json_t *names = sc_consumer_names_json(&db, cfg, &e);
    json_t *all = json_array(), *seen = json_array();
    char *after = NULL;
    size_t total = 0;
    int rc = 0;
    /* Every event, a page at a time: memory stays one page when printing. */
    while (names) {
        json_t *page = sc_aggregate_json(&db, cfg, names, type, id, after, SC_AGGREGATE_PAGE_MAX, &e);
        if (!page) {
            rc = 1;
            break;
        }
        size_t i, j;
        json_t *ev, *c, *s2;
        json_array_foreach(json_object_get(page, "consumers"), i, c) {
            int have = 0;
            json_array_foreach(seen, j, s2)
                have |= json_equal(c, s2);
            if (!have)
                json_array_append(seen, c);
        }
        json_array_foreach(json_object_get(page, "events"), i, ev) {
            total++;
            if (as_json)
                json_array_append(all, ev);
            else {
                if (total == 1)
                    printf("aggregate %s %s%s%s\n", type, id, tenant ? " of tenant " : "",
                           tenant ? tenant : "");
                print_event(ev);
            }
        }
        free(after);
        after = NULL;
        const char *next = json_string_value(json_object_get(page, "next"));
        if (next)
            after = strdup(next);
        json_decref(page);
        if (!after)
            break;
    }
    free(after);
    if (!names || rc) {
        fprintf(stderr, "sidecar inspect: mysql: error %u: %s%s\n", e.code, e.msg,
                e.code == 1176 ? " (apply sql/schema/007_outbox_aggregate.sql: it adds the index this "
                                 "lookup reads)"
                               : "");
        rc = 1;
    } else if (as_json) {
        json_t *out = json_pack("{s:s, s:s, s:O, s:O}", "aggregate_type", type, "aggregate_id", id,
                                "consumers", seen, "events", all);
        if (tenant)
            json_object_set_new(out, "tenant", json_string(tenant));
        char *text = json_dumps(out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        printf("%s\n", text);
        free(text);
        json_decref(out);
        rc = total ? 0 : 1;
    } else {
        if (!total)
            printf("aggregate %s %s: no events in the outbox (not produced here, or purged)\n",
                   type, id);
        rc = total ? 0 : 1;
    }
    sc_db_rollback(&db, &e);
    sc_db_close(&db);
    json_decref(names);
    json_decref(all);
    json_decref(seen);
    return rc;
}
