#include "consumer.h"

#include <mysql.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "amqp_conn.h"
#include "db.h"
#include "event.h"
#include "fault.h"
#include "lifecycle.h"
#include "log.h"
#include "plugin.h"

#define RECEIVE_POLL_MS 200
#define DB_IDLE_PING_MS 30000
#define PUBLISHER_SERVICE_MS 1000
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 30000

/* Headers the sidecar writes on messages it republishes. */
#define H_ATTEMPTS "x-sidecar-attempts"
#define H_REASON "x-sidecar-reason"
#define H_CONSUMER "x-sidecar-consumer"
#define H_FAILED_AT "x-sidecar-failed-at"
#define H_ORIG_EXCHANGE "x-sidecar-original-exchange"
#define H_ORIG_ROUTING_KEY "x-sidecar-original-routing-key"
#define H_LAST_ERROR "x-sidecar-last-error"

struct consumer_stats {
    atomic_ulong applied, duplicate, retried, dead_lettered, unknown, malformed;
};

struct consumer {
    const struct sc_config *cfg;
    const struct sc_consumer_config *k;
    struct sc_plugin plugin;
    struct consumer_stats stats;
};

struct worker {
    struct consumer *c;
    int index;
    struct sc_db db;
    struct sc_amqp in;   /* consuming connection */
    struct sc_amqp out;  /* publishing connection, confirm mode: DLQ and retries */
    pthread_t thread;
    int64_t last_db_use_ms;
};

/* What the loop does after a delivery. */
enum next { NEXT_CONTINUE, NEXT_RESET };

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void rfc3339_now(char *out, size_t len)
{
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    size_t n = strftime(out, len, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, len - n, ".%06ldZ", (long)tv.tv_usec);
}

/* ---- headers of republished messages ------------------------------------ */

struct headers {
    amqp_table_entry_t *e;
    int n, cap;
};

/* Starts from the delivery's headers minus the keys the sidecar rewrites. */
static int headers_from(struct headers *h, const amqp_table_t *old)
{
    int n_old = old ? old->num_entries : 0;
    h->cap = n_old + 8;
    h->n = 0;
    if (!(h->e = calloc((size_t)h->cap, sizeof *h->e)))
        return -1;
    static const char *const rewritten[] = {H_ATTEMPTS, H_REASON, H_CONSUMER, H_FAILED_AT,
                                            H_LAST_ERROR};
    for (int i = 0; i < n_old; i++) {
        const amqp_table_entry_t *e = &old->entries[i];
        int drop = 0;
        for (size_t j = 0; j < sizeof rewritten / sizeof *rewritten; j++)
            drop |= e->key.len == strlen(rewritten[j]) &&
                    memcmp(e->key.bytes, rewritten[j], e->key.len) == 0;
        if (!drop)
            h->e[h->n++] = *e;
    }
    return 0;
}

static void headers_str(struct headers *h, const char *key, amqp_bytes_t val)
{
    amqp_table_entry_t *e = &h->e[h->n++];
    e->key = amqp_cstring_bytes(key);
    e->value.kind = AMQP_FIELD_KIND_UTF8;
    e->value.value.bytes = val;
}

static void headers_int(struct headers *h, const char *key, int64_t val)
{
    amqp_table_entry_t *e = &h->e[h->n++];
    e->key = amqp_cstring_bytes(key);
    e->value.kind = AMQP_FIELD_KIND_I64;
    e->value.value.i64 = val;
}

static const amqp_table_t *delivery_headers(const amqp_envelope_t *env)
{
    const amqp_basic_properties_t *p = &env->message.properties;
    return (p->_flags & AMQP_BASIC_HEADERS_FLAG) ? &p->headers : NULL;
}

