/* outbox_insert MYSQL_URL N v7|v4: N producer transactions through the
 * producer library (sc_outbox_write: START TRANSACTION, the outbox_event
 * INSERT, COMMIT; no business statement), one event each, ids time-ordered
 * (UUIDv7, what sc_outbox_new_event_id makes) or random (v4, ids a service
 * brings itself). Prints {"events": N, "seconds": s, "events_per_s": r}. */
#include <mysql.h>
#include <uuid/uuid.h>

#include "bench_common.h"
#include "sidecar/io/db.h"
#include "sidecar/outbox.h"

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: outbox_insert MYSQL_URL N v7|v4\n");
        return 2;
    }
    struct sc_config cfg;
    bench_config(&cfg, "amqp://x@h/", argv[1]);
    long n = atol(argv[2]);
    int v7 = strcmp(argv[3], "v7") == 0;
    struct sc_db db = {0};
    struct sc_db_err e = {0};
    if (sc_db_connect(&db, &cfg, &e)) {
        fprintf(stderr, "outbox_insert: %s\n", e.msg);
        return 1;
    }
    double t0 = bench_now();
    for (long i = 0; i < n; i++) {
        struct sc_outbox_event ev = {.aggregate_type = "ORDER", .event_type = "ORDER_ACCEPTED",
                                     .event_version = 1,
                                     .payload_json = "{\"orderId\":12345,\"status\":\"ACCEPTED\","
                                                     "\"amount\":19.99,\"tenantId\":\"bench\"}"};
        if (v7) {
            sc_outbox_new_event_id(ev.event_id);
        } else {
            uuid_t u;
            uuid_generate_random(u);
            uuid_unparse_lower(u, ev.event_id);
        }
        snprintf(ev.aggregate_id, sizeof ev.aggregate_id, "%ld", 1000 + i);
        struct sc_outbox_error err = {0};
        enum sc_outbox_outcome o = sc_outbox_write(db.conn, NULL, NULL, &ev, &err);
        if (o != SC_OUTBOX_COMMITTED) {
            fprintf(stderr, "outbox_insert: %s: error %u: %s\n", sc_outbox_outcome_name(o), err.code,
                    err.message);
            return 1;
        }
    }
    double dt = bench_now() - t0;
    printf("{\"events\": %ld, \"seconds\": %.3f, \"events_per_s\": %.1f}\n", n, dt, (double)n / dt);
    sc_db_close(&db);
    return 0;
}
