#include "relay.h"

#include <jansson.h>
#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io/amqp_conn.h"
#include "io/db.h"
#include "io/db_settings.h"
#include "fault.h"
#include "lifecycle.h"
#include "log.h"
#include "io/http.h"
#include "metrics.h"
#include "notify.h"
#include "outbox_rules.h"

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
    MYSQL_STMT *mark_failed;    /* SET FAILED ... WHERE event_id = ? AND status AND lease_owner */
    struct row *rows;
    struct sc_publish *msgs;
    MYSQL_BIND *binds;
    unsigned long *lens;
    struct sc_relay_metrics m;
    int64_t last_gauge_ms, gauge_interval_ms;
    unsigned db_state;          /* error code of the database's failing state, 0 when healthy */
    unsigned long long db_fails; /* consecutive failures in that state */
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
    r->mark_failed = r->mark_published
                         ? sc_db_prepare(&r->db,
                                         "UPDATE outbox_event SET status = 'FAILED', lease_owner = NULL, "
                                         "lease_until = NULL WHERE event_id = ? "
                                         "AND status = 'PUBLISHING' AND lease_owner = ?", e)
                         : NULL;
    free(sql);
    free(ph);
    return r->mark_failed ? 0 : -1;
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

/* The two claim statements. Each is one index range read in index order
 * with LIMIT and SKIP LOCKED, so its cost does not grow with the backlog:
 * expired leases in (status, lease_until) order, then PENDING rows in
 * (status, created_at, event_id) order. A live lease (lease_until in the
 * future) is outside the first range and never taken. FORCE INDEX keeps the
 * plan when the statistics of a small or freshly loaded table would suggest
 * a scan; both MySQL 8 and MariaDB accept it. */
#define CLAIM_SELECT                                                                              \
    "SELECT event_id, aggregate_type, aggregate_id, event_type, event_version, payload, "        \
    "DATE_FORMAT(created_at, '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ') FROM outbox_event "
#define CLAIM_EXPIRED_SQL                                                                         \
    CLAIM_SELECT "FORCE INDEX (ix_outbox_event_lease) "                                          \
    "WHERE status = 'PUBLISHING' AND lease_until < UTC_TIMESTAMP(6) "                            \
    "ORDER BY lease_until LIMIT %d FOR UPDATE SKIP LOCKED"
#define CLAIM_PENDING_SQL                                                                         \
    CLAIM_SELECT "FORCE INDEX (ix_outbox_event_claim) WHERE status = 'PENDING' "                 \
    "ORDER BY created_at, event_id LIMIT %d FOR UPDATE SKIP LOCKED"

/* Runs one claim SELECT for up to `limit` rows and appends them to r->rows
 * from index *n. Returns 0, or -1 with e filled. */
static int claim_select(struct relay *r, int expired, int limit, int *n, struct sc_db_err *e)
{
    char sql[768];
    if (expired)
        snprintf(sql, sizeof sql, CLAIM_EXPIRED_SQL, limit);
    else
        snprintf(sql, sizeof sql, CLAIM_PENDING_SQL, limit);
    MYSQL_RES *res = sc_db_select(&r->db, sql, e);
    if (!res)
        return -1;
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(res)) && *n < r->rc->batch) {
        struct row *o = &r->rows[*n];
        snprintf(o->event_id, sizeof o->event_id, "%s", row[0] ? row[0] : "");
        o->aggregate_type = dup_field(row[1]);
        o->aggregate_id = dup_field(row[2]);
        o->event_type = dup_field(row[3]);
        o->version = row[4] ? atoll(row[4]) : 0;
        o->payload = dup_field(row[5]);
        snprintf(o->time, sizeof o->time, "%s", row[6] ? row[6] : "");
        (*n)++;
    }
    mysql_free_result(res);
    return 0;
}

/* Claims up to batch rows: expired leases first (oldest lease first), then
 * PENDING rows (oldest first). Returns the number claimed (committed), or
 * -1 with e filled. */
