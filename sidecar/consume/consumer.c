/* The consume loop: workers (one thread each; their sessions are worker.c's),
 * the loop that gathers what is waiting into a batch for batch.c, and the hold
 * of a batch whose database session went away. */
#include "consumer.h"

#include <malloc.h>
#include <mysql.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/amqp_conn.h"
#include "io/db.h"
#include "io/http.h"
#include "io/schema.h"
#include "lifecycle.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "otel.h"
#include "plugin.h"
#include "consume/batch_io.h"
#include "consume/held.h"
#include "consume/worker.h"

#define RECEIVE_POLL_MS 200
#define DB_IDLE_PING_MS 30000

/* Runs the batch; while its database session is gone (before COMMIT, or
 * with it), makes the session again and runs the same batch on it, every
 * delivery still in hand: no nack, so no x-delivery-count spent on an
 * outage. db_outage_hold_ms at most, counted from the first loss, also
 * when every new session comes but loses the batch again (a COMMIT cut
 * each time): then everything in hand goes back to the broker. */
enum next sc_consume_batch(struct worker *w, struct delivery *dls, int n)
{
    enum next next = sc_batch_process(w, dls, n);
    if (next == NEXT_DB_HOLD)
        w->hold_since_ms = sc_now_ms();
    for (unsigned long long again = 0; next == NEXT_DB_HOLD;) {
        /* A fresh session lost again (a node that refuses writes, a COMMIT
         * cut each time): wait before the next one (backoff, heartbeats
         * kept) instead of remaking sessions in a loop. */
        if (w->holding && sc_worker_wait(w, sc_backoff_ms(++again), w->hold_since_ms)) {
            next = NEXT_RESET;
            break;
        }
        if (sc_worker_reconnect_db(w, w->hold_since_ms)) {
            next = NEXT_RESET; /* closing the channel returns the batch */
            break;
        }
        w->holding = 1;
        next = sc_batch_process(w, dls, n);
    }
    w->holding = 0;
    w->hold_one_by_one = w->hold_blamed = 0;
    w->hold_culprit[0] = 0;
    return next;
}

/* The broker cancelled the consumer (its queue was deleted): not ready
 * until the queue, its bindings and the consumer are back. Returns 0, or -1
 * (the caller resets the session, which declares them with backoff). */
static int consume_again(struct worker *w, const char *why)
{
    struct sc_log_fields lf = {.consumer = w->c->k->name};
    char err[512];
    atomic_fetch_add(&w->c->m.cancelled, 1);
    sc_worker_gauge(&w->c->m.consuming, &w->up_consuming, 0);
    sc_log(SC_LOG_WARN, &lf, "%s: declaring it again", why);
    if (sc_amqp_consume_again(&w->in, w->c->k, err, sizeof err)) {
        sc_log(SC_LOG_WARN, &lf, "consuming again failed: %s", err);
        return -1;
    }
    sc_worker_gauge(&w->c->m.consuming, &w->up_consuming, 1);
    sc_log(SC_LOG_INFO, &lf, "worker %d consuming from %s again", w->index, w->c->k->queue);
    return 0;
}

/* Consumes until a connection fails or a stop is requested. A batch takes
 * what is already waiting, up to batch_max, and closes as soon as nothing
 * more is: under low load every delivery is its own batch, without delay.
 * A batch-mode message closes it too (its members are events of the
 * batch). Returns the number of deliveries handled. */
