/* relay_db_limit MYSQL_URL N BATCH: the database's limit for the relay's
 * statements with no broker at all: the real claim (its two index-range
 * SELECTs, the lease UPDATE, COMMIT) and the real mark (the conditional
 * UPDATE to PUBLISHED, COMMIT) over a loaded PENDING table, batch by batch,
 * as one relay does them. Prints {"events_per_s": ..., "batches": ...}. */
#include "bench_common.h"
#include "relay/relay_db.h"
#include "relay/relay_message.h"

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: relay_db_limit MYSQL_URL N BATCH\n");
        return 2;
    }
    struct sc_config cfg;
    bench_config(&cfg, "amqp://x", argv[1]);
    long n = atol(argv[2]);
    int batch = atoi(argv[3]);
    if (batch < 1 || batch > SC_BATCH_LIMIT) {
        fprintf(stderr, "relay_db_limit: BATCH from 1 to %d\n", SC_BATCH_LIMIT);
        return 2;
    }
    cfg.relay.batch = batch;
    cfg.relay.lease_ms = 30000;
    struct sc_relay_db d;
    struct sc_db_err e = {0};
    if (mysql_library_init(0, NULL, NULL) || sc_relay_db_init(&d, &cfg, "bench-db-limit") ||
        sc_relay_db_open(&d, &e)) {
        fprintf(stderr, "relay_db_limit: %s\n", e.msg);
        return 1;
    }
    struct sc_relay_row *rows = calloc((size_t)batch, sizeof *rows);
    struct sc_relay_row **ptrs = calloc((size_t)batch, sizeof *ptrs);
    unsigned char *marked = calloc((size_t)batch, 1);
    if (!rows || !ptrs || !marked)
        return 1;
    long done = 0, batches = 0;
    double t0 = bench_now();
    while (done < n) {
        int k = sc_relay_db_claim(&d, rows, batch, &e);
        if (k < 0) {
            fprintf(stderr, "relay_db_limit: claim: %s\n", e.msg);
            return 1;
        }
        if (k == 0)
            break; /* the table ran dry before n */
        for (int i = 0; i < k; i++)
            ptrs[i] = &rows[i];
        if (sc_relay_db_mark_published(&d, ptrs, k, marked, &e)) {
            fprintf(stderr, "relay_db_limit: mark: %s\n", e.msg);
            return 1;
        }
        for (int i = 0; i < k; i++)
            sc_relay_row_clear(&rows[i]);
        done += k;
        batches++;
    }
    double dt = bench_now() - t0;
    printf("{\"events_per_s\": %.1f, \"events\": %ld, \"batches\": %ld, \"seconds\": %.3f}\n",
           dt > 0 ? (double)done / dt : 0.0, done, batches, dt);
    sc_relay_db_close(&d);
    sc_relay_db_free(&d);
    free(rows);
    free(ptrs);
    free(marked);
    mysql_library_end();
    return 0;
}
