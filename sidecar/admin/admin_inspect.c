/* sidecar inspect: an event's state everywhere it leaves a trace. */
#include <jansson.h>
#include <stdarg.h>
#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "admin_aggregate.h"
#include "admin_effects.h"
#include "io/db.h"
#include "envelope/event.h"
#include "envelope/event.h"
#include "envelope/uuid_v5.h"

/* Runs a formatted query (the id in it is a validated canonical UUID);
 * returns the result, or NULL with e filled. */
__attribute__((format(printf, 3, 4))) static MYSQL_RES *select_by_id(struct sc_db *db,
                                                                      struct sc_db_err *e,
                                                                      const char *fmt, ...)
{
    char sql[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    return sc_db_select(db, sql, e);
}

/* Unknown column: a schema from before sql/schema/009 (or 014). */
#define ER_BAD_FIELD 1054
/* No relay_checkpoint (before 013), or no grant to read it (admin.sql before 014). */
#define ER_NO_SUCH_TABLE 1146
#define ER_TABLEACCESS_DENIED 1142

/* What could not be read: one entry per failed query, named by its table.
 * The report shows it in place of the section, never as "no row". */
struct unread {
    json_t *errors;   /* [{table, code, sqlstate, message}] */
    int gone;         /* the connection is lost: the rest is not even tried */
};

static void record_error(struct unread *u, const char *table, const struct sc_db_err *e)
{
    json_array_append_new(u->errors, json_pack("{s:s, s:I, s:s, s:s}", "table", table,
                                               "code", (json_int_t)e->code, "sqlstate", e->sqlstate,
                                               "message", e->msg));
    if (e->cls == SC_DBERR_CONNECTION)
        u->gone = 1;
}

/* The error recorded for table, or NULL. */
static json_t *error_for(const struct unread *u, const char *table)
{
    size_t i;
    json_t *x;
    json_array_foreach(u->errors, i, x)
        if (strcmp(json_string_value(json_object_get(x, "table")), table) == 0)
            return x;
    return NULL;
}

/* Prints "<label> <table> not read: mysql error N (SQLSTATE): message" when
 * table could not be read (or was not tried after a lost connection) and
 * returns 1; else returns 0. */
static int print_unread(const struct unread *u, const char *label, const char *table)
{
    json_t *x = error_for(u, table);
    if (x)
        printf("  %s %s not read: mysql error %lld (%s): %s\n", label, table,
               (long long)json_integer_value(json_object_get(x, "code")),
               json_string_value(json_object_get(x, "sqlstate")),
               json_string_value(json_object_get(x, "message")));
    else if (u->gone)
        printf("  %s %s not read: the connection was lost before\n", label, table);
    else
        return 0;
    return 1;
}

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

/* Records each effect query that failed; 1 when a row was found. */
static int effects_known(const json_t *effects, struct unread *u)
{
    size_t i;
    json_t *x;
    int found = 0;
    json_array_foreach(effects, i, x) {
        json_t *err = json_object_get(x, "error");
        if (err)
            json_array_append_new(u->errors, json_pack("{s:O, s:O, s:O, s:O}", "table",
                json_object_get(x, "table"), "code", json_object_get(err, "code"), "sqlstate",
                json_object_get(err, "sqlstate"), "message", json_object_get(err, "message")));
        found |= json_array_size(json_object_get(x, "rows")) > 0;
    }
    return found;
}

/* "effect: TABLE (CONSUMER): col value, ..." per row found, or why none. */
static void print_effects(const json_t *effects)
{
    size_t i, r, at;
    json_t *x, *row;
    json_array_foreach(effects, i, x) {
        const char *table = json_string_value(json_object_get(x, "table"));
        const char *consumer = json_string_value(json_object_get(x, "consumer"));
        json_t *err = json_object_get(x, "error");
        json_t *rows = json_object_get(x, "rows");
        if (err) {
            printf("  effect:   %s (%s) not read: mysql error %lld (%s): %s\n", table, consumer,
                   (long long)json_integer_value(json_object_get(err, "code")),
                   json_string_value(json_object_get(err, "sqlstate")),
                   json_string_value(json_object_get(err, "message")));
            continue;
        }
        if (json_array_size(rows) == 0)
            printf("  effect:   no %s row (%s)\n", table, consumer);
        json_array_foreach(rows, r, row) {
            printf("  effect:   %s (%s):", table, consumer);
            const char *col;
            json_t *v;
            at = 0;
            json_object_foreach(row, col, v) {
                printf("%s %s ", at++ ? "," : "", col);
                if (json_is_integer(v))
                    printf("%lld", (long long)json_integer_value(v));
                else if (json_is_string(v))
                    printf("%s", json_string_value(v));
                else
                    printf("NULL");
            }
            printf("\n");
        }
        if (json_is_true(json_object_get(x, "more")))
            printf("  effect:   %s (%s): more rows than the %d shown\n", table, consumer,
                   SC_EFFECT_ROWS_SHOWN);
    }
}

int sc_inspect_run(const struct sc_config *cfg, int argc, char **argv)
{
    const char *tenant;
    if (sc_admin_take_tenant(cfg, "inspect", &argc, argv, &tenant))
        return 2;
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--aggregate") == 0)
            return sc_inspect_aggregate_run(cfg, tenant, argc, argv);
    const char *id = NULL, *source = NULL;
    int as_json = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            as_json = 1;
        else if (strcmp(argv[i], "--source") == 0 && i + 1 < argc)
            source = argv[++i];
        else if (!id)
            id = argv[i];
        else {
            fprintf(stderr, "sidecar inspect: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!id || !id[0] || strlen(id) > 255) {
        fprintf(stderr, "sidecar inspect: expected an EVENT_ID (a UUID, a plain message's "
                "message_id, or with --source SOURCE a CloudEvents id), got %s\n", id ? id : "nothing");
        return 2;
    }
    /* A plain message's message_id that is not a UUID names its event by
     * its UUIDv5 (envelope/uuid_v5.h); a CloudEvents id that is not one, by
     * the UUIDv5 of its source and itself; a UUID in any spelling is itself. */
    char canon[37];
    const char *message_id = NULL, *ce_id = NULL;
    if (source) {
        char u[37];
        ce_id = sc_uuid_canonical(id, strlen(id), u) == 0 ? NULL : id;
        sc_event_id_of(id, strlen(id), source, strlen(source), canon);
    } else if (sc_message_id_to_event_id(id, strlen(id), canon) == 1) {
        message_id = id;
    }
    id = canon;
    struct sc_db db;
    struct sc_db_err e = {0};
    if (sc_admin_connect(&db, cfg, tenant, &e)) {
        fprintf(stderr, "sidecar inspect: %s%s%smysql: error %u: %s\n", tenant ? "tenant " : "",
                tenant ? tenant : "", tenant ? ": " : "", e.code, e.msg);
        return 1;
    }
    json_t *out = json_pack("{s:s, s:s*, s:s*}", "event_id", id, "message_id", message_id,
                            "ce_id", ce_id);
    if (tenant)
        json_object_set_new(out, "tenant", json_string(tenant));
    struct unread u = {.errors = json_array()};
    int known = 0;

    MYSQL_RES *r = select_by_id(&db, &e,
        "SELECT status, lease_owner, DATE_FORMAT(lease_until, '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ'), "
        "DATE_FORMAT(published_at, '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ'), event_type, event_version, "
        "aggregate_type, aggregate_id, DATE_FORMAT(created_at, '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ'), "
        "publish_attempts FROM outbox_event WHERE event_id = '%s'", id);
    if (!r)
        record_error(&u, "outbox_event", &e);
    MYSQL_ROW row = r ? mysql_fetch_row(r) : NULL;
    if (row) {
        known = 1;
        json_object_set_new(out, "outbox", json_pack("{s:s?, s:o, s:o, s:o, s:s?, s:I, s:s?, s:s?, s:s?, s:I}",
            "status", row[0], "lease_owner", str_or_null(row[1]), "lease_until", str_or_null(row[2]),
            "published_at", str_or_null(row[3]), "event_type", row[4],
            "event_version", (json_int_t)(row[5] ? atoll(row[5]) : 0), "aggregate_type", row[6],
            "aggregate_id", row[7], "created_at", row[8],
            "publish_attempts", (json_int_t)(row[9] ? atoll(row[9]) : 0)));
    } else {
        json_object_set_new(out, "outbox", json_null());
    }
    if (r)
        mysql_free_result(r);
    /* relay.source "binlog" leaves a published row PENDING: the checkpoint's
     * watermark (sql/schema/014) says it is published when the row was
     * created before it. Asked on its own: a schema or grants from before
     * it show the row's own status, as then. */
    json_t *ob0 = json_object_get(out, "outbox");
    const char *st0 = json_is_object(ob0) ? json_string_value(json_object_get(ob0, "status")) : NULL;
    if (st0 && strcmp(st0, "PENDING") == 0 && !u.gone &&
        (r = select_by_id(&db, &e, "SELECT DATE_FORMAT(c.published_created_before, "
                                   "'%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ') FROM relay_checkpoint c JOIN outbox_event o "
                                   "ON o.created_at < c.published_created_before AND o.lease_until IS NULL "
                                   "WHERE c.outbox = 'outbox_event' AND o.event_id = '%s'", id))) {
        if ((row = mysql_fetch_row(r)) && row[0]) {
            json_object_set_new(ob0, "status", json_string("PUBLISHED"));
            json_object_set_new(ob0, "stored_status", json_string("PENDING"));
            json_object_set_new(ob0, "binlog_watermark", json_string(row[0]));
        }
        mysql_free_result(r);
    } else if (st0 && strcmp(st0, "PENDING") == 0 && !u.gone && e.code != ER_BAD_FIELD &&
               e.code != ER_NO_SUCH_TABLE && e.code != ER_TABLEACCESS_DENIED) {
        record_error(&u, "relay_checkpoint", &e);
    }
    /* The trace context the producer stored (sql/schema/009): asked on its
     * own, so a schema from before it still shows the rest. */
    json_t *ob = json_object_get(out, "outbox");
    if (json_is_object(ob) && !u.gone &&
        (r = select_by_id(&db, &e, "SELECT traceparent, tracestate FROM outbox_event WHERE "
                                   "event_id = '%s'", id))) {
        if ((row = mysql_fetch_row(r))) {
            json_object_set_new(ob, "traceparent", str_or_null(row[0]));
            json_object_set_new(ob, "tracestate", str_or_null(row[1]));
        }
        mysql_free_result(r);
    } else if (json_is_object(ob) && !u.gone && e.code != ER_BAD_FIELD) {
        record_error(&u, "outbox_event", &e);
    }

    json_t *consumed = NULL;
    if (!u.gone && (r = select_by_id(&db, &e,
            "SELECT consumer_name, DATE_FORMAT(consumed_at, '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ') "
            "FROM consumed_event WHERE event_id = '%s' ORDER BY consumed_at", id))) {
        consumed = json_array();
        while ((row = mysql_fetch_row(r))) {
            known = 1;
            json_array_append_new(consumed, json_pack("{s:s?, s:s?}", "consumer", row[0],
                                                      "consumed_at", row[1]));
        }
        mysql_free_result(r);
    } else if (!u.gone) {
        record_error(&u, "consumed_event", &e);
    }
    json_object_set_new(out, "consumed", consumed ? consumed : json_null());

    /* Each consumer's effect, where its inspect_effects names it. */
    json_t *effects = u.gone ? json_array() : sc_inspect_effects_json(&db, cfg, id, &u.gone);
    if (!effects) {
        fprintf(stderr, "sidecar inspect: out of memory\n");
        sc_db_close(&db);
        json_decref(u.errors);
        json_decref(out);
        return 1;
    }
    known |= effects_known(effects, &u);
    json_object_set_new(out, "effects", effects);
    if (!u.gone)
        sc_db_rollback(&db, &e);
    sc_db_close(&db);

    size_t n_errors = json_array_size(u.errors);
    json_object_set_new(out, "known", json_boolean(known));
    if (n_errors)
        json_object_set(out, "errors", u.errors);
    if (as_json) {
        char *text = json_dumps(out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        printf("%s\n", text);
        free(text);
    } else {
        if (message_id)
            printf("event %s (UUIDv5 of message_id '%s')\n", id, message_id);
        else if (ce_id)
            printf("event %s (UUIDv5 of source '%s' and id '%s')\n", id, source, ce_id);
        else
            printf("event %s\n", id);
        if (tenant)
            printf("  tenant:   %s (its database)\n", tenant);
        json_t *o = json_object_get(out, "outbox");
        if (print_unread(&u, "outbox:  ", "outbox_event"))
            ;
        else if (json_is_object(o))
            printf("  outbox:   %s%s%s%s (type %s v%lld, created %s, attempts %lld)%s%s%s%s%s\n",
                   json_string_value(json_object_get(o, "status")),
                   json_is_string(json_object_get(o, "binlog_watermark")) ? " (binlog relay: checkpoint watermark " : "",
                   json_is_string(json_object_get(o, "binlog_watermark")) ? json_string_value(json_object_get(o, "binlog_watermark")) : "",
                   json_is_string(json_object_get(o, "binlog_watermark")) ? ")" : "",
                   json_string_value(json_object_get(o, "event_type")),
                   (long long)json_integer_value(json_object_get(o, "event_version")),
                   json_string_value(json_object_get(o, "created_at")),
                   (long long)json_integer_value(json_object_get(o, "publish_attempts")),
                   json_is_string(json_object_get(o, "lease_owner")) ? ", lease " : "",
                   json_is_string(json_object_get(o, "lease_owner")) ? json_string_value(json_object_get(o, "lease_owner")) : "",
                   json_is_string(json_object_get(o, "lease_until")) ? " until " : "",
                   json_is_string(json_object_get(o, "lease_until")) ? json_string_value(json_object_get(o, "lease_until")) : "",
                   json_is_string(json_object_get(o, "published_at")) ? ", published" : "");
        else
            printf("  outbox:   no row (not produced here, or purged)\n");
        if (json_is_string(json_object_get(o, "traceparent")))
            printf("  trace:    traceparent %s%s%s\n", json_string_value(json_object_get(o, "traceparent")),
                   json_is_string(json_object_get(o, "tracestate")) ? ", tracestate " : "",
                   json_is_string(json_object_get(o, "tracestate")) ? json_string_value(json_object_get(o, "tracestate")) : "");
        size_t i;
        json_t *c;
        if (!print_unread(&u, "consumed:", "consumed_event")) {
            if (json_array_size(consumed) == 0)
                printf("  consumed: by no consumer\n");
            json_array_foreach(consumed, i, c)
                printf("  consumed: by %s at %s\n", json_string_value(json_object_get(c, "consumer")),
                       json_string_value(json_object_get(c, "consumed_at")));
        }
        print_effects(effects);
        if (!known && !n_errors)
            printf("  nothing is known of this event id\n");
    }
    fflush(stdout);
    if (n_errors)
        fprintf(stderr, "sidecar inspect: %zu quer%s failed (%s%s): the report above is incomplete\n",
                n_errors, n_errors == 1 ? "y" : "ies",
                json_string_value(json_object_get(json_array_get(u.errors, 0), "table")),
                u.gone ? "; the connection was lost" : "");
    json_decref(u.errors);
    json_decref(out);
    return known && !n_errors ? 0 : 1;
}
