/* The consume loop: workers (one thread, one database connection and two
 * broker connections each), their sessions and reconnects, and the loop that
 * gathers what is waiting into a batch for batch.c. */
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
#include "lifecycle.h"
#include "log.h"
#include "metrics.h"
#include "plugin.h"
#include "worker.h"

#define RECEIVE_POLL_MS 200
#define DB_IDLE_PING_MS 30000
#define PUBLISHER_SERVICE_MS 1000

/* ---- sessions and workers ------------------------------------------------ */

/* Moves this worker's contribution to a connection gauge. */
void sc_worker_gauge(atomic_int *g, int *mine, int up)
{
    if (*mine != up)
        atomic_fetch_add(g, up ? 1 : -1);
    *mine = up;
}

/* Replaces the worker's database session (whatever is left of it is closed)
 * with a fresh one: the sidecar's settings (autocommit off, UTC, bounded
 * lock waits) and its statements prepared, the gauge following. Returns 0,
 * or -1 with e filled. The one way every caller makes the session. */
static int db_session_open(struct worker *w, struct sc_db_err *e)
{
    sc_db_close(&w->db);
    int failed = sc_db_connect(&w->db, w->c->cfg, e) || sc_db_prepare_consumer(&w->db, e);
    sc_worker_gauge(&w->c->m.db_connected, &w->up_db, !failed);
    return failed ? -1 : 0;
}

/* After a handler contract violation. Returns 0, or -1 when the session
 * could not be made (the caller reconnects). */
int sc_worker_reset_db(struct worker *w)
{
    struct sc_db_err e = {0};
    struct sc_log_fields lf = {.consumer = w->c->k->name};
    if (db_session_open(w, &e)) {
        sc_log(SC_LOG_WARN, &lf, "database session reset failed: %s", e.msg);
        return -1;
    }
    sc_log(SC_LOG_WARN, &lf, "database session reset after a handler contract violation "
           "(database thread %lu)", w->db.thread_id);
    return 0;
}

void sc_worker_keep_alive(struct worker *w)
{
    int hb = w->c->cfg->amqp_heartbeat_s;
    int64_t now = sc_now_ms();
    if (hb <= 0 || now - w->last_heartbeat_ms < (int64_t)hb * 500)
        return;
    w->last_heartbeat_ms = now;
    sc_amqp_heartbeat(&w->in);
    sc_amqp_heartbeat(&w->out);
}

/* Waits ms with both broker connections kept alive. Returns -1 when a stop
 * was requested or the publishing connection was closed meanwhile. (The
 * consuming one is read only by receive: its frames are deliveries.) */
static int wait_keeping_broker(struct worker *w, int ms, char *err, size_t err_len)
{
    int64_t end = sc_now_ms() + ms;
    while (!sc_stop_requested()) {
        sc_worker_keep_alive(w);
        if (sc_amqp_service(&w->out, err, err_len))
            return -1;
        int64_t left = end - sc_now_ms();
        if (left <= 0)
            return 0;
        sc_sleep_ms(left < RECEIVE_POLL_MS ? (int)left : RECEIVE_POLL_MS);
    }
    return -1;
}

/* The database session is gone, or its last COMMIT failed, while the broker
 * session is fine: make the database session again in place, with backoff.
 * The deliveries prefetched behind the batch stay in hand: closing the
 * channel would return them too, and a quorum queue counts each return in
 * x-delivery-count, so a few database failovers in a row would dead-letter
 * messages that never ran. Returns 0, or -1 when a stop was requested, the
 * broker went away meanwhile or db_outage_hold_ms passed (a failover takes
 * seconds; longer, the database is out, or out of reach from here only, and
 * the deliveries go back to the queue for consumers that can reach it: the
 * caller resets everything, and session_open reconnects the database before
 * it consumes again). */
static int reconnect_db(struct worker *w)
{
    struct sc_log_fields lf = {.consumer = w->c->k->name};
    char err[512] = "";
    int hold_ms = w->c->k->db_outage_hold_ms;
    int64_t give_up = sc_now_ms() + hold_ms;
    sc_worker_gauge(&w->c->m.consuming, &w->up_consuming, 0);
    for (unsigned long long failed = 1; !sc_stop_requested(); failed++) {
        struct sc_db_err e = {0};
        if (db_session_open(w, &e) == 0) {
            sc_worker_gauge(&w->c->m.consuming, &w->up_consuming, 1);
            w->last_db_use_ms = sc_now_ms();
            sc_log(SC_LOG_INFO, &lf, "database session made again (database thread %lu); "
                   "broker session and deliveries in hand kept", w->db.thread_id);
            return 0;
        }
        lf.error_code = e.code;
        int64_t left = give_up - sc_now_ms();
        if (left <= 0) {
            sc_log(SC_LOG_WARN, &lf, "database connect failed: %s; attempt %llu: returning the "
                   "deliveries in hand after %d ms", e.msg, failed, hold_ms);
            return -1;
        }
        int delay = sc_backoff_ms(failed);
        if (delay > left)
            delay = (int)left; /* one last attempt when the hold ends */
        sc_log(SC_LOG_WARN, &lf, "database connect failed: %s; attempt %llu, retrying in %d ms",
               e.msg, failed, delay);
        lf.error_code = 0;
        if (wait_keeping_broker(w, delay, err, sizeof err)) {
            if (err[0])
                sc_log(SC_LOG_WARN, &lf, "publisher connection lost: %s", err);
            return -1;
        }
    }
    return -1;
}

