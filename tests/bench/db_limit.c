/* db_limit MYSQL_URL CONSUMER N BATCH [rows]: the database's limit for this
 * workload: the sidecar's statements with no broker at all. By default its
 * fast path (one multi-row claim INSERT and one multi-row notification_job
 * INSERT per batch, then COMMIT); with "rows", its per-delivery path (a
 * savepoint, the claim and the effect per event). Prints events/s. */
#include <uuid/uuid.h>

#include "bench_common.h"
#include "sidecar/io/db.h"

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: db_limit MYSQL_URL CONSUMER N BATCH\n");
        return 2;
    }
    struct sc_config cfg;
    bench_config(&cfg, "amqp://x", argv[1]);
    const char *consumer = argv[2];
    long n = atol(argv[3]);
    int batch = atoi(argv[4]);
    struct sc_db db;
    struct sc_db_err e = {0};
    if (mysql_library_init(0, NULL, NULL) || sc_db_connect(&db, &cfg, &e) ||
        sc_db_prepare_consumer(&db, &e)) {
        fprintf(stderr, "db_limit: %s\n", e.msg);
        return 1;
    }
    int per_row = argc > 5 && strcmp(argv[5], "rows") == 0;
    char (*ids)[37] = calloc((size_t)batch, 37);
    const char **idp = calloc((size_t)batch, sizeof *idp);
    char *sql = malloc((size_t)batch * 100 + 200);
    double t0 = bench_now();
    for (long i = 0; i < n;) {
        int k = 0;
        for (; k < batch && i < n; k++, i++) {
            uuid_t u;
            uuid_generate_random(u);
            uuid_unparse_lower(u, ids[k]);
            idp[k] = ids[k];
            if (!per_row)
                continue;
            snprintf(sql, 300,
                     "INSERT INTO notification_job (event_id, order_id, source_version, status, "
                     "created_at) VALUES ('%s', %ld, 1, 'PENDING', UTC_TIMESTAMP(6))", ids[k], 1000 + i);
            if ((batch > 1 && sc_db_query(&db, "SAVEPOINT sc_item", &e)) ||
                sc_db_insert_consumed(&db, consumer, ids[k], &e) || sc_db_query(&db, sql, &e)) {
                fprintf(stderr, "db_limit: %s\n", e.msg);
                return 1;
            }
        }
        if (!per_row) {
            size_t off = (size_t)sprintf(sql, "INSERT INTO notification_job (event_id, order_id, "
                                              "source_version, status, created_at) VALUES ");
            for (int j = 0; j < k; j++)
                off += (size_t)sprintf(sql + off, "%s('%s', %ld, 1, 'PENDING', UTC_TIMESTAMP(6))",
                                       j ? ", " : "", ids[j], 1000 + i + j);
            if (sc_db_insert_consumed_many(&db, consumer, idp, k, &e) || sc_db_query(&db, sql, &e)) {
                fprintf(stderr, "db_limit: %s\n", e.msg);
                return 1;
            }
        }
        if (sc_db_commit(&db, &e)) {
            fprintf(stderr, "db_limit: commit: %s\n", e.msg);
            return 1;
        }
    }
    double dt = bench_now() - t0;
    printf("{\"events\": %ld, \"seconds\": %.3f, \"events_per_s\": %.1f}\n", n, dt, (double)n / dt);
    free(ids);
    free(idp);
    free(sql);
    sc_db_close(&db);
    mysql_library_end();
    return 0;
}
