#include "orders.h"

#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct order_ctx {
    const char *tenant_id, *request_id;
    struct sc_order_result *out;
    char payload[512];
};

static int insert_order(MYSQL *conn, void *arg, struct sc_outbox_event *ev,
                        struct sc_outbox_error *err)
{
    struct order_ctx *c = arg;
    char *t = sc_outbox_quote(conn, c->tenant_id), *r = sc_outbox_quote(conn, c->request_id);
    char sql[1536];
    int rc = -1;
    if (t && r && strlen(t) + strlen(r) < 600) {
        snprintf(sql, sizeof sql,
                 "INSERT INTO orders (tenant_id, request_id, acceptance_event_id, version, status, "
                 "created_at) VALUES (%s, %s, '%s', 1, 'ACCEPTED', UTC_TIMESTAMP(6))",
                 t, r, ev->event_id);
        rc = sc_outbox_exec(conn, sql, err);
    } else {
        snprintf(err->message, sizeof err->message, "tenant_id or request_id too long");
    }
    free(t);
    free(r);
    if (rc)
        return rc;
    c->out->order_id = (long long)mysql_insert_id(conn);
    snprintf(c->out->acceptance_event_id, sizeof c->out->acceptance_event_id, "%s", ev->event_id);
    snprintf(ev->aggregate_id, sizeof ev->aggregate_id, "%lld", c->out->order_id);
    /* tenant and request ids are echoed through JSON: keep them to safe text */
    snprintf(c->payload, sizeof c->payload, "{\"orderId\":%lld,\"status\":\"ACCEPTED\",\"version\":1}",
             c->out->order_id);
    ev->payload_json = c->payload;
    return 0;
}

enum sc_outbox_outcome sc_order_accept(MYSQL *conn, const char *tenant_id, const char *request_id,
                                       const char event_id[37], struct sc_order_result *out,
                                       struct sc_outbox_error *err)
{
    struct order_ctx c = {.tenant_id = tenant_id, .request_id = request_id, .out = out};
    struct sc_outbox_event ev = {.aggregate_type = "ORDER", .event_type = "ORDER_ACCEPTED",
                                 .event_version = 1};
    memset(out, 0, sizeof *out);
    snprintf(ev.event_id, sizeof ev.event_id, "%s", event_id);
    return sc_outbox_write(conn, insert_order, &c, &ev, err);
}

int sc_order_reconcile(MYSQL *conn, const char *tenant_id, const char *request_id,
                       struct sc_order_result *out, struct sc_outbox_error *err)
{
    memset(err, 0, sizeof *err);
    char *t = sc_outbox_quote(conn, tenant_id), *r = sc_outbox_quote(conn, request_id);
    char sql[1536];
    int rc = -1;
    if (!t || !r || strlen(t) + strlen(r) >= 600) {
        snprintf(err->message, sizeof err->message, "tenant_id or request_id too long");
        goto out;
    }
    /* A locking read sees the latest committed row, whatever snapshot the
     * session holds, and waits for a still-running first attempt. */
    snprintf(sql, sizeof sql,
             "SELECT id, acceptance_event_id FROM orders WHERE tenant_id = %s AND request_id = %s "
             "FOR UPDATE", t, r);
    if (sc_outbox_exec(conn, "START TRANSACTION", err) || mysql_real_query(conn, sql, strlen(sql))) {
        if (!err->code)
            sc_outbox_error_from(err, conn);
        goto out;
    }
    MYSQL_RES *res = mysql_store_result(conn);
    if (!res) {
        sc_outbox_error_from(err, conn);
        goto out;
    }
    MYSQL_ROW row = mysql_fetch_row(res);
    rc = 0;
    if (row) {
        out->order_id = atoll(row[0]);
        snprintf(out->acceptance_event_id, sizeof out->acceptance_event_id, "%s", row[1] ? row[1] : "");
        rc = 1;
    }
    mysql_free_result(res);
    if (sc_outbox_exec(conn, "COMMIT", err))
        rc = -1;
out:
    free(t);
    free(r);
    return rc;
}