static void session_close(struct worker *w)
{
    sc_amqp_close(&w->in);
    sc_amqp_close(&w->out);
    sc_db_close(&w->db);
    sc_worker_gauge(&w->c->m.db_connected, &w->up_db, 0);
    sc_worker_gauge(&w->c->m.amqp_connected, &w->up_amqp, 0);
    sc_worker_gauge(&w->c->m.consuming, &w->up_consuming, 0);
}

/* Opens the worker's database and broker sessions. Returns 0, or -1 with
 * why (and the database error code, if that was it) filled: the caller
 * decides to retry and logs it, once, with the attempt and the delay. */
static int session_open(struct worker *w, char *why, size_t why_len, unsigned *code)
{
    const struct sc_config *cfg = w->c->cfg;
    const struct sc_consumer_config *k = w->c->k;
    struct sc_log_fields lf = {.consumer = k->name};
    struct sc_db_err e = {0};
    char err[512], name[300];

    *code = 0;
    if (db_session_open(w, &e)) {
        *code = e.code;
        snprintf(why, why_len, "database connect failed: %s", e.msg);
        return -1;
    }
    snprintf(name, sizeof name, "sidecar consume %s worker %d", k->name, w->index);
    if (sc_amqp_connect(&w->in, cfg, name, err, sizeof err) ||
        sc_amqp_declare_consumer(&w->in, k, err, sizeof err)) {
        snprintf(why, why_len, "broker: %s", err);
        return -1;
    }
    snprintf(name, sizeof name, "sidecar publish %s worker %d", k->name, w->index);
    if (sc_amqp_connect(&w->out, cfg, name, err, sizeof err) ||
        sc_amqp_confirm_select(&w->out, err, sizeof err)) {
        snprintf(why, why_len, "broker (publisher): %s", err);
        return -1;
    }
    snprintf(name, sizeof name, "sidecar-%s-%d", k->name, w->index);
    sc_worker_gauge(&w->c->m.amqp_connected, &w->up_amqp, 1);
    if (sc_amqp_start_consume(&w->in, k->queue, k->prefetch, name, err, sizeof err)) {
        snprintf(why, why_len, "broker: %s", err);
        return -1;
    }
    sc_worker_gauge(&w->c->m.consuming, &w->up_consuming, 1);
    w->last_db_use_ms = sc_now_ms();
    sc_log(SC_LOG_INFO, &lf, "worker %d consuming from %s (prefetch %d, database thread %lu)",
           w->index, k->queue, k->prefetch, w->db.thread_id);
    return 0;
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
 * Returns the number of deliveries handled. */
static long consume_loop(struct worker *w, struct item *items)
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
        if (sc_now_ms() - last_service_ms > PUBLISHER_SERVICE_MS) {
            last_service_ms = sc_now_ms();
            if (sc_amqp_service(&w->out, err, sizeof err)) {
                sc_log(SC_LOG_WARN, &lf, "publisher connection lost: %s", err);
                break;
            }
        }
        enum sc_amqp_recv r = sc_amqp_receive(&w->in, &items[0].env, RECEIVE_POLL_MS, err, sizeof err);
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
            if (sc_now_ms() - w->last_db_use_ms > DB_IDLE_PING_MS) {
                w->last_db_use_ms = sc_now_ms();
                if (mysql_ping(w->db.conn)) {
                    sc_log(SC_LOG_WARN, &lf, "database connection lost while idle: %s",
                           mysql_error(w->db.conn));
                    if (reconnect_db(w))
                        break;
                }
            }
            continue;
        }
        items[0].received_us = sc_now_us();
        int n = 1, closed = 0, cancelled = 0;
        char cancel[512] = "";
        while (n < k->batch_max) {
            r = sc_amqp_receive(&w->in, &items[n].env, 0, err, sizeof err);
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
            items[n++].received_us = sc_now_us();
        }
        enum next next = NEXT_RESET;
        if (closed)
            sc_log(SC_LOG_WARN, &lf, "broker connection lost: %s", err); /* all requeued */
        else
            next = sc_batch_process(w, items, n);
        for (int i = 0; i < n; i++) {
            if (items[i].parsed)
                sc_event_free(&items[i].ev);
            items[i].parsed = 0;
            amqp_destroy_envelope(&items[i].env);
        }
        handled += n;
        if (next == NEXT_RESET || (next == NEXT_DB_LOST && reconnect_db(w)))
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
        int opened = session_open(w, why, sizeof why, &code) == 0;
        if (opened)
            handled = consume_loop(w, w->items);
        /* Closing the channel returns every unacked delivery to the queue. */
        session_close(w);
        /* Hand the connections' buffers back to the system: a daemon that
         * reconnects now and then should not keep its peak heap forever.
         * (Not under ASan: its allocator replaces glibc's, whose arenas
         * malloc_trim would then corrupt at thread exit.) */
#ifndef SC_NO_MALLOC_TRIM
        malloc_trim(0);
#endif
        if (sc_stop_requested())
            break;
        if (handled > 0)
            failures = 0;
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

int sc_consume_run(const struct sc_config *cfg)
{
    if (cfg->n_consumers == 0) {
        fprintf(stderr, "sidecar: consumers: at least one consumer is required to consume\n");
        return 2;
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
            w->index = j;
            w->items = calloc((size_t)cfg->consumers[i].batch_max, sizeof *w->items);
            w->reasons = malloc((size_t)cfg->consumers[i].batch_max * SC_REASON_LEN);
            if (!w->items || !w->reasons) {
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
    for (size_t i = 0; i < started; i++)
        pthread_join(ws[i].thread, NULL);
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
        free(ws[i].items);
        free(ws[i].reasons);
    }
    free(ws);
    free(cs);
    return started == n_workers ? 0 : 1;
}
