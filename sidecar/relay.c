#include "relay.h"

#include <jansson.h>
#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "amqp_conn.h"
#include "db.h"
#include "db_settings.h"
#include "fault.h"
#include "lifecycle.h"
#include "log.h"
#include "http.h"
#include "metrics.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 30000
#define POLL_MIN_MS 5

struct row {
    char event_id[37];
    char *aggregate_type, *aggregate_id, *event_type, *payload;
    char time[40];
    long long version;
    char *body;                       /* the CloudEvents JSON */
    amqp_basic_properties_t props;
};

struct relay {
    const struct sc_config *cfg;
    const struct sc_relay_config *rc;
    char worker_id[160];
    struct sc_db db;
    struct sc_amqp amqp;
    MYSQL_STMT *claim_update;   /* SET PUBLISHING ... WHERE event_id IN (batch placeholders) */
    MYSQL_STMT *still_owned;    /* SELECT ... FOR UPDATE: which of the batch we still lease */
    MYSQL_STMT *mark_published; /* SET PUBLISHED ... WHERE IN (...) AND status AND lease_owner */
    struct row *rows;
    struct sc_publish *msgs;
    MYSQL_BIND *binds;
    unsigned long *lens;
    struct sc_relay_metrics m;
    int64_t last_gauge_ms;
};

#define GAUGE_REFRESH_MS 5000

/* ---- database ------------------------------------------------------------ */

/* "?,?,...,?" with n placeholders. */
static char *placeholders(int n)
{
    char *s = malloc((size_t)n * 2 + 1);
    if (!s)
        return NULL;
    for (int i = 0; i < n; i++) {
        s[2 * i] = '?';
        s[2 * i + 1] = i + 1 < n ? ',' : 0;
    }
    return s;
}

static int prepare(struct relay *r, struct sc_db_err *e)
{
    /* Every IN list has exactly `batch` placeholders, padded with the first
     * id: a fixed upper bound, one prepared statement, never IN (). */
    char *ph = placeholders(r->rc->batch);
    char *sql = ph ? malloc(strlen(ph) + 512) : NULL;
    if (!sql) {
        free(ph);
        return -1;
    }
    sprintf(sql,
            "UPDATE outbox_event SET status = 'PUBLISHING', lease_owner = ?, "
            "lease_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, "
            "publish_attempts = publish_attempts + 1 WHERE event_id IN (%s)", ph);
    r->claim_update = sc_db_prepare(&r->db, sql, e);
    sprintf(sql,
            "SELECT event_id FROM outbox_event WHERE status = 'PUBLISHING' AND lease_owner = ? "
            "AND event_id IN (%s) FOR UPDATE", ph);
    r->still_owned = r->claim_update ? sc_db_prepare(&r->db, sql, e) : NULL;
    sprintf(sql,
            "UPDATE outbox_event SET status = 'PUBLISHED', published_at = UTC_TIMESTAMP(6), "
            "lease_owner = NULL, lease_until = NULL "
            "WHERE status = 'PUBLISHING' AND lease_owner = ? AND event_id IN (%s)", ph);
    r->mark_published = r->still_owned ? sc_db_prepare(&r->db, sql, e) : NULL;
    free(sql);
    free(ph);
    return r->mark_published ? 0 : -1;
}

static void bind_str(MYSQL_BIND *b, unsigned long *len, const char *s)
{
    memset(b, 0, sizeof *b);
    *len = strlen(s);
    b->buffer_type = MYSQL_TYPE_STRING;
    b->buffer = (void *)s;
    b->buffer_length = *len;
    b->length = len;
}

/* Binds the ids of rows[idx[0..n)] from binds[offset], padded to the batch
 * size with the first. */
static void bind_ids(struct relay *r, int offset, const int *idx, int n)
{
    for (int i = 0; i < r->rc->batch; i++) {
        const struct row *row = &r->rows[idx[i < n ? i : 0]];
        bind_str(&r->binds[offset + i], &r->lens[offset + i], row->event_id);
    }
}

