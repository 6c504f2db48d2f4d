/* publisher_rss AMQP_URL COUNT BATCH MANDATORY: publishes COUNT messages
 * through sc_amqp_publish_confirmed, BATCH at a time (1 is the consumer's
 * retry/dead-letter path, more is the relay), to the default exchange with a
 * routing key no queue has: the broker confirms each one (after a
 * basic.return when MANDATORY is 1, as for an unroutable relay event).
 * Prints one JSON line: confirms, RSS after a warm-up tenth and at the end.
 * Exit 0 when every message was confirmed, 1 otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sidecar/io/amqp_conn.h"
#include "sidecar/config.h"

static long rss_kib(void)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
        rss = -1;
    fclose(f);
    return rss < 0 ? -1 : rss * (sysconf(_SC_PAGESIZE) / 1024);
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: publisher_rss AMQP_URL COUNT BATCH MANDATORY\n");
        return 2;
    }
    long count = atol(argv[2]);
    int batch = atoi(argv[3]), mandatory = atoi(argv[4]);
    if (count < 10 || batch < 1 || batch > 1000) {
        fprintf(stderr, "publisher_rss: COUNT >= 10 and 1 <= BATCH <= 1000\n");
        return 2;
    }
    struct sc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.amqp_url = argv[1];
    cfg.amqp_heartbeat_s = 30;
    cfg.amqp_connect_timeout_ms = 5000;
    struct sc_amqp a;
    char err[512] = "";
    if (sc_amqp_connect(&a, &cfg, "publisher_rss", err, sizeof err) ||
        sc_amqp_confirm_select(&a, err, sizeof err)) {
        fprintf(stderr, "publisher_rss: %s\n", err);
        return 1;
    }
    static struct sc_publish msgs[1000];
    static char ids[1000][32];
    static amqp_basic_properties_t props[1000];
    const char *body = "{\"specversion\":\"1.0\",\"id\":\"00000000-0000-4000-8000-000000000000\"}";
    long confirmed = 0, returned = 0, sent = 0, rss_warm = -1;
    while (sent < count) {
        int n = (int)(count - sent < batch ? count - sent : batch);
        for (int i = 0; i < n; i++) {
            snprintf(ids[i], sizeof ids[i], "m-%ld", sent + i);
            memset(&props[i], 0, sizeof props[i]);
            props[i]._flags = AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG;
            props[i].message_id = amqp_cstring_bytes(ids[i]);
            props[i].delivery_mode = 1;
            msgs[i] = (struct sc_publish){.exchange = "", .routing_key = "publisher-rss.nowhere",
                                          .props = &props[i], .body = amqp_cstring_bytes(body),
                                          .mandatory = mandatory};
        }
        int acked = sc_amqp_publish_confirmed(&a, msgs, (size_t)n, 10000, err, sizeof err);
        if (acked < 0) {
            fprintf(stderr, "publisher_rss: after %ld: %s\n", sent, err);
            return 1;
        }
        for (int i = 0; i < n; i++) {
            confirmed += msgs[i].result == SC_PUB_ACKED || msgs[i].result == SC_PUB_RETURNED;
            returned += msgs[i].result == SC_PUB_RETURNED;
        }
        sent += n;
        if (rss_warm < 0 && sent >= count / 10)
            rss_warm = rss_kib();
    }
    char why[256] = "";
    if (sc_amqp_service(&a, why, sizeof why)) {
        fprintf(stderr, "publisher_rss: the connection failed at the end: %s\n", why);
        return 1;
    }
    long rss_end = rss_kib();
    printf("{\"sent\": %ld, \"confirmed\": %ld, \"returned\": %ld, \"rss_warm_kib\": %ld, "
           "\"rss_end_kib\": %ld, \"growth_kib\": %ld}\n",
           sent, confirmed, returned, rss_warm, rss_end, rss_end - rss_warm);
    sc_amqp_close(&a);
    return confirmed == count ? 0 : 1;
}