/* The first exchange and routing key the message was published with. */
static void headers_original_route(struct headers *h, const amqp_envelope_t *env)
{
    const amqp_table_t *old = delivery_headers(env);
    if (!sc_amqp_header_bytes(old, H_ORIG_EXCHANGE).len &&
        !sc_amqp_header_bytes(old, H_ORIG_ROUTING_KEY).len) {
        headers_str(h, H_ORIG_EXCHANGE, env->exchange);
        headers_str(h, H_ORIG_ROUTING_KEY, env->routing_key);
    }
}

/* Publishes a copy of the delivery to the default exchange with routing key
 * `queue` and the given headers, under confirms. Returns 0 when confirmed. */
static int republish(struct worker *w, const amqp_envelope_t *env, const char *queue,
                     struct headers *h, const struct sc_log_fields *lf)
{
    amqp_basic_properties_t props = env->message.properties;
    props._flags |= AMQP_BASIC_HEADERS_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG;
    props.headers.num_entries = h->n;
    props.headers.entries = h->e;
    props.delivery_mode = AMQP_DELIVERY_PERSISTENT;
    struct sc_publish msg = {.exchange = "", .routing_key = queue, .props = &props,
                             .body = env->message.body, .mandatory = 1};
    char err[256] = "";
    int acked = sc_amqp_publish_confirmed(&w->out, &msg, 1, 10000, err, sizeof err);
    if (acked == 1)
        return 0;
    sc_log(SC_LOG_ERROR, lf, "publish to %s not confirmed (%s%s%s): the delivery is not acked",
           queue, sc_publish_result_name(msg.result), err[0] ? ": " : "", err);
    return -1;
}

/* ---- outcomes ------------------------------------------------------------ */

static enum next ack(struct worker *w, const amqp_envelope_t *env, const struct sc_log_fields *lf)
{
    if (sc_amqp_ack(&w->in, env->delivery_tag, 0) == 0)
        return NEXT_CONTINUE;
    sc_log(SC_LOG_WARN, lf, "ack could not be sent; the broker will redeliver");
    return NEXT_RESET;
}

/* Publishes the delivery to the dead-letter queue with the reason headers and
 * acks the original only once the broker confirmed the copy. */
static enum next dead_letter(struct worker *w, const amqp_envelope_t *env,
                             struct sc_log_fields *lf, const char *reason, int attempt)
{
    const struct sc_consumer_config *k = w->c->k;
    struct headers h;
    char failed_at[64];
    if (headers_from(&h, delivery_headers(env)))
        return NEXT_RESET;
    rfc3339_now(failed_at, sizeof failed_at);
    headers_str(&h, H_REASON, amqp_cstring_bytes(reason));
    headers_str(&h, H_CONSUMER, amqp_cstring_bytes(k->name));
    headers_int(&h, H_ATTEMPTS, attempt);
    headers_str(&h, H_FAILED_AT, amqp_cstring_bytes(failed_at));
    headers_original_route(&h, env);
    int rc = republish(w, env, k->dead_letter_queue, &h, lf);
    free(h.e);
    if (rc)
        return NEXT_RESET;
    atomic_fetch_add(&w->c->stats.dead_lettered, 1);
    lf->outcome = "dead_lettered";
    sc_log(SC_LOG_WARN, lf, "dead-lettered to %s: %s", k->dead_letter_queue, reason);
    return ack(w, env, lf);
}

/* Sends the delivery through the delay queue of its attempt, or to the DLQ
 * when attempts are exhausted. */
