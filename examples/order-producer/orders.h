/* The demo's orders table through the producer helper: accept an order
 * (business row + ORDER_ACCEPTED outbox event in one transaction) and
 * reconcile an UNKNOWN outcome by (tenant_id, request_id). */
#ifndef ORDERS_H
#define ORDERS_H

#include "sidecar/outbox.h"

struct sc_order_result {
    long long order_id;
    char acceptance_event_id[37];
};

/* Inserts orders(tenant_id, request_id, acceptance_event_id = event_id,
 * version 1, status 'ACCEPTED') and its ORDER_ACCEPTED outbox event. A
 * second request with the same (tenant_id, request_id) is ROLLED_BACK with
 * error 1062 on uq_orders_tenant_request: reconcile it. */
enum sc_outbox_outcome sc_order_accept(struct st_mysql *conn, const char *tenant_id,
                                       const char *request_id, const char event_id[37],
                                       struct sc_order_result *out, struct sc_outbox_error *err);

/* Looks the request up on the primary. Returns 1 and fills out when the
 * order exists (reuse its acceptance_event_id), 0 when it does not, -1 on
 * error. */
int sc_order_reconcile(struct st_mysql *conn, const char *tenant_id, const char *request_id,
                       struct sc_order_result *out, struct sc_outbox_error *err);

#endif