static long consume_loop(struct worker *w, struct delivery *dls)
{
    const struct sc_consumer_config *k = w->c->k;
    struct sc_log_fields lf = {.consumer = k->name};
    long handled = 0;
    int64_t last_service_ms = sc_now_ms();
    char err[512];
    while (!sc_stop_requested()) {
        err[0] = 0;
        /* The publishing connection is idle between dead-letters and
         * retries: service its heartbeats even while deliveries stream. */
        if (sc_worker_service_publisher(w, &last_service_ms))
            break;
        enum sc_amqp_recv r = sc_amqp_receive(&w->in, &dls[0].env, RECEIVE_POLL_MS, err, sizeof err);
        if (r == SC_AMQP_RECV_CLOSED) {
            sc_log(SC_LOG_WARN, &lf, "broker connection lost: %s", err);
            break;
        }
        if (r == SC_AMQP_RECV_CANCELLED) {
            if (consume_again(w, err))
                break;
            continue;
        }
        if (r == SC_AMQP_RECV_TIMEOUT) {
            if (sc_worker_check_queues(w, 0))
                break;
            if (sc_now_ms() - w->last_db_use_ms > DB_IDLE_PING_MS) {
                w->last_db_use_ms = sc_now_ms();
                if (mysql_ping(w->db.conn)) {
                    sc_log(SC_LOG_WARN, &lf, "database connection lost while idle: %s",
                           mysql_error(w->db.conn));
                    if (sc_worker_reconnect_db(w, sc_now_ms()))
                        break;
                }
            }
            continue;
        }
        dls[0].received_us = sc_now_us();
        w->last_delivery_ms = sc_now_ms();
        int n = 1, closed = 0, cancelled = 0;
        char cancel[512] = "";
        /* A batch holds its bodies until it is settled: it stops gathering
         * once they reach max_message_bytes (one larger body, to be
         * dead-lettered, ends it at once). */
        size_t bytes = dls[0].env.message.body.len;
        while (n < k->batch_max && bytes < (size_t)k->max_message_bytes &&
               !sc_batch_ends_gathering(w, &dls[n - 1].env)) {
            r = sc_amqp_receive(&w->in, &dls[n].env, 0, err, sizeof err);
            if (r == SC_AMQP_RECV_CANCELLED) {
                cancelled = 1; /* the deliveries in hand are still valid: settle them first */
                snprintf(cancel, sizeof cancel, "%s", err);
            }
            if (r == SC_AMQP_RECV_TIMEOUT || cancelled)
                break;
            if (r == SC_AMQP_RECV_CLOSED) {
                closed = 1;
                break;
            }
            bytes += dls[n].env.message.body.len;
            dls[n++].received_us = sc_now_us();
        }
        enum next next = NEXT_RESET;
        if (closed)
            sc_log(SC_LOG_WARN, &lf, "broker connection lost: %s", err); /* all requeued */
        else
            next = sc_consume_batch(w, dls, n);
        sc_batch_release(w);
        for (int i = 0; i < n; i++)
            amqp_destroy_envelope(&dls[i].env);
        handled += n;
        if (next == NEXT_RESET || (next == NEXT_DB_LOST && sc_worker_reconnect_db(w, sc_now_ms())))
            break;
        if (cancelled && consume_again(w, cancel))
            break;
    }
    return handled;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    unsigned long long failures = 0; /* sessions in a row that handled nothing */
    unsigned long long failed_opens = 0; /* attempts in a row that could not open a session */
    mysql_thread_init();
    struct sc_log_fields lf = {.consumer = w->c->k->name};
    while (!sc_stop_requested()) {
        long handled = 0;
        char why[700] = "";
        unsigned code = 0;
        int opened = sc_worker_open(w, why, sizeof why, &code) == 0;
        if (opened)
            handled = w->c->cfg->tenants.present ? sc_consume_tenants(w)
                      : w->c->k->ordering.present ? sc_consume_ordered(w)
                                                  : consume_loop(w, w->dls);
        /* Closing the channel returns every unacked delivery to the queue. */
        sc_worker_close(w);
        /* Hand the connections' buffers back to the system: a daemon that
         * reconnects now and then should not keep its peak heap forever.
         * (Not under ASan: its allocator replaces glibc's, whose arenas
         * malloc_trim would then corrupt at thread exit.) */
#ifndef SC_NO_MALLOC_TRIM
        malloc_trim(0);
#endif
        if (sc_stop_requested())
            break;
        if (handled > 0 || w->reopen_now)
            failures = 0;
        w->reopen_now = 0;
        int delay = sc_backoff_ms(++failures);
        failed_opens = opened ? 0 : failed_opens + 1;
        if (!opened) {
            /* One warn per attempt, numbered (failed opens in a row; the
             * backoff also counts sessions that ended having handled
             * nothing), with its wait: a server that stays away shows how
             * long it has been, not one line repeated. */
            lf.error_code = code;
            sc_log(SC_LOG_WARN, &lf, "%s; attempt %llu, retrying in %d ms", why, failed_opens, delay);
        }
        sc_sleep_ms(delay);
    }
    mysql_thread_end();
    return NULL;
}