static enum next retry_later(struct worker *w, const amqp_envelope_t *env,
                             struct sc_log_fields *lf, int attempt, const char *reason)
{
    const struct sc_consumer_config *k = w->c->k;
    if (attempt >= k->max_attempts) {
        char why[700];
        snprintf(why, sizeof why, "attempts exhausted (%d of %d): %s", attempt, k->max_attempts,
                 reason);
        return dead_letter(w, env, lf, why, attempt);
    }
    size_t step = (size_t)(attempt - 1) < k->n_retry_delays ? (size_t)(attempt - 1)
                                                             : k->n_retry_delays - 1;
    char queue[300];
    sc_amqp_retry_queue_name(k, k->retry_delays_ms[step], queue, sizeof queue);
    struct headers h;
    if (headers_from(&h, delivery_headers(env)))
        return NEXT_RESET;
    headers_int(&h, H_ATTEMPTS, attempt + 1);
    headers_str(&h, H_LAST_ERROR, amqp_cstring_bytes(reason));
    headers_original_route(&h, env);
    int rc = republish(w, env, queue, &h, lf);
    free(h.e);
    if (rc)
        return NEXT_RESET;
    atomic_fetch_add(&w->c->stats.retried, 1);
    lf->outcome = "retried";
    sc_log(SC_LOG_WARN, lf, "will retry in %d ms (attempt %d of %d): %s", k->retry_delays_ms[step],
           attempt + 1, k->max_attempts, reason);
    return ack(w, env, lf);
}

/* Rolls back the open transaction; a failure means the connection is gone,
 * which rolls back just the same, so only the connection needs renewing. */
static void rollback(struct worker *w, int *db_broken)
{
    struct sc_db_err e = {0};
    if (sc_db_rollback(&w->db, &e))
        *db_broken = 1;
}

static void describe_db_error(char *out, size_t len, const char *what, const struct sc_db_err *e)
{
    snprintf(out, len, "%s failed: error %u (SQLSTATE %s, %s): %s", what, e->code, e->sqlstate,
             sc_db_error_class_name(e->cls), e->msg);
}

static enum next apply(struct worker *w, const amqp_envelope_t *env,
                       const struct sc_parsed_event *ev, struct sc_log_fields *lf, int attempt,
                       int64_t received_us)
{
    struct consumer *c = w->c;
    struct sc_db_err e = {0};
    char why[1024];
    int db_broken = 0;
    enum next n;

    w->last_db_use_ms = now_ms();
    if (sc_db_insert_consumed(&w->db, c->k->name, ev->ev.id, &e)) {
        lf->error_code = e.code;
        lf->sqlstate = e.sqlstate;
        if (e.cls == SC_DBERR_DUPLICATE) {
            rollback(w, &db_broken);
            n = ack(w, env, lf);
            atomic_fetch_add(&c->stats.duplicate, 1);
            lf->outcome = "duplicate";
            sc_log(SC_LOG_INFO, lf, "already consumed (1062 on %s): acked without effect",
                   SC_CONSUMED_EVENT_CONSTRAINT);
            return db_broken ? NEXT_RESET : n;
        }
        /* Any other error, 1062 on another key included, is a failure. */
        db_broken = e.cls == SC_DBERR_CONNECTION;
        if (!db_broken)
            rollback(w, &db_broken);
        describe_db_error(why, sizeof why, "claim (INSERT consumed_event)", &e);
        sc_log(SC_LOG_WARN, lf, "%s", why);
        n = retry_later(w, env, lf, attempt, why);
        return db_broken ? NEXT_RESET : n;
    }
    SC_FAULT("consumer.after_insert");

    char reason[512] = "";
    sc_handler_status st = c->plugin.h->handle(c->plugin.state, w->db.conn, &ev->ev, reason,
                                               sizeof reason);
    sc_db_last_error(&w->db, &e);
    if (st != SC_HANDLER_OK && e.cls == SC_DBERR_CONNECTION) {
        /* The connection died under the handler: nothing was committed. */
        lf->error_code = e.code;
        lf->sqlstate = e.sqlstate;
        describe_db_error(why, sizeof why, "handler statement", &e);
        sc_log(SC_LOG_WARN, lf, "%s", why);
        retry_later(w, env, lf, attempt, why);
        return NEXT_RESET;
    }
    if (st == SC_HANDLER_OK && !sc_db_in_transaction(&w->db)) {
        rollback(w, &db_broken);
        snprintf(why, sizeof why,
                 "handler %s ended the transaction (commit, rollback or autocommit): contract "
                 "violation",
                 c->plugin.h->name);
        sc_log(SC_LOG_ERROR, lf, "%s", why);
        n = dead_letter(w, env, lf, why, attempt);
        return db_broken ? NEXT_RESET : n;
    }
    char dberr[160] = "";
    if (st != SC_HANDLER_OK && e.code)
        snprintf(dberr, sizeof dberr, " (last database error %u, SQLSTATE %s)", e.code, e.sqlstate);
    if (st == SC_HANDLER_RETRY) {
        rollback(w, &db_broken);
        snprintf(why, sizeof why, "handler asked to retry: %s%s", reason[0] ? reason : "no reason",
                 dberr);
        n = retry_later(w, env, lf, attempt, why);
        return db_broken ? NEXT_RESET : n;
    }
    if (st != SC_HANDLER_OK) {
        rollback(w, &db_broken);
        snprintf(why, sizeof why, "rejected by handler: %s%s", reason[0] ? reason : "no reason",
                 dberr);
        n = dead_letter(w, env, lf, why, attempt);
        return db_broken ? NEXT_RESET : n;
    }

    SC_FAULT("consumer.before_commit");
    if (sc_db_commit(&w->db, &e)) {
        /* The server may or may not have committed: never ack. The
         * redelivery meets the unique key and settles it. */
        atomic_fetch_add(&c->stats.unknown, 1);
        lf->outcome = "unknown";
        lf->error_code = e.code;
        lf->sqlstate = e.sqlstate;
        sc_log(SC_LOG_ERROR, lf, "COMMIT failed, outcome unknown: not acked, returned for "
               "redelivery: %s", e.msg);
        sc_amqp_nack_requeue(&w->in, env->delivery_tag, 0);
        return NEXT_RESET;
    }
    SC_FAULT("consumer.after_commit");
    lf->duration_us = (uint64_t)(now_us() - received_us);
    n = ack(w, env, lf);
    atomic_fetch_add(&c->stats.applied, 1);
    lf->outcome = "applied";
    sc_log(SC_LOG_INFO, lf, "applied");
    return n;
}

