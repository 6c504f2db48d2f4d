/* A consume worker's sessions: its database session (made, checked writable,
 * replaced, made again in place while the broker session is kept) and its two
 * broker connections, opened and closed together. */
#include "consume/worker.h"

#include <mysql.h>
#include <stdio.h>
#include <string.h>

#include "io/db_durability.h"
#include "lifecycle.h"
#include "log.h"

#define RECEIVE_POLL_MS 200
#define PUBLISHER_SERVICE_MS 1000


/* Moves this worker's contribution to a connection gauge. */
void sc_worker_gauge(atomic_int *g, int *mine, int up)
{
    if (*mine != up)
        atomic_fetch_add(g, up ? 1 : -1);
    *mine = up;
}

/* A node that is read-only (a replica, a primary during a failover) takes the
 * session but none of its claims: ask before consuming on it, so a held batch
 * waits for a writable node instead of meeting 1290 on every delivery.
 * Returns 0, or -1 with e filled (class "not writable" when it is read-only). */
static int db_writable(struct worker *w, struct sc_db_err *e)
{
    /* innodb_read_only too: its writes fail with 1036 while read_only says 0. */
    MYSQL_RES *res = sc_db_select(&w->db, "SELECT @@global.read_only, @@global.innodb_read_only", e);
    if (!res)
        return -1;
    MYSQL_ROW row = mysql_fetch_row(res);
    int read_only = row && row[0] && strcmp(row[0], "0") != 0;
    int innodb = row && row[1] && strcmp(row[1], "0") != 0;
    mysql_free_result(res);
    if (!read_only && !innodb)
        return 0;
    *e = (struct sc_db_err){.code = read_only ? 1290 : 1036, .sqlstate = "HY000",
                            .cls = SC_DBERR_NOT_WRITABLE};
    snprintf(e->msg, sizeof e->msg, "the database node is read-only (@@global.%s = 1)",
             read_only ? "read_only" : "innodb_read_only");
    return -1;
}

/* Replaces the worker's database session (whatever is left of it is closed)
 * with a fresh one: the sidecar's settings (autocommit off, UTC, bounded
 * lock waits) and its statements prepared, the gauge following. Returns 0,
 * or -1 with e filled. The one way every caller makes the session. Each
 * new session reads its node's durability settings again (a failover, a
 * server whose settings changed since the last one): an ack is only as
 * durable as the COMMIT before it. */
static int db_session_open(struct worker *w, struct sc_db_err *e)
{
    sc_db_close(&w->db);
    int failed = (w->db_urls ? sc_db_connect_tenant(&w->db, w->c->cfg, w->db_urls, w->n_db_urls, e)
                             : sc_db_connect(&w->db, w->c->cfg, e)) ||
                 sc_db_durability_session(&w->db, e) || sc_db_prepare_consumer(&w->db, e) ||
                 db_writable(w, e);
    /* A tenant's session is one of many: its outage is that tenant's, not
     * the worker's (tenant_pool.c counts it). */
    if (!w->db_urls)
        sc_worker_gauge(&w->c->m.db_connected, &w->up_db, !failed);
    return failed ? -1 : 0;
}

