/* sidecar inspect: an event's state everywhere it leaves a trace. */
#include <jansson.h>
#include <stdarg.h>
#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "io/db.h"
#include "envelope/event.h"
#include "envelope/uuid_v5.h"

/* Runs a formatted query (the id in it is a validated canonical UUID);
 * returns the result or NULL. */
__attribute__((format(printf, 2, 3))) static MYSQL_RES *select_by_id(struct sc_db *db,
                                                                      const char *fmt, ...)
{
    char sql[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    struct sc_db_err e = {0};
    return sc_db_select(db, sql, &e);
}

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

int sc_inspect_run(const struct sc_config *cfg, int argc, char **argv)
{
    const char *id = NULL;
    int as_json = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            as_json = 1;
        else if (!id)
            id = argv[i];
        else {
            fprintf(stderr, "sidecar inspect: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!id || !id[0] || strlen(id) > 255) {
        fprintf(stderr, "sidecar inspect: expected an EVENT_ID (a UUID, or a plain message's "
                "message_id), got %s\n", id ? id : "nothing");
        return 2;
    }
    /* A plain message's message_id that is not a UUID names its event by
     * its UUIDv5 (envelope/uuid_v5.h); a UUID in any spelling is itself. */
    char canon[37];
    const char *message_id = sc_message_id_to_event_id(id, strlen(id), canon) == 1 ? id : NULL;
    id = canon;
    struct sc_db db;
    struct sc_db_err e = {0};
    if (sc_db_connect(&db, cfg, &e)) {
        fprintf(stderr, "sidecar inspect: mysql: error %u: %s\n", e.code, e.msg);
        return 1;
    }
    json_t *out = json_pack("{s:s, s:s*}", "event_id", id, "message_id", message_id);
    int known = 0;

    MYSQL_RES *r = select_by_id(&db,
        "SELECT status, lease_owner, DATE_FORMAT(lease_until, '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ'), "
        "DATE_FORMAT(published_at, '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ'), event_type, event_version, "
        "aggregate_type, aggregate_id, DATE_FORMAT(created_at, '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ'), "
        "publish_attempts FROM outbox_event WHERE event_id = '%s'", id);
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

    json_t *consumed = json_array();
    r = select_by_id(&db,
        "SELECT consumer_name, DATE_FORMAT(consumed_at, '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ') "
        "FROM consumed_event WHERE event_id = '%s' ORDER BY consumed_at", id);
    while (r && (row = mysql_fetch_row(r))) {
        known = 1;
        json_array_append_new(consumed, json_pack("{s:s?, s:s?}", "consumer", row[0], "consumed_at", row[1]));
    }
    if (r)
        mysql_free_result(r);
    json_object_set_new(out, "consumed", consumed);

    /* The sample handler's effect, where its table exists. */
    r = select_by_id(&db,
        "SELECT order_id, source_version, status, DATE_FORMAT(created_at, '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ') "
        "FROM notification_job WHERE event_id = '%s'", id);
    row = r ? mysql_fetch_row(r) : NULL;
    if (row) {
        known = 1;
        json_object_set_new(out, "notification_job", json_pack("{s:I, s:I, s:s?, s:s?}",
            "order_id", (json_int_t)atoll(row[0]), "source_version", (json_int_t)atoll(row[1]),
            "status", row[2], "created_at", row[3]));
    } else {
        json_object_set_new(out, "notification_job", json_null());
    }
    if (r)
        mysql_free_result(r);
    sc_db_rollback(&db, &e);
    sc_db_close(&db);

    json_object_set_new(out, "known", json_boolean(known));
    if (as_json) {
        char *text = json_dumps(out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        printf("%s\n", text);
        free(text);
    } else {
        if (message_id)
            printf("event %s (UUIDv5 of message_id '%s')\n", id, message_id);
        else
            printf("event %s\n", id);
        json_t *o = json_object_get(out, "outbox");
        if (json_is_object(o))
            printf("  outbox:   %s (type %s v%lld, created %s, attempts %lld)%s%s%s%s%s\n",
                   json_string_value(json_object_get(o, "status")),
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
        size_t i;
        json_t *c;
        if (json_array_size(consumed) == 0)
            printf("  consumed: by no consumer\n");
        json_array_foreach(consumed, i, c)
            printf("  consumed: by %s at %s\n", json_string_value(json_object_get(c, "consumer")),
                   json_string_value(json_object_get(c, "consumed_at")));
        json_t *j = json_object_get(out, "notification_job");
        if (json_is_object(j))
            printf("  effect:   notification_job order %lld v%lld %s at %s\n",
                   (long long)json_integer_value(json_object_get(j, "order_id")),
                   (long long)json_integer_value(json_object_get(j, "source_version")),
                   json_string_value(json_object_get(j, "status")),
                   json_string_value(json_object_get(j, "created_at")));
        else
            printf("  effect:   no notification_job row\n");
        if (!known)
            printf("  nothing is known of this event id\n");
    }
    json_decref(out);
    return known ? 0 : 1;
}