static enum next handle_delivery(struct worker *w, const amqp_envelope_t *env)
{
    const struct sc_consumer_config *k = w->c->k;
    const amqp_basic_properties_t *p = &env->message.properties;
    const amqp_table_t *h = delivery_headers(env);
    struct sc_log_fields lf = {.consumer = k->name, .delivery_tag = env->delivery_tag};
    int64_t received_us = now_us();

    int64_t attempt = sc_amqp_header_int(h, H_ATTEMPTS, 1);
    int64_t delivery_count = sc_amqp_header_int(h, "x-delivery-count", -1); /* quorum queues */
    if (delivery_count >= 0 && delivery_count + 1 > attempt)
        attempt = delivery_count + 1;
    if (attempt < 1 || attempt > 1000000)
        attempt = 1;
    lf.attempt = (int)attempt;

    const char *mid = NULL;
    size_t mid_len = 0;
    if (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG) {
        mid = p->message_id.bytes;
        mid_len = p->message_id.len;
    }
    struct sc_parsed_event ev;
    char reason[512], why[600];
    if (sc_event_parse(env->message.body.bytes, env->message.body.len, mid, mid_len, &ev, reason,
                       sizeof reason)) {
        atomic_fetch_add(&w->c->stats.malformed, 1);
        snprintf(why, sizeof why, "malformed: %s", reason);
        lf.outcome = "malformed";
        sc_log(SC_LOG_WARN, &lf, "%s", why);
        return dead_letter(w, env, &lf, why, (int)attempt);
    }
    lf.event_id = ev.ev.id;
    if (sc_log_enabled(SC_LOG_DEBUG)) {
        lf.redelivered = env->redelivered;
        sc_log(SC_LOG_DEBUG, &lf, "received");
        lf.redelivered = 0;
    }
    enum next n = apply(w, env, &ev, &lf, (int)attempt, received_us);
    sc_event_free(&ev);
    return n;
}

/* ---- sessions and workers ------------------------------------------------ */