static int load_handlers(struct consumer *cs, const struct sc_config *cfg)
{
    for (size_t i = 0; i < cfg->n_consumers; i++) {
        char err[1024];
        cs[i].cfg = cfg;
        cs[i].k = &cfg->consumers[i];
        sc_consumer_metrics_init(&cs[i].m, cs[i].k->name, cs[i].k->workers);
        cs[i].m.tenants = cfg->tenants.present;
        cs[i].m.waiting.top_n = cfg->tenants.metrics_top;
        if (sc_plugin_load(&cs[i].plugin, cs[i].k->handler, cs[i].k->handler_config, err,
                           sizeof err)) {
            /* One line: the JSON logger writes to stderr too, so a plain
             * copy would only say it twice on the same stream. */
            struct sc_log_fields lf = {.consumer = cs[i].k->name};
            sc_log(SC_LOG_ERROR, &lf, "consumers[%zu].handler: %s", i, err);
            for (size_t j = 0; j < i; j++)
                sc_plugin_unload(&cs[j].plugin);
            return -1;
        }
    }
    return 0;
}

/* Declares each quorum consumer's queues once before any worker starts: a
 * queue whose delivery limit would let the broker drop messages before
 * max_attempts dead-letters them stops start-up (exit 2) instead of leaving
 * the workers retrying. A broker out of reach, or any other refusal, is left
 * to the workers, which declare with backoff and say why. */
static int declare_at_start(const struct sc_config *cfg)
{
    for (size_t i = 0; i < cfg->n_consumers; i++) {
        const struct sc_consumer_config *k = &cfg->consumers[i];
        if (strcmp(k->queue_type, "quorum") != 0)
            continue;
        struct sc_log_fields lf = {.consumer = k->name};
        struct sc_amqp a;
        char err[1024];
        if (sc_amqp_connect(&a, cfg, "sidecar consume (start)", err, sizeof err)) {
            sc_log(SC_LOG_WARN, &lf, "queues not checked at start: broker: %s; the workers "
                   "declare them", err);
            return 0;
        }
        int rc = sc_amqp_declare_consumer(&a, k, err, sizeof err);
        sc_amqp_close(&a);
        if (rc == SC_AMQP_REFUSED) {
            sc_log(SC_LOG_ERROR, &lf, "consumers[%zu]: %s", i, err);
            return 2;
        }
    }
    return 0;
}

