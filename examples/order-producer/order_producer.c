/* order-producer: submits orders through the outbox helper, the way a
 * business service would, and never replays an UNKNOWN blindly.
 *
 *   order-producer [--count N] [--rate PER_S] [--tenant T] [--prefix P] [--start I]
 *   order-producer --event AGGREGATE_TYPE AGGREGATE_ID EVENT_TYPE PAYLOAD_JSON [TRACEPARENT [TRACESTATE]]
 *
 * --event writes one outbox event through sc_outbox_write, with no business
 * row, and prints {"event_id":..,"outcome":..,"error":..}; exit 0 when it
 * committed (an event the helper refuses is rolled_back with the reason).
 *
 * The database URL comes from SIDECAR_MYSQL_URL (mysql://user:pass@host:port/db),
 * or from the file named by SIDECAR_MYSQL_URL_FILE.
 * One JSON line per request on stdout:
 *   {"request_id":..,"event_id":..,"order_id":..,"outcome":..,"attempts":..,"reconciled":..}
 * outcome: committed | already_accepted | failed. Exit 0 when every request
 * ended accepted. */
#include <getopt.h>
#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "orders.h"
#include "sidecar/outbox.h"
#include "sidecar/io/url.h"

#define MAX_ATTEMPTS 8

static MYSQL *db_connect(const char *url)
{
    struct sc_mysql_url u;
    char err[256];
    if (sc_mysql_url_parse(url, &u, err, sizeof err)) {
        fprintf(stderr, "order-producer: %s\n", err);
        exit(2);
    }
    MYSQL *c = mysql_init(NULL);
    my_bool off = 0;
    unsigned timeout = 10;
    mysql_options(c, MYSQL_OPT_RECONNECT, &off);
    mysql_options(c, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    mysql_options(c, MYSQL_OPT_READ_TIMEOUT, &timeout);
    mysql_options(c, MYSQL_INIT_COMMAND, "SET time_zone = '+00:00'");
    if (!mysql_real_connect(c, u.socket ? NULL : u.host, u.user, u.password, u.database, u.port,
                            u.socket, 0)) {
        fprintf(stderr, "order-producer: connect: %s\n", mysql_error(c));
        mysql_close(c);
        c = NULL;
    }
    sc_mysql_url_free(&u);
    return c;
}

/* --event: one bare outbox event. */
static int write_event(MYSQL *conn, char **argv, int argc)
{
    struct sc_outbox_event ev = {.aggregate_type = argv[0], .event_type = argv[2],
                                 .event_version = 1, .payload_json = argv[3],
                                 .traceparent = argc > 4 ? argv[4] : NULL,
                                 .tracestate = argc > 5 ? argv[5] : NULL};
    struct sc_outbox_error err = {0};
    sc_outbox_new_event_id(ev.event_id);
    snprintf(ev.aggregate_id, sizeof ev.aggregate_id, "%s", argv[1]);
    enum sc_outbox_outcome oc = sc_outbox_write(conn, NULL, NULL, &ev, &err);
    /* the reason is plain ASCII text without quotes or backslashes */
    for (char *p = err.message; *p; p++)
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
            *p = ' ';
    printf("{\"event_id\":\"%s\",\"outcome\":\"%s\",\"code\":%u,\"error\":\"%s\"}\n", ev.event_id,
           sc_outbox_outcome_name(oc), err.code, err.message);
    return oc == SC_OUTBOX_COMMITTED ? 0 : 1;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Keeps reconnecting until the database answers (bounded). */
static MYSQL *reconnect(const char *url, MYSQL *old)
{
    if (old)
        mysql_close(old);
    for (int i = 0; i < 50; i++) {
        MYSQL *c = db_connect(url);
        if (c)
            return c;
        sleep_ms(200);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long count = 1, start = 1;
    double rate = 0;
    const char *tenant = "demo", *prefix = "req";
    static const struct option opts[] = {
        {"count", required_argument, 0, 'n'}, {"rate", required_argument, 0, 'r'},
        {"tenant", required_argument, 0, 't'}, {"prefix", required_argument, 0, 'p'},
        {"start", required_argument, 0, 's'}, {"event", no_argument, 0, 'e'}, {0, 0, 0, 0}};
    int o, event = 0;
    while ((o = getopt_long(argc, argv, "n:r:t:p:s:e", opts, NULL)) != -1) {
        switch (o) {
        case 'e': event = 1; break;
        case 'n': count = atol(optarg); break;
        case 'r': rate = atof(optarg); break;
        case 't': tenant = optarg; break;
        case 'p': prefix = optarg; break;
        case 's': start = atol(optarg); break;
        default:
            fprintf(stderr, "usage: order-producer [--count N] [--rate PER_S] [--tenant T] "
                            "[--prefix P] [--start I]\n"
                            "       order-producer --event AGGREGATE_TYPE AGGREGATE_ID EVENT_TYPE "
                            "PAYLOAD_JSON\n");
            return 2;
        }
    }
    if (event && (argc - optind < 4 || argc - optind > 6)) {
        fprintf(stderr, "order-producer: --event takes AGGREGATE_TYPE AGGREGATE_ID EVENT_TYPE "
                        "PAYLOAD_JSON\n");
        return 2;
    }
    const char *url = getenv("SIDECAR_MYSQL_URL");
    static char from_file[1024];
    const char *file = getenv("SIDECAR_MYSQL_URL_FILE");
    if ((!url || !*url) && file && *file) {
        /* a mounted secret; one trailing newline is not part of it */
        FILE *fp = fopen(file, "r");
        if (fp && fgets(from_file, sizeof from_file, fp)) {
            from_file[strcspn(from_file, "\r\n")] = 0;
            url = from_file;
        }
        if (fp)
            fclose(fp);
    }
    if (!url || !*url) {
        fprintf(stderr, "order-producer: set SIDECAR_MYSQL_URL (or SIDECAR_MYSQL_URL_FILE)\n");
        return 2;
    }
    if (mysql_library_init(0, NULL, NULL))
        return 1;
    MYSQL *conn = reconnect(url, NULL);
    if (!conn)
        return 1;
    if (event) {
        int rc = write_event(conn, argv + optind, argc - optind);
        mysql_close(conn);
        mysql_library_end();
        return rc;
    }
    int all_ok = 1;
    for (long i = start; i < start + count; i++) {
        char request_id[128], event_id[37];
        snprintf(request_id, sizeof request_id, "%s-%ld", prefix, i);
        /* One event id per request, made before the first attempt and kept
         * for every retry of this request. */
        sc_outbox_new_event_id(event_id);
        struct sc_order_result res = {0};
        struct sc_outbox_error err = {0};
        const char *outcome = "failed";
        int attempts = 0, reconciled = 0;
        while (attempts < MAX_ATTEMPTS) {
            attempts++;
            enum sc_outbox_outcome oc = sc_order_accept(conn, tenant, request_id, event_id, &res, &err);
            if (oc == SC_OUTBOX_COMMITTED) {
                outcome = "committed";
                break;
            }
            if (oc == SC_OUTBOX_UNKNOWN)
                conn = reconnect(url, conn);
            if (!conn)
                break;
            if (oc == SC_OUTBOX_ROLLED_BACK && err.code != 1062 && err.code < 2000) {
                sleep_ms(50L * attempts); /* nothing was written: a plain retry is safe */
                continue;
            }
            /* UNKNOWN, or the request exists already: ask the primary. */
            int found = sc_order_reconcile(conn, tenant, request_id, &res, &err);
            reconciled++;
            if (found == 1) {
                outcome = oc == SC_OUTBOX_UNKNOWN ? "committed" : "already_accepted";
                /* The stored event id is the truth, whatever this run made. */
                snprintf(event_id, sizeof event_id, "%s", res.acceptance_event_id);
                break;
            }
            if (found < 0)
                conn = reconnect(url, conn);
            if (!conn)
                break;
            sleep_ms(50L * attempts);
        }
        if (strcmp(outcome, "failed") == 0)
            all_ok = 0;
        printf("{\"request_id\":\"%s\",\"event_id\":\"%s\",\"order_id\":%lld,\"outcome\":\"%s\","
               "\"attempts\":%d,\"reconciled\":%d,\"last_error\":%u}\n",
               request_id, event_id, res.order_id, outcome, attempts, reconciled, err.code);
        fflush(stdout);
        if (!conn)
            break;
        if (rate > 0)
            sleep_ms((long)(1000.0 / rate));
    }
    if (conn)
        mysql_close(conn);
    mysql_library_end();
    return all_ok ? 0 : 1;
}