static void free_rows(struct relay *r, int n)
{
    for (int i = 0; i < n; i++) {
        struct row *row = &r->rows[i];
        free(row->aggregate_type);
        free(row->aggregate_id);
        free(row->event_type);
        free(row->payload);
        free(row->body);
        memset(row, 0, sizeof *row);
    }
}

static char *dup_field(const char *s)
{
    return strdup(s ? s : "");
}

/* Claims up to batch rows: PENDING, or PUBLISHING with an expired lease.
 * Returns the number claimed (committed), or -1 with e filled. */
static int claim(struct relay *r, struct sc_db_err *e)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT event_id, aggregate_type, aggregate_id, event_type, event_version, payload, "
             "DATE_FORMAT(created_at, '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ') FROM outbox_event "
             "WHERE status = 'PENDING' OR (status = 'PUBLISHING' AND lease_until < UTC_TIMESTAMP(6)) "
             "ORDER BY created_at, event_id LIMIT %d FOR UPDATE SKIP LOCKED",
             r->rc->batch);
    if (mysql_real_query(r->db.conn, sql, strlen(sql))) {
        sc_db_last_error(&r->db, e);
        return -1;
    }
    MYSQL_RES *res = mysql_store_result(r->db.conn);
    if (!res) {
        sc_db_last_error(&r->db, e);
        return -1;
    }
    int n = 0;
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(res)) && n < r->rc->batch) {
        struct row *o = &r->rows[n];
        snprintf(o->event_id, sizeof o->event_id, "%s", row[0] ? row[0] : "");
        o->aggregate_type = dup_field(row[1]);
        o->aggregate_id = dup_field(row[2]);
        o->event_type = dup_field(row[3]);
        o->version = row[4] ? atoll(row[4]) : 0;
        o->payload = dup_field(row[5]);
        snprintf(o->time, sizeof o->time, "%s", row[6] ? row[6] : "");
        n++;
    }
    mysql_free_result(res);
    if (n == 0) {
        /* Nothing to claim: end the (empty) transaction. */
        if (sc_db_rollback(&r->db, e))
            return -1;
        return 0;
    }
    int idx[1000];
    for (int i = 0; i < n; i++)
        idx[i] = i;
    long long lease_us = (long long)r->rc->lease_ms * 1000;
    bind_str(&r->binds[0], &r->lens[0], r->worker_id);
    memset(&r->binds[1], 0, sizeof r->binds[1]);
    r->binds[1].buffer_type = MYSQL_TYPE_LONGLONG;
    r->binds[1].buffer = &lease_us;
    bind_ids(r, 2, idx, n);
    if (mysql_stmt_bind_param(r->claim_update, r->binds) || mysql_stmt_execute(r->claim_update)) {
        sc_db_stmt_error(r->claim_update, e);
        free_rows(r, n);
        return -1;
    }
    if (sc_db_commit(&r->db, e)) {
        free_rows(r, n);
        return -1;
    }
    return n;
}

/* Marks the confirmed rows PUBLISHED, but only those this worker still
 * leases; the others were reclaimed by someone else and are left alone.
 * Returns 0, or -1 with e filled. */