int sc_consume_run(const struct sc_config *cfg)
{
    if (cfg->n_consumers == 0) {
        fprintf(stderr, "sidecar: consumers: at least one consumer is required to consume\n");
        return 2;
    }
    int parts = SC_SCHEMA_CONSUMER;
    for (size_t i = 0; i < cfg->n_consumers; i++)
        if (sc_held_mode(&cfg->consumers[i]))
            parts |= SC_SCHEMA_HOLD;
    /* With tenants each tenant's session proves its schema when it opens
     * (the claim is prepared there): a tenant without one waits. */
    if ((!cfg->tenants.present && sc_schema_startup(cfg, parts)) || declare_at_start(cfg))
        return 2;
    char oerr[256];
    if (cfg->otel_endpoint && sc_otel_start(cfg->otel_endpoint, "sidecar-consume", oerr, sizeof oerr)) {
        sc_error("%s", oerr);
        return 1;
    }
    struct consumer *cs = calloc(cfg->n_consumers, sizeof *cs);
    if (!cs)
        return 1;
    if (load_handlers(cs, cfg)) {
        free(cs);
        return 2;
    }
    size_t n_workers = 0;
    for (size_t i = 0; i < cfg->n_consumers; i++) {
        n_workers += (size_t)cfg->consumers[i].workers;
        sc_metrics_register_consumer(&cs[i].m);
    }
    struct worker *ws = calloc(n_workers, sizeof *ws);
    struct sc_http *http = NULL;
    char err[512];
    if (ws && strcmp(cfg->http_listen, "off") != 0 &&
        !(http = sc_http_start(cfg->http_listen, err, sizeof err))) {
        sc_error("%s", err); /* once: this line goes to stderr already */
        free(ws);
        ws = NULL;
    }
    if (!ws) {
        for (size_t i = 0; i < cfg->n_consumers; i++)
            sc_plugin_unload(&cs[i].plugin);
        free(cs);
        return 1;
    }
    size_t started = 0;
    for (size_t i = 0; i < cfg->n_consumers; i++) {
        for (int j = 0; j < cfg->consumers[i].workers; j++) {
            struct worker *w = &ws[started];
            w->c = &cs[i];
            w->io = &sc_batch_io_real;
            w->index = j;
            int batch_max = cfg->consumers[i].batch_max;
            w->items_cap = batch_max - 1 + SC_MESSAGE_BATCH_MAX;
            /* With tenants the whole prefetch is grouped by tenant. */
            int in_hand = cfg->tenants.present ? sc_tenant_in_hand(&cfg->consumers[i]) : batch_max;
            w->dls = calloc((size_t)in_hand, sizeof *w->dls);
            w->items = calloc((size_t)w->items_cap, sizeof *w->items);
            w->reasons = malloc((size_t)w->items_cap * SC_REASON_LEN);
            if (!w->dls || !w->items || !w->reasons) {
                sc_error("out of memory");
                sc_request_stop();
                break;
            }
            if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
                sc_error("cannot start a worker thread");
                sc_request_stop();
                break;
            }
            started++;
        }
    }
    if (started == n_workers)
        sc_notify_ready("consuming: workers started, /readyz tells when connected");
    for (size_t i = 0; i < started; i++)
        pthread_join(ws[i].thread, NULL);
    sc_otel_stop(); /* the spans of the last batches */
    sc_http_stop(http); /* before the metrics it reads go away */
    for (size_t i = 0; i < cfg->n_consumers; i++) {
        atomic_ullong *o = cs[i].m.outcomes;
        struct sc_log_fields lf = {.consumer = cs[i].k->name};
        sc_log(SC_LOG_INFO, &lf,
               "stopped: applied=%llu duplicate=%llu retried=%llu dead_lettered=%llu unknown=%llu "
               "malformed=%llu",
               atomic_load(&o[SC_OUT_APPLIED]), atomic_load(&o[SC_OUT_DUPLICATE]),
               atomic_load(&o[SC_OUT_RETRIED]), atomic_load(&o[SC_OUT_DEAD_LETTERED]),
               atomic_load(&o[SC_OUT_UNKNOWN]), atomic_load(&o[SC_OUT_MALFORMED]));
        sc_plugin_unload(&cs[i].plugin);
    }
    for (size_t i = 0; i < n_workers; i++) {
        free(ws[i].dls);
        free(ws[i].items);
        free(ws[i].reasons);
    }
    free(ws);
    for (size_t i = 0; i < cfg->n_consumers; i++)
        sc_tenant_series_free(&cs[i].m.waiting);
    free(cs);
    return started == n_workers ? 0 : 1;
}
