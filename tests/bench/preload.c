/* preload AMQP_URL QUEUE N [v7|v4 [CHUNK [MAX_LENGTH]]]: declares QUEUE (durable) and fills it with N
 * persistent CloudEvents ORDER_ACCEPTED messages, under publisher confirms.
 * Event ids are random (v4) unless "v7" asks for time-ordered UUIDv7 ids.
 * CHUNK (default and at most 2000) is how many are published per wait for
 * their confirms. MAX_LENGTH (0: none) declares the queue with x-max-length,
 * as tests/bench/relay_bench.py does, so that a long run does not leave the
 * broker holding (and later collecting) millions of messages. */
#include <uuid/uuid.h>

#include "bench_common.h"
#include "sidecar/io/amqp_conn.h"
#include "sidecar/outbox.h"

#define CHUNK 2000

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: preload AMQP_URL QUEUE N\n");
        return 2;
    }
    struct sc_config cfg;
    bench_config(&cfg, argv[1], "mysql://x@h/d");
    const char *queue = argv[2];
    long n = atol(argv[3]);
    int v7 = argc > 4 && strcmp(argv[4], "v7") == 0;
    int chunk = argc > 5 ? atoi(argv[5]) : CHUNK;
    if (chunk < 1 || chunk > CHUNK)
        chunk = CHUNK;
    struct sc_amqp a;
    char err[512];
    if (sc_amqp_connect(&a, &cfg, "bench preload", err, sizeof err) ||
        sc_amqp_confirm_select(&a, err, sizeof err)) {
        fprintf(stderr, "preload: %s\n", err);
        return 1;
    }
    long max_length = argc > 6 ? atol(argv[6]) : 0;
    amqp_table_entry_t arg = {.key = amqp_cstring_bytes("x-max-length"),
                              .value = {.kind = AMQP_FIELD_KIND_I64, .value = {.i64 = max_length}}};
    amqp_table_t args = {max_length > 0 ? 1 : 0, &arg};
    amqp_queue_declare(a.conn, SC_AMQP_CHANNEL, amqp_cstring_bytes(queue), 0, 1, 0, 0, args);
    if (amqp_get_rpc_reply(a.conn).reply_type != AMQP_RESPONSE_NORMAL) {
        fprintf(stderr, "preload: cannot declare %s\n", queue);
        return 1;
    }
    static char bodies[CHUNK][512], ids[CHUNK][37];
    static amqp_basic_properties_t props[CHUNK];
    static struct sc_publish msgs[CHUNK];
    double t0 = bench_now();
    for (long done = 0; done < n;) {
        int k = n - done < chunk ? (int)(n - done) : chunk;
        for (int i = 0; i < k; i++) {
            if (v7) {
                sc_outbox_new_event_id(ids[i]);
            } else {
                uuid_t u;
                uuid_generate_random(u);
                uuid_unparse_lower(u, ids[i]);
            }
            snprintf(bodies[i], sizeof bodies[i],
                     "{\"specversion\":\"1.0\",\"id\":\"%s\",\"type\":\"ORDER_ACCEPTED\","
                     "\"source\":\"ORDER\",\"subject\":\"%ld\",\"time\":\"2026-11-29T10:00:00.000000Z\","
                     "\"eventversion\":1,\"datacontenttype\":\"application/json\","
                     "\"data\":{\"orderId\":%ld,\"tenantId\":\"bench\"}}",
                     ids[i], 1000 + done + i, 1000 + done + i);
            memset(&props[i], 0, sizeof props[i]);
            props[i]._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
                              AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_TYPE_FLAG;
            props[i].content_type = amqp_cstring_bytes("application/cloudevents+json");
            props[i].delivery_mode = AMQP_DELIVERY_PERSISTENT;
            props[i].message_id = amqp_cstring_bytes(ids[i]);
            props[i].type = amqp_cstring_bytes("ORDER_ACCEPTED");
            msgs[i] = (struct sc_publish){.exchange = "", .routing_key = queue, .props = &props[i],
                                          .body = amqp_cstring_bytes(bodies[i]), .mandatory = 1};
        }
        int acked = sc_amqp_publish_confirmed(&a, msgs, (size_t)k, 60000, err, sizeof err);
        if (acked != k) {
            fprintf(stderr, "preload: only %d of %d confirmed: %s\n", acked, k, err);
            return 1;
        }
        done += k;
    }
    double dt = bench_now() - t0;
    printf("preloaded %ld messages into %s in %.2f s (%.0f/s)\n", n, queue, dt, (double)n / dt);
    sc_amqp_close(&a);
    return 0;
}