static void session_close(struct worker *w)
{
    sc_amqp_close(&w->in);
    sc_amqp_close(&w->out);
    sc_db_close(&w->db);
}

static int session_open(struct worker *w)
{
    const struct sc_config *cfg = w->c->cfg;
    const struct sc_consumer_config *k = w->c->k;
    struct sc_log_fields lf = {.consumer = k->name};
    struct sc_db_err e = {0};
    char err[512], name[300];

    if (sc_db_connect(&w->db, cfg, &e) || sc_db_prepare_consumer(&w->db, &e)) {
        lf.error_code = e.code;
        sc_log(SC_LOG_WARN, &lf, "database connect failed: %s", e.msg);
        return -1;
    }
    snprintf(name, sizeof name, "sidecar consume %s worker %d", k->name, w->index);
    if (sc_amqp_connect(&w->in, cfg, name, err, sizeof err) ||
        sc_amqp_declare_consumer(&w->in, k, err, sizeof err)) {
        sc_log(SC_LOG_WARN, &lf, "broker: %s", err);
        return -1;
    }
    snprintf(name, sizeof name, "sidecar publish %s worker %d", k->name, w->index);
    if (sc_amqp_connect(&w->out, cfg, name, err, sizeof err) ||
        sc_amqp_confirm_select(&w->out, err, sizeof err)) {
        sc_log(SC_LOG_WARN, &lf, "broker (publisher): %s", err);
        return -1;
    }
    snprintf(name, sizeof name, "sidecar-%s-%d", k->name, w->index);
    if (sc_amqp_start_consume(&w->in, k->queue, k->prefetch, name, err, sizeof err)) {
        sc_log(SC_LOG_WARN, &lf, "broker: %s", err);
        return -1;
    }
    w->last_db_use_ms = now_ms();
    sc_log(SC_LOG_INFO, &lf, "worker %d consuming from %s (prefetch %d, database thread %lu)",
           w->index, k->queue, k->prefetch, w->db.thread_id);
    return 0;
}

/* Consumes until a connection fails or a stop is requested. Returns the
 * number of deliveries handled. */