static int mark(struct relay *r, const int *acked, int n, struct sc_db_err *e)
{
    if (n == 0)
        return 0;
    bind_str(&r->binds[0], &r->lens[0], r->worker_id);
    bind_ids(r, 1, acked, n);
    if (mysql_stmt_bind_param(r->still_owned, r->binds) || mysql_stmt_execute(r->still_owned)) {
        sc_db_stmt_error(r->still_owned, e);
        return -1;
    }
    char id[40];
    unsigned long id_len = 0;
    MYSQL_BIND out;
    memset(&out, 0, sizeof out);
    out.buffer_type = MYSQL_TYPE_STRING;
    out.buffer = id;
    out.buffer_length = sizeof id;
    out.length = &id_len;
    char owned[1000];
    memset(owned, 0, (size_t)n);
    if (mysql_stmt_bind_result(r->still_owned, &out)) {
        sc_db_stmt_error(r->still_owned, e);
        return -1;
    }
    int rc;
    while ((rc = mysql_stmt_fetch(r->still_owned)) == 0 || rc == MYSQL_DATA_TRUNCATED) {
        id[id_len < sizeof id ? id_len : sizeof id - 1] = 0;
        for (int i = 0; i < n; i++)
            if (strcmp(r->rows[acked[i]].event_id, id) == 0)
                owned[i] = 1;
    }
    if (rc != MYSQL_NO_DATA) {
        sc_db_stmt_error(r->still_owned, e);
        return -1;
    }
    mysql_stmt_free_result(r->still_owned);

    int keep[1000], n_keep = 0;
    for (int i = 0; i < n; i++) {
        if (owned[i]) {
            keep[n_keep++] = acked[i];
        } else {
            atomic_fetch_add(&r->m.lease_lost, 1);
            struct sc_log_fields lf = {.event_id = r->rows[acked[i]].event_id, .outcome = "lease_lost"};
            sc_log(SC_LOG_WARN, &lf,
                   "lease lost before marking PUBLISHED: another worker owns the row now; left as it is");
        }
    }
    if (n_keep > 0) {
        bind_str(&r->binds[0], &r->lens[0], r->worker_id);
        bind_ids(r, 1, keep, n_keep);
        if (mysql_stmt_bind_param(r->mark_published, r->binds) ||
            mysql_stmt_execute(r->mark_published)) {
            sc_db_stmt_error(r->mark_published, e);
            return -1;
        }
    }
    if (sc_db_commit(&r->db, e))
        return -1;
    atomic_fetch_add(&r->m.published, (unsigned long long)n_keep);
    return 0;
}

/* ---- broker --------------------------------------------------------------- */

static int build_message(struct relay *r, struct row *o, struct sc_publish *m)
{
    json_error_t je;
    json_t *data = json_loads(o->payload, JSON_DECODE_ANY, &je);
    if (!data)
        data = json_string(o->payload); /* MySQL checks JSON; keep the text if not */
    json_t *ev = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:s, s:o}",
                           "specversion", "1.0", "id", o->event_id, "type", o->event_type,
                           "source", o->aggregate_type, "subject", o->aggregate_id,
                           "time", o->time, "eventversion", (json_int_t)o->version,
                           "datacontenttype", "application/json", "data", data);
    if (!ev)
        return -1;
    o->body = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    if (!o->body)
        return -1;
    memset(&o->props, 0, sizeof o->props);
    o->props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
                      AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_TYPE_FLAG;
    o->props.content_type = amqp_cstring_bytes("application/cloudevents+json");
    o->props.delivery_mode = AMQP_DELIVERY_PERSISTENT;
    o->props.message_id = amqp_cstring_bytes(o->event_id);
    o->props.type = amqp_cstring_bytes(o->event_type);
    memset(m, 0, sizeof *m);
    m->exchange = r->rc->exchange;
    m->routing_key = o->event_type;
    m->props = &o->props;
    m->body = amqp_cstring_bytes(o->body);
    m->mandatory = 1;
    return 0;
}

static int connect_amqp(struct relay *r)
{
    char err[512], name[256];
    snprintf(name, sizeof name, "sidecar relay %s", r->worker_id);
    if (sc_amqp_connect(&r->amqp, r->cfg, name, err, sizeof err) ||
        sc_amqp_declare_exchange(&r->amqp, r->rc->exchange, err, sizeof err) ||
        sc_amqp_confirm_select(&r->amqp, err, sizeof err)) {
        sc_warn("relay: broker: %s", err);
        sc_amqp_close(&r->amqp);
        return -1;
    }
    atomic_store(&r->m.amqp_connected, 1);
    return 0;
}

