/* db_limit MYSQL_URL CONSUMER N BATCH: the database's limit for this
 * workload: the sidecar's statements (a savepoint, the consumed_event claim
 * and the sample handler's insert per event, one COMMIT per batch) with no
 * broker at all. Prints events/s. */
#include <uuid/uuid.h>

#include "bench_common.h"
#include "sidecar/db.h"

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
    double t0 = bench_now();
    for (long i = 0; i < n;) {
        for (int j = 0; j < batch && i < n; j++, i++) {
            char id[37], sql[300];
            uuid_t u;
            uuid_generate_random(u);
            uuid_unparse_lower(u, id);
            snprintf(sql, sizeof sql,
                     "INSERT INTO notification_job (event_id, order_id, source_version, status, "
                     "created_at) VALUES ('%s', %ld, 1, 'PENDING', UTC_TIMESTAMP(6))", id, 1000 + i);
            if ((batch > 1 && sc_db_query(&db, "SAVEPOINT sc_item", &e)) ||
                sc_db_insert_consumed(&db, consumer, id, &e) || sc_db_query(&db, sql, &e)) {
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
    sc_db_close(&db);
    mysql_library_end();
    return 0;
}