static long consume_loop(struct worker *w)
{
    struct sc_log_fields lf = {.consumer = w->c->k->name};
    long handled = 0;
    int64_t last_service_ms = now_ms();
    char err[512];
    while (!sc_stop_requested()) {
        amqp_envelope_t env;
        err[0] = 0;
        /* The publishing connection is idle between dead-letters and
         * retries: service its heartbeats even while deliveries stream. */
        if (now_ms() - last_service_ms > PUBLISHER_SERVICE_MS) {
            last_service_ms = now_ms();
            if (sc_amqp_service(&w->out)) {
                sc_log(SC_LOG_WARN, &lf, "publisher connection lost");
                break;
            }
        }
        enum sc_amqp_recv r = sc_amqp_receive(&w->in, &env, RECEIVE_POLL_MS, err, sizeof err);
        if (r == SC_AMQP_RECV_CLOSED) {
            sc_log(SC_LOG_WARN, &lf, "broker connection lost: %s", err);
            break;
        }
        if (r == SC_AMQP_RECV_TIMEOUT) {
            if (now_ms() - w->last_db_use_ms > DB_IDLE_PING_MS) {
                w->last_db_use_ms = now_ms();
                if (mysql_ping(w->db.conn)) {
                    sc_log(SC_LOG_WARN, &lf, "database connection lost while idle: %s",
                           mysql_error(w->db.conn));
                    break;
                }
            }
            continue;
        }
        enum next n = handle_delivery(w, &env);
        amqp_destroy_envelope(&env);
        handled++;
        if (n == NEXT_RESET)
            break;
    }
    return handled;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    int backoff = BACKOFF_MIN_MS;
    mysql_thread_init();
    while (!sc_stop_requested()) {
        long handled = 0;
        if (session_open(w) == 0)
            handled = consume_loop(w);
        /* Closing the channel returns every unacked delivery to the queue. */
        session_close(w);
        if (sc_stop_requested())
            break;
        if (handled > 0)
            backoff = BACKOFF_MIN_MS;
        int jitter = rand() % (backoff / 4 + 1);
        sc_sleep_ms(backoff + jitter);
        backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
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
        if (sc_plugin_load(&cs[i].plugin, cs[i].k->handler, cs[i].k->handler_config, err,
                           sizeof err)) {
            struct sc_log_fields lf = {.consumer = cs[i].k->name};
            sc_log(SC_LOG_ERROR, &lf, "consumers[%zu].handler: %s", i, err);
            fprintf(stderr, "sidecar: consumers[%zu].handler: %s\n", i, err);
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
    for (size_t i = 0; i < cfg->n_consumers; i++)
        n_workers += (size_t)cfg->consumers[i].workers;
    struct worker *ws = calloc(n_workers, sizeof *ws);
    if (!ws) {
        free(cs);
        return 1;
    }
    size_t started = 0;
    for (size_t i = 0; i < cfg->n_consumers; i++) {
        for (int j = 0; j < cfg->consumers[i].workers; j++) {
            struct worker *w = &ws[started];
            w->c = &cs[i];
            w->index = j;
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
    for (size_t i = 0; i < cfg->n_consumers; i++) {
        struct consumer_stats *s = &cs[i].stats;
        struct sc_log_fields lf = {.consumer = cs[i].k->name};
        sc_log(SC_LOG_INFO, &lf,
               "stopped: applied=%lu duplicate=%lu retried=%lu dead_lettered=%lu unknown=%lu "
               "malformed=%lu",
               atomic_load(&s->applied), atomic_load(&s->duplicate), atomic_load(&s->retried),
               atomic_load(&s->dead_lettered), atomic_load(&s->unknown),
               atomic_load(&s->malformed));
        sc_plugin_unload(&cs[i].plugin);
    }
    free(ws);
    free(cs);
    return started == n_workers ? 0 : 1;
}

int sc_consume_check(const struct sc_config *cfg)
{
    struct consumer *cs = calloc(cfg->n_consumers ? cfg->n_consumers : 1, sizeof *cs);
    if (!cs)
        return 1;
    if (load_handlers(cs, cfg)) {
        free(cs);
        return 2;
    }
    int rc = 0;
    struct sc_db db;
    struct sc_db_err e = {0};
    if (sc_db_connect(&db, cfg, &e)) {
        fprintf(stderr, "sidecar: mysql: error %u: %s\n", e.code, e.msg);
        rc = 1;
    } else {
        printf("mysql: connected (server %s)\n", mysql_get_server_info(db.conn));
        sc_db_close(&db);
    }
    for (size_t i = 0; i < cfg->n_consumers; i++) {
        struct sc_amqp a;
        char err[512];
        if (sc_amqp_connect(&a, cfg, "sidecar check", err, sizeof err) ||
            sc_amqp_declare_consumer(&a, &cfg->consumers[i], err, sizeof err)) {
            fprintf(stderr, "sidecar: consumers[%zu]: %s\n", i, err);
            rc = 1;
        } else {
            printf("amqp: consumer %s: queue %s and dead-letter queue %s declared\n",
                   cfg->consumers[i].name, cfg->consumers[i].queue,
                   cfg->consumers[i].dead_letter_queue);
        }
        sc_amqp_close(&a);
        printf("handler: consumer %s: %s loaded\n", cfg->consumers[i].name,
               cs[i].plugin.h->name);
    }
    if (cfg->n_consumers == 0) {
        struct sc_amqp a;
        char err[512];
        if (sc_amqp_connect(&a, cfg, "sidecar check", err, sizeof err)) {
            fprintf(stderr, "sidecar: %s\n", err);
            rc = 1;
        } else {
            printf("amqp: connected\n");
        }
        sc_amqp_close(&a);
    }
    for (size_t i = 0; i < cfg->n_consumers; i++)
        sc_plugin_unload(&cs[i].plugin);
    free(cs);
    return rc;
}