int sc_worker_db_open(struct worker *w, struct sc_db_err *e)
{
    return db_session_open(w, e);
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

int sc_worker_service_publisher(struct worker *w, int64_t *last_ms)
{
    int64_t now = sc_now_ms();
    if (now - *last_ms <= PUBLISHER_SERVICE_MS)
        return 0;
    *last_ms = now;
    char err[512] = "";
    if (sc_amqp_service(&w->out, err, sizeof err) == 0)
        return 0;
    struct sc_log_fields lf = {.consumer = w->c->k->name};
    sc_log(SC_LOG_WARN, &lf, "publisher connection lost: %s", err);
    return -1;
}

/* Waits ms with both broker connections kept alive and the worker's queues
 * checked. Returns -1 when a stop was requested, the publishing connection
 * was closed or a queue could not be declared again meanwhile. (The
 * consuming channel is read only by receive: its frames are deliveries.) */
static int wait_keeping_broker(struct worker *w, int ms, char *err, size_t err_len)
{
    int64_t end = sc_now_ms() + ms;
    while (!sc_stop_requested()) {
        sc_worker_keep_alive(w);
        if (sc_amqp_service(&w->out, err, err_len) || sc_worker_check_queues(w, 1))
            return -1;
        int64_t left = end - sc_now_ms();
        if (left <= 0)
            return 0;
        sc_sleep_ms(left < RECEIVE_POLL_MS ? (int)left : RECEIVE_POLL_MS);
    }
    return -1;
}

int sc_worker_wait(struct worker *w, int ms, int64_t since_ms)
{
    int64_t left = since_ms + w->c->k->db_outage_hold_ms - sc_now_ms();
    if (left <= 0) {
        sc_log(SC_LOG_WARN, &(struct sc_log_fields){.consumer = w->c->k->name},
               "a batch of %d held for %d ms (db_outage_hold_ms) without settling (last error "
               "%u: %s): returning the deliveries in hand", w->n_items,
               w->c->k->db_outage_hold_ms, w->hold_cause.code, w->hold_cause.msg);
        return -1;
    }
    char err[512] = "";
    if (wait_keeping_broker(w, ms < left ? ms : (int)left, err, sizeof err)) {
        if (err[0]) {
            struct sc_log_fields lf = {.consumer = w->c->k->name};
            sc_log(SC_LOG_WARN, &lf, "publisher connection lost: %s", err);
        }
        return -1;
    }
    return 0;
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
int sc_worker_reconnect_db(struct worker *w, int64_t since_ms)
{
    struct sc_log_fields lf = {.consumer = w->c->k->name};
    char err[512] = "";
    int hold_ms = w->c->k->db_outage_hold_ms;
    int64_t give_up = since_ms + hold_ms;
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


void sc_worker_close(struct worker *w)
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
int sc_worker_open(struct worker *w, char *why, size_t why_len, unsigned *code)
{
    const struct sc_config *cfg = w->c->cfg;
    const struct sc_consumer_config *k = w->c->k;
    struct sc_log_fields lf = {.consumer = k->name};
    struct sc_db_err e = {0};
    char err[512], name[300];

    *code = 0;
    /* With tenants the sessions open per tenant, on first use. */
    if (cfg->tenants.present)
        sc_worker_gauge(&w->c->m.db_connected, &w->up_db, 1);
    else if (db_session_open(w, &e)) {
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
    sc_worker_gauge(&w->c->m.amqp_connected, &w->up_amqp, 1);
    char queues[600] = "";
    for (int i = 0; i < sc_worker_queues(w); i++) {
        char q[300];
        sc_worker_queue(w, i, q, sizeof q);
        sc_worker_consumer_tag(w, i, name, sizeof name);
        if (sc_amqp_start_consume(&w->in, q, k->prefetch, name, err, sizeof err)) {
            snprintf(why, why_len, "broker: %s", err);
            return -1;
        }
        size_t len = strlen(queues);
        snprintf(queues + len, sizeof queues - len, "%s%s", i ? ", " : "", q);
    }
    sc_worker_gauge(&w->c->m.consuming, &w->up_consuming, 1);
    w->last_db_use_ms = sc_now_ms();
    w->last_delivery_ms = sc_now_ms();
    w->seen_epoch = atomic_load(&w->c->queue_epoch);
    w->unconsumed_checks = w->waiting_checks = 0;
    sc_log(SC_LOG_INFO, &lf, "worker %d consuming from %s (prefetch %d, database thread %lu)%s",
           w->index, queues, k->prefetch, w->db.thread_id,
           k->ordering.present ? "; ordered: single active consumer per queue, this one may wait "
                                 "as a standby" : "");
    return 0;
}

/* The broker's cancel says when a queue is deleted, but a worker must not
 * depend on that one frame to go on receiving (a cluster was seen to lose a
 * queue with no cancel to any of its consumers, every later event for it
 * unroutable). So a worker also asks, on a channel of its own on its
 * publishing connection. The session ends, and the next one declares the
 * queue, its bindings and the consumer, when the queue is gone; when a
 * sibling worker found it gone (this worker's consumer died with it); when
 * it shows no consumer on two checks in a row;
 * and (unordered consumers) when messages wait in it on two checks in a row
 * while this worker, with nothing in hand, receives none: its consumer is
 * not on the queue any more (another worker declared it again first). While
 * the worker waits for the database (in_hold: the consuming channel is not
 * read meanwhile), a gone queue is declared again at once instead, so what
 * is published meanwhile is routed; the session and the deliveries in hand
 * go on, and the cancel waiting behind them is read after the wait. */
static int lost(struct worker *w, const char *why, const char *q)
{
    struct sc_log_fields lf = {.consumer = w->c->k->name};
    atomic_fetch_add(&w->c->m.queue_lost, 1);
    sc_worker_gauge(&w->c->m.consuming, &w->up_consuming, 0);
    sc_log(SC_LOG_WARN, &lf, "queue %s %s: consuming again with a new session", q, why);
    w->reopen_now = 1;
    return -1;
}

int sc_worker_check_queues(struct worker *w, int in_hold)
{
    const struct sc_consumer_config *k = w->c->k;
    struct sc_log_fields lf = {.consumer = k->name};
    int64_t now = sc_now_ms();
    /* A cancel that reached this worker is read and counted by the
     * receive: a check between the deletion and that read must not take
     * it for a silent loss. */
    if (!in_hold && sc_amqp_frames_waiting(&w->in, 0))
        return 0;
    /* A sibling's finding costs nothing to read: it is acted on at the
     * first idle receive, not at this worker's next round of asking. */
    if (!in_hold && atomic_load(&w->c->queue_epoch) != w->seen_epoch)
        return lost(w, "was found gone by another worker", k->queue);
    if (now - w->last_queue_check_ms < SC_QUEUE_CHECK_MS)
        return 0;
    w->last_queue_check_ms = now;
    int unconsumed = 0, waiting = 0;
    char first[300] = "";
    for (int i = 0; i < sc_worker_queues(w); i++) {
        char q[300], err[512] = "";
        uint32_t ready;
        sc_worker_queue(w, i, q, sizeof q);
        /* Asked on the publishing connection: an answer on the consuming
         * one would come behind whatever deliveries the broker sent first,
         * each read into memory on the way, past the batch's bound. */
        enum sc_queue_state st = sc_amqp_check_queue(&w->out, q, &ready, err, sizeof err);
        if (st == SC_QUEUE_UNKNOWN) {
            sc_log(SC_LOG_WARN, &lf, "broker connection lost: %s", err);
            return -1;
        }
        if (st == SC_QUEUE_GONE) {
            /* The answer can come before the cancel (another connection,
             * or the queue deleted through another node of a cluster): the
             * cancel is given a moment to arrive, for the receive to count
             * it. */
            if (!in_hold && sc_amqp_frames_waiting(&w->in, SC_CANCEL_GRACE_MS)) {
                /* Whatever came is read first; when it was not the cancel,
                 * the next idle receive asks again at once. */
                w->last_queue_check_ms = 0;
                return 0;
            }
            atomic_fetch_add(&w->c->queue_epoch, 1);
            if (!in_hold)
                return lost(w, "is gone and the broker sent no cancel", q);
            atomic_fetch_add(&w->c->m.queue_lost, 1);
            if (sc_amqp_declare_consumer(&w->in, k, err, sizeof err)) {
                sc_log(SC_LOG_WARN, &lf, "queue %s is gone; declaring it again failed: %s", q, err);
                return -1;
            }
            sc_log(SC_LOG_WARN, &lf, "queue %s was gone while a batch is held for the database: "
                   "declared again with its bindings; consuming again after the hold", q);
            w->seen_epoch = atomic_load(&w->c->queue_epoch); /* its own cancel follows */
            continue;
        }
        if (!first[0])
            snprintf(first, sizeof first, "%s", q);
        unconsumed |= st == SC_QUEUE_UNCONSUMED;
        waiting |= st == SC_QUEUE_CONSUMED && ready > 0 && !k->ordering.present &&
                   now - w->last_delivery_ms > SC_QUEUE_CHECK_MS;
    }
    w->unconsumed_checks = unconsumed ? w->unconsumed_checks + 1 : 0;
    w->waiting_checks = waiting ? w->waiting_checks + 1 : 0;
    if (in_hold)
        return 0;
    if (w->unconsumed_checks >= 2)
        return lost(w, "shows no consumer on two checks in a row, and the broker sent no cancel",
                    first);
    if (w->waiting_checks >= 2)
        return lost(w, "has messages waiting on two checks in a row while this worker receives "
                    "none (its consumer is not on the queue)", first);
    return 0;
}

int sc_worker_queues(const struct worker *w)
{
    const struct sc_consumer_config *k = w->c->k;
    if (!k->ordering.present || k->ordering.partitions == 1)
        return 1;
    /* Partition i goes to worker i % workers (workers <= partitions). */
    int p = k->ordering.partitions, n = k->workers;
    return p / n + (w->index < p % n);
}

void sc_worker_consumer_tag(const struct worker *w, int i, char *out, size_t out_len)
{
    const struct sc_consumer_config *k = w->c->k;
    char q[300];
    sc_worker_queue(w, i, q, sizeof q);
    snprintf(out, out_len, "sidecar-%s-%d%s%.20s", k->name, w->index, i ? "-" : "",
             i ? q + strlen(k->queue) + 1 : "");
}

int sc_worker_queue_of_tag(const struct worker *w, amqp_bytes_t tag, char *out, size_t out_len)
{
    for (int i = 0; i < sc_worker_queues(w); i++) {
        char t[400];
        sc_worker_consumer_tag(w, i, t, sizeof t);
        if (strlen(t) == tag.len && memcmp(t, tag.bytes, tag.len) == 0) {
            sc_worker_queue(w, i, out, out_len);
            return 0;
        }
    }
    return -1;
}

void sc_worker_queue(const struct worker *w, int i, char *out, size_t out_len)
{
    const struct sc_consumer_config *k = w->c->k;
    if (!k->ordering.present || k->ordering.partitions == 1) {
        snprintf(out, out_len, "%s", k->queue);
        return;
    }
    sc_amqp_partition_queue_name(k, w->index + i * k->workers, out, out_len);
}
