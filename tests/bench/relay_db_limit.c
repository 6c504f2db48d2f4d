/* relay_db_limit MYSQL_URL N BATCH [split]: the database's limit for the
 * relay's statements with no broker at all, over a loaded PENDING table,
 * batch by batch, as one relay does them: the real round transaction (the
 * conditional UPDATE marking the previous batch PUBLISHED, then the claim's
 * two index-range SELECTs and the lease UPDATE, one COMMIT). With "split",
 * the claim and the mark each commit on their own (two durable commits per
 * batch, the relay before one commit per round). Prints {"events_per_s":
 * ..., "batches": ..., "commits": ...}. */
#include "bench_common.h"
#include "relay/relay_db.h"
#include "relay/relay_message.h"

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: relay_db_limit MYSQL_URL N BATCH [split]\n");
        return 2;
    }
    int split = argc > 4 && strcmp(argv[4], "split") == 0;
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
    struct sc_relay_row *rows[2] = {calloc((size_t)batch, sizeof **rows), calloc((size_t)batch, sizeof **rows)};
    struct sc_relay_row **ptrs = calloc((size_t)batch, sizeof *ptrs);
    unsigned char *marked = calloc((size_t)batch, 1);
    if (!rows[0] || !rows[1] || !ptrs || !marked)
        return 1;
    long done = 0, batches = 0, commits = 0;
    int held = 0, cur = 0; /* rows[cur][0..held): claimed, to be marked */
    double t0 = bench_now();
    for (;;) {
        for (int i = 0; i < held; i++)
            ptrs[i] = &rows[cur][i];
        int at_commit, k;
        int want = done + held < n ? batch : 0;
        if (split) {
            if (held && sc_relay_db_mark_published(&d, ptrs, held, marked, &e)) {
                fprintf(stderr, "relay_db_limit: mark: %s\n", e.msg);
                return 1;
            }
            commits += held > 0;
            k = want ? sc_relay_db_claim(&d, rows[1 - cur], want, &e) : 0;
            commits += want > 0;
        } else {
            k = held || want ? sc_relay_db_mark_and_claim(&d, ptrs, held, marked, rows[1 - cur], want,
                                                          &at_commit, &e)
                             : 0;
            commits += held || want;
        }
        if (k < 0) {
            fprintf(stderr, "relay_db_limit: %s: %s\n", split ? "claim" : "mark and claim", e.msg);
            return 1;
        }
        for (int i = 0; i < held; i++)
            sc_relay_row_clear(&rows[cur][i]);
        done += held;
        batches += held > 0;
        cur = 1 - cur;
        held = k;
        if (k == 0)
            break; /* n reached, or the table ran dry */
    }
    double dt = bench_now() - t0;
    printf("{\"events_per_s\": %.1f, \"events\": %ld, \"batches\": %ld, \"commits\": %ld, "
           "\"seconds\": %.3f}\n", dt > 0 ? (double)done / dt : 0.0, done, batches, commits, dt);
    sc_relay_db_close(&d);
    sc_relay_db_free(&d);
    free(rows[0]);
    free(rows[1]);
    free(ptrs);
    free(marked);
    mysql_library_end();
    return 0;
}