static int claim(struct relay *r, struct sc_db_err *e)
{
    int n = 0;
    if (claim_select(r, 1, r->rc->batch, &n, e) ||
        (n < r->rc->batch && claim_select(r, 0, r->rc->batch - n, &n, e))) {
        free_rows(r, n);
        return -1;
    }
    if (n == 0) {
        /* Nothing to claim: end the (empty) transaction. */
        if (sc_db_rollback(&r->db, e))
            return -1;
        return 0;
    }
    int idx[SC_BATCH_LIMIT];
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
 * The common case is one conditional UPDATE for the whole batch; only when
 * it changed fewer rows than expected (a lease was lost) is it rolled back
 * and redone row by row under a locking read, to name the lost rows.
 * Returns 0, or -1 with e filled. */
static int mark(struct relay *r, const int *acked, int n, struct sc_db_err *e)
{
    if (n == 0)
        return 0;
    bind_str(&r->binds[0], &r->lens[0], r->worker_id);
    bind_ids(r, 1, acked, n);
    if (mysql_stmt_bind_param(r->mark_published, r->binds) ||
        mysql_stmt_execute(r->mark_published)) {
        sc_db_stmt_error(r->mark_published, e);
        return -1;
    }
    if ((unsigned long long)mysql_stmt_affected_rows(r->mark_published) == (unsigned long long)n) {
        if (sc_db_commit(&r->db, e))
            return -1;
        atomic_fetch_add(&r->m.published, (unsigned long long)n);
        return 0;
    }
    if (sc_db_rollback(&r->db, e))
        return -1;
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
    char owned[SC_BATCH_LIMIT];
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

    int keep[SC_BATCH_LIMIT], n_keep = 0;
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

/* Appends s as a JSON string to the body being built. Returns 0, or -1
 * when s is not UTF-8 (or out of memory). */
static int append_json_string(char **out, size_t *len, size_t *cap, const char *s)
{
    json_t *j = json_string(s);
    char *enc = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    json_decref(j);
    if (!enc)
        return -1;
    size_t n = strlen(enc);
    if (*len + n + 1 > *cap) {
        size_t cap2 = (*len + n + 1) * 2;
        char *b = realloc(*out, cap2);
        if (!b) {
            free(enc);
            return -1;
        }
        *out = b;
        *cap = cap2;
    }
    memcpy(*out + *len, enc, n + 1);
    *len += n;
    free(enc);
    return 0;
}

static int append_raw(char **out, size_t *len, size_t *cap, const char *s)
{
    size_t n = strlen(s);
    if (*len + n + 1 > *cap) {
        size_t cap2 = (*len + n + 1) * 2;
        char *b = realloc(*out, cap2);
        if (!b)
            return -1;
        *out = b;
        *cap = cap2;
    }
    memcpy(*out + *len, s, n + 1);
    *len += n;
    return 0;
}

/* Builds the CloudEvents message of one row. `data` is the payload text
 * exactly as the server returned it (checked to be one JSON value, never
 * re-encoded: numbers keep their digits), so the body is assembled as text.
 * Returns 0, or -1 with the reason in why when the row cannot become a valid
 * CloudEvent. */
static int build_message(struct relay *r, struct row *o, struct sc_publish *m, char *why,
                         size_t why_len)
{
    if (!sc_rules_event(o->event_id, o->aggregate_type, o->aggregate_id, o->event_type, o->payload,
                        why, why_len))
        return -1;
    char *b = NULL, num[32];
    size_t len = 0, cap = 0;
    snprintf(num, sizeof num, "%lld", o->version);
    int rc = append_raw(&b, &len, &cap, "{\"specversion\":\"1.0\",\"id\":") ||
             append_json_string(&b, &len, &cap, o->event_id) ||
             append_raw(&b, &len, &cap, ",\"type\":") ||
             append_json_string(&b, &len, &cap, o->event_type) ||
             append_raw(&b, &len, &cap, ",\"source\":") ||
             append_json_string(&b, &len, &cap, o->aggregate_type) ||
             append_raw(&b, &len, &cap, ",\"subject\":") ||
             append_json_string(&b, &len, &cap, o->aggregate_id) ||
             append_raw(&b, &len, &cap, ",\"time\":") ||
             append_json_string(&b, &len, &cap, o->time) ||
             append_raw(&b, &len, &cap, ",\"eventversion\":") || append_raw(&b, &len, &cap, num) ||
             append_raw(&b, &len, &cap, ",\"datacontenttype\":\"application/json\",\"data\":") ||
             append_raw(&b, &len, &cap, o->payload) || append_raw(&b, &len, &cap, "}");
    if (rc) {
        free(b);
        snprintf(why, why_len, "a text field is not UTF-8 (or out of memory)");
        return -1;
    }
    o->body = b;
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
    m->body.bytes = o->body;
    m->body.len = len;
    m->mandatory = 1;
    return 0;
}

/* Records a database failure. Logs only when the failing state changes (a
 * new error code), so a server that refuses every claim for an hour (read
 * only after a failover) gives one line, not one per retry. */
static void db_failed(struct relay *r, const char *what, const struct sc_db_err *e)
{
    r->db_fails++;
    if (e->code == r->db_state && r->db_fails > 1)
        return;
    r->db_state = e->code ? e->code : (unsigned)-1;
    sc_warn("relay: %s failed: error %u (SQLSTATE %s): %s; retrying with backoff, logged again "
            "when the error changes", what, e->code, e->sqlstate, e->msg);
}

static void db_healthy(struct relay *r)
{
    if (r->db_state)
        sc_info("relay: database works again after %llu failed attempts (last error %u)",
                r->db_fails, r->db_state == (unsigned)-1 ? 0 : r->db_state);
    r->db_state = 0;
    r->db_fails = 0;
}

/* The wait before the next attempt after the k-th consecutive failure:
 * none for the first transient one (a deadlock: simply run again), then
 * the common backoff. */
static int db_backoff_ms(unsigned long long k, int transient)
{
    if (k <= 1 && transient)
        return 0;
    return sc_backoff_ms(k);
}

/* Fills err; the retry loop logs it, with the attempt and the wait. */
static int connect_amqp(struct relay *r, char *err, size_t err_len)
{
    char name[256];
    snprintf(name, sizeof name, "sidecar relay %s", r->worker_id);
    if (sc_amqp_connect(&r->amqp, r->cfg, name, err, err_len) ||
        sc_amqp_declare_exchange(&r->amqp, r->rc->exchange, err, err_len) ||
        sc_amqp_confirm_select(&r->amqp, err, err_len)) {
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
        db_failed(r, "database", &e);
        sc_db_close(&r->db);
        return -1;
    }
    atomic_store(&r->m.db_connected, 1);
    return 0;
}

/* A row that cannot become a valid CloudEvent is never published: it is
 * marked FAILED (still only under this worker's lease), counted and logged
 * with its reason, so an operator can repair it and set it PENDING again.
 * Returns 0, or -1 with e filled. */
static int fail_row(struct relay *r, const struct row *o, const char *why, struct sc_db_err *e)
{
    MYSQL_BIND b[2];
    unsigned long len[2];
    bind_str(&b[0], &len[0], o->event_id);
    bind_str(&b[1], &len[1], r->worker_id);
    if (mysql_stmt_bind_param(r->mark_failed, b) || mysql_stmt_execute(r->mark_failed)) {
        sc_db_stmt_error(r->mark_failed, e);
        return -1;
    }
    if (sc_db_commit(&r->db, e))
        return -1;
    atomic_fetch_add(&r->m.invalid, 1);
    struct sc_log_fields lf = {.event_id = o->event_id, .outcome = "invalid"};
    sc_log(SC_LOG_ERROR, &lf, "outbox row is not a valid CloudEvent, marked FAILED and not published: %s",
           why);
    return 0;
}

/* One claimed batch: its rows and messages; while its confirms are
 * outstanding the relay claims the next batch into the other buffer. */
struct batch {
    struct row *rows;
    struct sc_publish *msgs;
    int n, nv;       /* claimed; valid and sent */
    int *valid;      /* index into rows of msgs[k] */
    int send_failed; /* basic.publish failed: no confirms to collect */
    int64_t t0;
};

static void use(struct relay *r, struct batch *b)
{
    r->rows = b->rows;
    r->msgs = b->msgs;
}

static void amqp_lost(struct relay *r)
{
    sc_amqp_close(&r->amqp);
    atomic_store(&r->m.amqp_connected, 0);
}

static void db_lost(struct relay *r)
{
    sc_db_close(&r->db);
    atomic_store(&r->m.db_connected, 0);
}

/* Builds the messages of a claimed batch (rows that cannot become a valid
 * CloudEvent are marked FAILED instead) and sends them without waiting for
 * the confirms. Returns the number sent (0: nothing to wait for). */
static int send_batch(struct relay *r, struct batch *b)
{
    use(r, b);
    b->nv = 0;
    b->send_failed = 0;
    for (int i = 0; i < b->n; i++) {
        char why[256];
        if (build_message(r, &b->rows[i], &b->msgs[b->nv], why, sizeof why) == 0) {
            b->valid[b->nv++] = i;
            continue;
        }
        struct sc_db_err fe = {0};
        if (sc_db_connected(&r->db) && fail_row(r, &b->rows[i], why, &fe)) {
            db_failed(r, "marking an invalid row FAILED", &fe);
            db_lost(r); /* the row stays PUBLISHING and is checked again after its lease */
        }
    }
    if (b->nv == 0)
        return 0;
    char err[512] = "";
    b->t0 = sc_now_ms();
    if (sc_amqp_publish_begin(&r->amqp, b->msgs, (size_t)b->nv, err, sizeof err)) {
        sc_warn("relay: publishing failed, the batch is left to its lease: %s", err);
        b->send_failed = 1;
        amqp_lost(r);
    }
    return b->nv;
}

/* Collects the confirms of a sent batch and marks the acked rows
 * PUBLISHED. A broker or database failure closes that connection; the rows
 * not marked stay PUBLISHING until their lease expires. Frees the rows. */
static void finish_batch(struct relay *r, struct batch *b)
{
    use(r, b);
    if (b->nv > 0 && !b->send_failed) {
        char err[512] = "";
        int rc = sc_amqp_collect_confirms(&r->amqp, b->msgs, (size_t)b->nv, r->rc->confirm_timeout_ms,
                                          err, sizeof err);
        sc_hist_observe(&r->m.confirm_seconds, (double)(sc_now_ms() - b->t0) / 1000.0);
        if (rc < 0) {
            sc_warn("relay: publishing failed, the batch is left to its lease: %s", err);
            amqp_lost(r);
        }
    }
    sc_hist_observe(&r->m.batch_size, b->nv);
    int acked[SC_BATCH_LIMIT], n_acked = 0;
    for (int k = 0; k < b->nv; k++) {
        int i = b->valid[k];
        struct sc_log_fields lf = {.event_id = b->rows[i].event_id};
        switch (b->msgs[k].result) {
        case SC_PUB_ACKED:
            acked[n_acked++] = i;
            break;
        case SC_PUB_RETURNED:
            atomic_fetch_add(&r->m.returned, 1);
            lf.outcome = "returned";
            sc_log(SC_LOG_WARN, &lf,
                   "unroutable: no queue is bound to exchange %s for routing key %s; the row stays "
                   "PUBLISHING and is retried after its lease",
                   r->rc->exchange, b->rows[i].event_type);
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
                   sc_publish_result_name(b->msgs[k].result));
            break;
        }
    }
    if (n_acked > 0) {
        SC_FAULT("relay.after_confirm");
        struct sc_db_err e = {0};
        if (!sc_db_connected(&r->db)) {
            sc_warn("relay: %d confirmed rows cannot be marked PUBLISHED (no database connection); "
                    "they are published again after their lease", n_acked);
        } else if (mark(r, acked, n_acked, &e)) {
            sc_warn("relay: marking %d rows PUBLISHED failed (they stay PUBLISHING until the lease "
                    "expires and are published again): error %u: %s", n_acked, e.code, e.msg);
            db_lost(r);
        }
    }
    atomic_fetch_add(&r->m.batches, 1);
    sc_debug("relay: batch of %d claimed, %d confirmed and marked", b->n, n_acked);
    free_rows(r, b->n);
    b->n = b->nv = 0;
}

/* The pending-count and oldest-pending-age gauges: one indexed query every
 * few seconds, cached for /metrics. Counting is O(backlog), so after a slow
 * count the next one waits 100 times as long as it took: the gauges cost
 * the relay at most ~1% of its time even with millions of rows pending. */
static void refresh_gauges(struct relay *r)
{
    if (sc_now_ms() - r->last_gauge_ms < r->gauge_interval_ms)
        return;
    int64_t t0 = sc_now_ms();
    static const char sql[] =
        "SELECT COUNT(*), COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(created_at), UTC_TIMESTAMP(6)), 0) "
        "FROM outbox_event WHERE status IN ('PENDING', 'PUBLISHING')";
    struct sc_db_err e = {0};
    MYSQL_RES *res = sc_db_select(&r->db, sql, &e);
    if (res) {
        MYSQL_ROW row = mysql_fetch_row(res);
        if (row && row[0] && row[1]) {
            atomic_store(&r->m.pending, atoll(row[0]));
            atomic_store(&r->m.oldest_pending_age_ms, atoll(row[1]) / 1000);
        }
        mysql_free_result(res);
    }
    sc_db_rollback(&r->db, &e); /* end the read's transaction */
    r->last_gauge_ms = sc_now_ms();
    int64_t took = r->last_gauge_ms - t0;
    r->gauge_interval_ms = took * 100 > GAUGE_REFRESH_MS ? took * 100 : GAUGE_REFRESH_MS;
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
    struct batch bufs[2];
    memset(bufs, 0, sizeof bufs);
    for (int k = 0; k < 2; k++) {
        bufs[k].rows = calloc((size_t)batch, sizeof *bufs[k].rows);
        bufs[k].msgs = calloc((size_t)batch, sizeof *bufs[k].msgs);
        bufs[k].valid = calloc((size_t)batch, sizeof *bufs[k].valid);
        if (!bufs[k].rows || !bufs[k].msgs || !bufs[k].valid)
            return 1;
    }
    r.binds = calloc((size_t)batch + 2, sizeof *r.binds);
    r.lens = calloc((size_t)batch + 2, sizeof *r.lens);
    if (!r.binds || !r.lens)
        return 1;
    sc_relay_metrics_init(&r.m, r.worker_id);
    sc_metrics_register_relay(&r.m);
    struct sc_http *http = NULL;
    char err[512];
    if (strcmp(cfg->http_listen, "off") != 0 &&
        !(http = sc_http_start(cfg->http_listen, err, sizeof err))) {
        sc_error("%s", err);
        return 1;
    }
    sc_info("relay %s: publishing outbox_event to exchange %s (batch %d, lease %d ms)", r.worker_id,
            r.rc->exchange, batch, r.rc->lease_ms);
    sc_notify_ready("relaying: /readyz tells when connected");
    if (sc_log_enabled(SC_LOG_DEBUG)) {
        char sql[768];
        snprintf(sql, sizeof sql, CLAIM_EXPIRED_SQL, batch);
        sc_debug("relay claim statement (expired leases): %s", sql);
        snprintf(sql, sizeof sql, CLAIM_PENDING_SQL, batch);
        sc_debug("relay claim statement (pending): %s", sql);
    }

    /* Pipelined: batch k+1 is claimed while batch k's confirms travel, then
     * k is collected and marked, then k+1 is sent. */
    unsigned long long connect_failures = 0, broker_failures = 0; /* in a row */
    int poll = POLL_MIN_MS, cur = 0;
    struct batch *inflight = NULL;
    while (!sc_stop_requested()) {
        char why[512] = "";
        if ((!sc_db_connected(&r.db) && connect_db(&r)) ||
            (!sc_amqp_connected(&r.amqp) && connect_amqp(&r, why, sizeof why))) {
            if (inflight) {
                finish_batch(&r, inflight);
                inflight = NULL;
            }
            int wait = sc_backoff_ms(++connect_failures);
            if (why[0]) /* the database's failures are logged by db_failed */
                sc_warn("relay: broker: %s; attempt %llu, retrying in %d ms", why, ++broker_failures, wait);
            sc_sleep_ms(wait);
            continue;
        }
        connect_failures = broker_failures = 0;
        struct sc_db_err e = {0};
        refresh_gauges(&r);
        struct batch *b = &bufs[cur];
        use(&r, b);
        int n = claim(&r, &e);
        int transient = 0;
        if (n < 0) {
            /* Errors that only show when the statement runs (1290 read only
             * after a failover, 1406, a revoked grant) would otherwise turn
             * into a tight reconnect loop: back off on every repeat. */
            atomic_fetch_add(&r.m.claim_failed, 1);
            db_failed(&r, "claim", &e);
            struct sc_db_err rb = {0};
            transient = (e.cls == SC_DBERR_DEADLOCK || e.cls == SC_DBERR_LOCK_WAIT) && sc_db_rollback(&r.db, &rb) == 0;
            if (!transient)
                db_lost(&r); /* a new connection may reach the new primary */
        }
        if (inflight) {
            finish_batch(&r, inflight);
            inflight = NULL;
        }
        if (n < 0) {
            sc_sleep_ms(db_backoff_ms(r.db_fails, transient));
            continue;
        }
        db_healthy(&r);
        if (n == 0) {
            /* Idle: back off up to poll_ms, and keep the broker connection's
             * heartbeats going meanwhile. */
            if (sc_amqp_connected(&r.amqp) && sc_amqp_service(&r.amqp, why, sizeof why)) {
                sc_warn("relay: broker connection lost: %s", why);
                amqp_lost(&r);
            }
            sc_sleep_ms(poll);
            poll = poll * 2 > r.rc->poll_ms ? r.rc->poll_ms : poll * 2;
            continue;
        }
        poll = POLL_MIN_MS;
        SC_FAULT("relay.after_claim");
        b->n = n;
        if (!sc_amqp_connected(&r.amqp)) {
            /* lost while finishing the previous batch: these wait out their lease */
            use(&r, b);
            free_rows(&r, n);
            b->n = 0;
            continue;
        }
        if (send_batch(&r, b) > 0 && !b->send_failed) {
            inflight = b;
            cur ^= 1;
        } else {
            use(&r, b);
            free_rows(&r, b->n);
            b->n = b->nv = 0;
        }
    }
    if (inflight)
        finish_batch(&r, inflight);
    sc_info("relay %s stopped: published=%llu lease_lost=%llu returned=%llu nacked=%llu "
            "unconfirmed=%llu batches=%llu",
            r.worker_id, atomic_load(&r.m.published), atomic_load(&r.m.lease_lost),
            atomic_load(&r.m.returned), atomic_load(&r.m.nacked), atomic_load(&r.m.unconfirmed),
            atomic_load(&r.m.batches));
    sc_http_stop(http);
    sc_amqp_close(&r.amqp);
    sc_db_close(&r.db);
    for (int k = 0; k < 2; k++) {
        free(bufs[k].rows);
        free(bufs[k].msgs);
        free(bufs[k].valid);
    }
    free(r.binds);
    free(r.lens);
    return 0;
}