static int connect_db(struct relay *r)
{
    struct sc_db_err e = {0};
    /* READ COMMITTED: the claim locks only the rows it takes, no gaps, so
     * producers inserting new outbox rows never wait on (or deadlock with)
     * a claim. */
    if (sc_db_connect(&r->db, r->cfg, &e) ||
        sc_db_query(&r->db, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", &e) ||
        sc_db_settings_check(&r->db, &e) ||
        prepare(r, &e)) {
        sc_warn("relay: database: error %u: %s", e.code, e.msg);
        sc_db_close(&r->db);
        return -1;
    }
    atomic_store(&r->m.db_connected, 1);
    return 0;
}

/* Publishes the claimed rows, collects their confirms, marks the acked ones.
 * Returns 0, or -1 when a connection must be renewed. */
static int publish_batch(struct relay *r, int n)
{
    int failed = 0;
    for (int i = 0; i < n; i++) {
        if (build_message(r, &r->rows[i], &r->msgs[i])) {
            sc_error("relay: cannot encode event %s", r->rows[i].event_id);
            return -1;
        }
    }
    char err[512] = "";
    int64_t t0 = sc_now_ms();
    int rc = sc_amqp_publish_confirmed(&r->amqp, r->msgs, (size_t)n, r->rc->confirm_timeout_ms, err,
                                       sizeof err);
    sc_hist_observe(&r->m.confirm_seconds, (double)(sc_now_ms() - t0) / 1000.0);
    sc_hist_observe(&r->m.batch_size, n);
    if (rc < 0) {
        sc_warn("relay: publishing failed, the batch is left to its lease: %s", err);
        failed = 1;
    }
    int acked[1000], n_acked = 0;
    for (int i = 0; i < n; i++) {
        struct sc_log_fields lf = {.event_id = r->rows[i].event_id};
        switch (r->msgs[i].result) {
        case SC_PUB_ACKED:
            acked[n_acked++] = i;
            break;
        case SC_PUB_RETURNED:
            atomic_fetch_add(&r->m.returned, 1);
            lf.outcome = "returned";
            sc_log(SC_LOG_WARN, &lf,
                   "unroutable: no queue is bound to exchange %s for routing key %s; the row stays "
                   "PUBLISHING and is retried after its lease",
                   r->rc->exchange, r->rows[i].event_type);
            break;
        case SC_PUB_NACKED:
            atomic_fetch_add(&r->m.nacked, 1);
            lf.outcome = "nacked";
            sc_log(SC_LOG_WARN, &lf, "nacked by the broker; retried after the lease");
            break;
        default:
            atomic_fetch_add(&r->m.unconfirmed, 1);
            lf.outcome = "unconfirmed";
            sc_log(SC_LOG_WARN, &lf, "%s; retried after the lease",
                   sc_publish_result_name(r->msgs[i].result));
            break;
        }
    }
    SC_FAULT("relay.after_confirm");
    struct sc_db_err e = {0};
    if (mark(r, acked, n_acked, &e)) {
        sc_warn("relay: marking %d rows PUBLISHED failed (they stay PUBLISHING until the lease "
                "expires and are published again): error %u: %s", n_acked, e.code, e.msg);
        sc_db_close(&r->db);
        return -1;
    }
    atomic_fetch_add(&r->m.batches, 1);
    sc_debug("relay: batch of %d claimed, %d confirmed and marked", n, n_acked);
    return failed ? -1 : 0;
}

/* The pending-count and oldest-pending-age gauges: one cheap indexed query
 * every few seconds, cached for /metrics. */
static void refresh_gauges(struct relay *r)
{
    if (sc_now_ms() - r->last_gauge_ms < GAUGE_REFRESH_MS)
        return;
    r->last_gauge_ms = sc_now_ms();
    static const char sql[] =
        "SELECT COUNT(*), COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(created_at), UTC_TIMESTAMP(6)), 0) "
        "FROM outbox_event WHERE status IN ('PENDING', 'PUBLISHING')";
    struct sc_db_err e = {0};
    if (mysql_real_query(r->db.conn, sql, sizeof sql - 1) == 0) {
        MYSQL_RES *res = mysql_store_result(r->db.conn);
        MYSQL_ROW row = res ? mysql_fetch_row(res) : NULL;
        if (row && row[0] && row[1]) {
            atomic_store(&r->m.pending, atoll(row[0]));
            atomic_store(&r->m.oldest_pending_age_ms, atoll(row[1]) / 1000);
        }
        if (res)
            mysql_free_result(res);
    }
    sc_db_rollback(&r->db, &e); /* end the read's transaction */
}

static void default_worker_id(char *out, size_t len)
{
    char host[128] = "relay";
    gethostname(host, sizeof host - 1);
    snprintf(out, len, "%s-%ld", host, (long)getpid());
}

int sc_relay_run(const struct sc_config *cfg)
{
    if (!cfg->relay.present) {
        fprintf(stderr, "sidecar: relay: the config has no \"relay\" section\n");
        return 2;
    }
    struct relay r;
    memset(&r, 0, sizeof r);
    r.cfg = cfg;
    r.rc = &cfg->relay;
    if (r.rc->worker_id)
        snprintf(r.worker_id, sizeof r.worker_id, "%s", r.rc->worker_id);
    else
        default_worker_id(r.worker_id, sizeof r.worker_id);
    int batch = r.rc->batch;
    r.rows = calloc((size_t)batch, sizeof *r.rows);
    r.msgs = calloc((size_t)batch, sizeof *r.msgs);
    r.binds = calloc((size_t)batch + 2, sizeof *r.binds);
    r.lens = calloc((size_t)batch + 2, sizeof *r.lens);
    if (!r.rows || !r.msgs || !r.binds || !r.lens)
        return 1;
    sc_relay_metrics_init(&r.m, r.worker_id);
    sc_metrics_register_relay(&r.m);
    struct sc_http *http = NULL;
    char err[512];
    if (strcmp(cfg->http_listen, "off") != 0 &&
        !(http = sc_http_start(cfg->http_listen, err, sizeof err))) {
        fprintf(stderr, "sidecar: %s\n", err);
        sc_error("%s", err);
        return 1;
    }
    sc_info("relay %s: publishing outbox_event to exchange %s (batch %d, lease %d ms)", r.worker_id,
            r.rc->exchange, batch, r.rc->lease_ms);

    int backoff = BACKOFF_MIN_MS, poll = POLL_MIN_MS;
    while (!sc_stop_requested()) {
        if ((!sc_db_connected(&r.db) && connect_db(&r)) ||
            (!sc_amqp_connected(&r.amqp) && connect_amqp(&r))) {
            sc_sleep_ms(backoff + rand() % (backoff / 4 + 1));
            backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
            continue;
        }
        backoff = BACKOFF_MIN_MS;
        struct sc_db_err e = {0};
        refresh_gauges(&r);
        int n = claim(&r, &e);
        if (n < 0) {
            sc_warn("relay: claim failed: error %u (SQLSTATE %s): %s", e.code, e.sqlstate, e.msg);
            struct sc_db_err rb = {0};
            if (e.cls == SC_DBERR_TRANSIENT && sc_db_rollback(&r.db, &rb) == 0)
                continue; /* deadlock or lock wait: the claim simply runs again */
            sc_db_close(&r.db);
            atomic_store(&r.m.db_connected, 0);
            continue;
        }
        if (n == 0) {
            /* Idle: back off up to poll_ms, and keep the broker connection's
             * heartbeats going meanwhile. */
            if (sc_amqp_service(&r.amqp)) {
                sc_amqp_close(&r.amqp);
                atomic_store(&r.m.amqp_connected, 0);
            }
            sc_sleep_ms(poll);
            poll = poll * 2 > r.rc->poll_ms ? r.rc->poll_ms : poll * 2;
            continue;
        }
        poll = POLL_MIN_MS;
        SC_FAULT("relay.after_claim");
        if (publish_batch(&r, n)) {
            sc_amqp_close(&r.amqp);
            atomic_store(&r.m.amqp_connected, 0);
            atomic_store(&r.m.db_connected, sc_db_connected(&r.db));
        }
        free_rows(&r, n);
    }
    sc_info("relay %s stopped: published=%llu lease_lost=%llu returned=%llu nacked=%llu "
            "unconfirmed=%llu batches=%llu",
            r.worker_id, atomic_load(&r.m.published), atomic_load(&r.m.lease_lost),
            atomic_load(&r.m.returned), atomic_load(&r.m.nacked), atomic_load(&r.m.unconfirmed),
            atomic_load(&r.m.batches));
    sc_http_stop(http);
    sc_amqp_close(&r.amqp);
    sc_db_close(&r.db);
    free(r.rows);
    free(r.msgs);
    free(r.binds);
    free(r.lens);
    return 0;
}
