/* broker_limit AMQP_URL QUEUE N PREFETCH: the broker's limit for this
 * workload: consume N messages with manual ack, one basic.ack `multiple`
 * per batch of what is waiting, no database. Prints events/s. */
#include "bench_common.h"
#include "sidecar/io/amqp_conn.h"

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: broker_limit AMQP_URL QUEUE N PREFETCH\n");
        return 2;
    }
    struct sc_config cfg;
    bench_config(&cfg, argv[1], "mysql://x@h/d");
    long n = atol(argv[3]);
    struct sc_amqp a;
    char err[512];
    if (sc_amqp_connect(&a, &cfg, "bench broker limit", err, sizeof err) ||
        sc_amqp_start_consume(&a, argv[2], atoi(argv[4]), "bench", err, sizeof err)) {
        fprintf(stderr, "broker_limit: %s\n", err);
        return 1;
    }
    long got = 0;
    uint64_t last = 0;
    double t0 = 0;
    while (got < n) {
        amqp_envelope_t env;
        enum sc_amqp_recv r = sc_amqp_receive(&a, &env, got ? 0 : 5000, err, sizeof err);
        if (r == SC_AMQP_RECV_MESSAGE) {
            if (!got)
                t0 = bench_now();
            got++;
            last = env.delivery_tag;
            amqp_destroy_envelope(&env);
            if (got % 256 == 0 || got == n) {
                sc_amqp_ack(&a, last, 1);
                last = 0;
            }
            continue;
        }
        if (r == SC_AMQP_RECV_CLOSED) {
            fprintf(stderr, "broker_limit: %s\n", err);
            return 1;
        }
        if (last) { /* nothing waiting: ack what we have */
            sc_amqp_ack(&a, last, 1);
            last = 0;
        }
        if (!got)
            break;
    }
    double dt = bench_now() - t0;
    printf("{\"events\": %ld, \"seconds\": %.3f, \"events_per_s\": %.1f}\n", got, dt, (double)got / dt);
    sc_amqp_close(&a);
    return got == n ? 0 : 1;
}
