#include "relay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/amqp_conn.h"
#include "io/http.h"
#include "io/schema.h"
#include "lifecycle.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "otel.h"
#include "binlog_source.h"
#include "relay_core.h"
#include "relay_db.h"
#include "relay_tenants.h"

/* What the core's seams reach in the daemon: MariaDB/MySQL and RabbitMQ. */
struct relay_io {
    const struct sc_config *cfg;
    const char *worker_id;
    struct sc_relay_db db;
    struct sc_binlog_source binlog; /* relay.source "binlog" */
    struct sc_amqp amqp;
    struct sc_relay_tenants tenants; /* a tenants section: a database per tenant */
    struct sc_relay_metrics *m;
    int64_t last_beat_ms; /* the tenants' own heartbeats, between tenants */
};

static int io_db_open(void *io, struct sc_db_err *e)
{
    return sc_relay_db_open(&((struct relay_io *)io)->db, e);
}

static void io_db_close(void *io)
{
    sc_relay_db_close(&((struct relay_io *)io)->db);
}

static int io_db_is_open(void *io)
{
    return sc_relay_db_is_open(&((struct relay_io *)io)->db);
}

static int io_claim(void *io, struct sc_relay_row *rows, int max, struct sc_db_err *e)
{
    atomic_fetch_add(&((struct relay_io *)io)->m->claims, 1);
    return sc_relay_db_claim(&((struct relay_io *)io)->db, rows, max, e);
}

static int io_mark_published(void *io, struct sc_relay_row *const *rows, int n, unsigned char *marked,
                             struct sc_db_err *e)
{
    return sc_relay_db_mark_published(&((struct relay_io *)io)->db, rows, n, marked, e);
}

static int io_mark_failed(void *io, const struct sc_relay_row *row, struct sc_db_err *e)
{
    return sc_relay_db_mark_failed(&((struct relay_io *)io)->db, row, e);
}

static int io_rollback(void *io, struct sc_db_err *e)
{
    return sc_relay_db_rollback(&((struct relay_io *)io)->db, e);
}

static int io_amqp_open(void *io, char *err, size_t err_len)
{
    struct relay_io *r = io;
    char name[256];
    snprintf(name, sizeof name, "sidecar relay %s", r->worker_id);
    if (sc_amqp_connect(&r->amqp, r->cfg, name, err, err_len) ||
        sc_amqp_declare_exchange(&r->amqp, r->cfg->relay.exchange, err, err_len) ||
        sc_amqp_confirm_select(&r->amqp, err, err_len)) {
        sc_amqp_close(&r->amqp);
        return -1;
    }
    return 0;
}

static void io_amqp_close(void *io)
{
    sc_amqp_close(&((struct relay_io *)io)->amqp);
}

static int io_amqp_is_open(void *io)
{
    return sc_amqp_connected(&((struct relay_io *)io)->amqp);
}

static int io_publish(void *io, struct sc_publish *msgs, size_t n, char *err, size_t err_len)
{
    return sc_amqp_publish_begin(&((struct relay_io *)io)->amqp, msgs, n, err, err_len);
}

static int io_collect(void *io, struct sc_publish *msgs, size_t n, int timeout_ms,
                      enum sc_amqp_error_class *cls, char *err, size_t err_len)
{
    return sc_amqp_collect_confirms(&((struct relay_io *)io)->amqp, msgs, n, timeout_ms, cls, err,
                                    err_len);
}

static int io_reopen(void *io, char *err, size_t err_len)
{
    return sc_amqp_reopen_channel(&((struct relay_io *)io)->amqp, err, err_len);
}

static int io_service(void *io, char *err, size_t err_len)
{
    return sc_amqp_service(&((struct relay_io *)io)->amqp, err, err_len);
}

static int io_heartbeat(void *io)
{
    return sc_amqp_heartbeat(&((struct relay_io *)io)->amqp);
}

static int64_t io_now_ms(void *io)
{
    (void)io;
    return sc_now_ms();
}

static int io_backoff_ms(void *io, unsigned long long k)
{
    (void)io;
    return sc_backoff_ms(k);
}

static const struct sc_relay_ops relay_ops = {
    .db_open = io_db_open,
    .db_close = io_db_close,
    .db_is_open = io_db_is_open,
    .claim = io_claim,
    .mark_published = io_mark_published,
    .mark_failed = io_mark_failed,
    .rollback = io_rollback,
    .amqp_open = io_amqp_open,
    .amqp_close = io_amqp_close,
    .amqp_is_open = io_amqp_is_open,
    .publish = io_publish,
    .collect = io_collect,
    .reopen = io_reopen,
    .service = io_service,
    .heartbeat = io_heartbeat,
    .now_ms = io_now_ms,
    .backoff_ms = io_backoff_ms,
};

/* relay.source "binlog": the database calls go to the binary log source. */
#define BINLOG(io) (&((struct relay_io *)(io))->binlog)
static int io_b_db_open(void *io, struct sc_db_err *e) { return sc_binlog_db_open(BINLOG(io), e); }
static void io_b_db_close(void *io) { sc_binlog_db_close(BINLOG(io)); }
static int io_b_db_is_open(void *io) { return sc_binlog_db_is_open(BINLOG(io)); }
static int io_b_claim(void *io, struct sc_relay_row *rows, int max, struct sc_db_err *e)
{
    return sc_binlog_claim(BINLOG(io), rows, max, e);
}
static int io_b_mark_published(void *io, struct sc_relay_row *const *rows, int n, unsigned char *marked,
                               struct sc_db_err *e)
{
    return sc_binlog_mark_published(BINLOG(io), rows, n, marked, e);
}
static int io_b_mark_failed(void *io, const struct sc_relay_row *row, struct sc_db_err *e)
{
    return sc_binlog_mark_failed(BINLOG(io), row, e);
}
static int io_b_rollback(void *io, struct sc_db_err *e) { return sc_binlog_rollback(BINLOG(io), e); }
static void io_b_batch_done(void *io, const struct sc_relay_batch *b)
{
    sc_binlog_batch_done(BINLOG(io), b);
}
static int io_b_held(void *io, const struct sc_relay_row *r) { return sc_binlog_held(BINLOG(io), r); }
static void io_b_hold(void *io, const struct sc_relay_row *r) { sc_binlog_hold(BINLOG(io), r); }
static int io_b_mark_held(void *io, struct sc_relay_row *const *rows, int n, struct sc_db_err *e)
{
    return sc_binlog_mark_held(BINLOG(io), rows, n, e);
}
static int io_b_stale(void *io, const struct sc_relay_batch *b) { return sc_binlog_stale(BINLOG(io), b); }

static const struct sc_relay_ops binlog_ops = {
    .db_open = io_b_db_open,
    .db_close = io_b_db_close,
    .db_is_open = io_b_db_is_open,
    .claim = io_b_claim,
    .mark_published = io_b_mark_published,
    .mark_failed = io_b_mark_failed,
    .rollback = io_b_rollback,
    .amqp_open = io_amqp_open,
    .amqp_close = io_amqp_close,
    .amqp_is_open = io_amqp_is_open,
    .publish = io_publish,
    .collect = io_collect,
    .reopen = io_reopen,
    .service = io_service,
    .heartbeat = io_heartbeat,
    .now_ms = io_now_ms,
    .backoff_ms = io_backoff_ms,
    .batch_done = io_b_batch_done,
    .held = io_b_held,
    .hold = io_b_hold,
    .mark_held = io_b_mark_held,
    .stale = io_b_stale,
};

/* With tenants: the database calls go to the tenant pool. Its sessions open
 * and fail per tenant inside the claim and the marks; "open" here only says
 * that no mark failed since the last round began (the readiness gauge). */
#define TENANTS(io) (&((struct relay_io *)(io))->tenants)
static int io_t_db_open(void *io, struct sc_db_err *e)
{
    (void)e;
    TENANTS(io)->closed = 0;
    return 0;
}
static void io_t_db_close(void *io)
{
    sc_relay_tenants_close_current(TENANTS(io));
    TENANTS(io)->closed = 1;
}
static int io_t_db_is_open(void *io) { return !TENANTS(io)->closed; }
static int io_t_claim(void *io, struct sc_relay_row *rows, int max, struct sc_db_err *e)
{
    (void)e;
    return sc_relay_tenants_claim(TENANTS(io), rows, max);
}
static int io_t_mark_published(void *io, struct sc_relay_row *const *rows, int n, unsigned char *marked,
                               struct sc_db_err *e)
{
    return sc_relay_tenants_mark_published(TENANTS(io), rows, n, marked, e);
}
static int io_t_mark_failed(void *io, const struct sc_relay_row *row, struct sc_db_err *e)
{
    return sc_relay_tenants_mark_failed(TENANTS(io), row, e);
}
static int io_t_rollback(void *io, struct sc_db_err *e) { return sc_relay_tenants_rollback(TENANTS(io), e); }
static void io_t_batch_done(void *io, const struct sc_relay_batch *b)
{
    sc_relay_tenants_batch_done(TENANTS(io), b);
}
static int io_t_idle_wait_ms(void *io) { return sc_relay_tenants_idle_wait_ms(TENANTS(io)); }
static int64_t io_t_claim_started(void *io) { return TENANTS(io)->claim_started_ms; }

/* Between two tenants' claims (a round over many tenants can outlast half
 * a heartbeat): one heartbeat frame when half the interval has passed. */
static void tenants_beat(void *arg)
{
    struct relay_io *r = arg;
    int hb = r->cfg->amqp_heartbeat_s * 1000;
    int64_t now = sc_now_ms();
    if (hb <= 0 || !sc_amqp_connected(&r->amqp) || now - r->last_beat_ms < hb / 2)
        return;
    r->last_beat_ms = now;
    sc_amqp_heartbeat(&r->amqp);
}

static const struct sc_relay_ops tenant_ops = {
    .db_open = io_t_db_open,
    .db_close = io_t_db_close,
    .db_is_open = io_t_db_is_open,
    .claim = io_t_claim,
    .mark_published = io_t_mark_published,
    .mark_failed = io_t_mark_failed,
    .rollback = io_t_rollback,
    .amqp_open = io_amqp_open,
    .amqp_close = io_amqp_close,
    .amqp_is_open = io_amqp_is_open,
    .publish = io_publish,
    .collect = io_collect,
    .reopen = io_reopen,
    .service = io_service,
    .heartbeat = io_heartbeat,
    .now_ms = io_now_ms,
    .backoff_ms = io_backoff_ms,
    .batch_done = io_t_batch_done,
    .idle_wait_ms = io_t_idle_wait_ms,
    .claim_started = io_t_claim_started,
};

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
    int tenants = cfg->tenants.present;
    if (tenants && sc_relay_binlog(&cfg->relay)) {
        fprintf(stderr, "sidecar: relay: relay.source \"binlog\" with a tenants section is not built: "
                "use relay.source \"poll\" (the default) or leave tenants out\n");
        return 2;
    }
    if (tenants && cfg->tenants.n_list == 0 && !cfg->tenants.discover) {
        fprintf(stderr, "sidecar: relay: tenants.list is empty: the relay reads the outbox of the "
                "tenants it names (or set tenants.discover)\n");
        return 2;
    }
    /* With tenants mysql.url is not the relay's: `sidecar check --tenant`
     * checks each tenant's schema. */
    if (!tenants && sc_schema_startup(cfg, sc_schema_relay_parts(cfg)))
        return 2;
    char oerr[256];
    if (cfg->otel_endpoint && sc_otel_start(cfg->otel_endpoint, "sidecar-relay", oerr, sizeof oerr)) {
        sc_error("%s", oerr);
        return 1;
    }
    const struct sc_relay_config *rc = &cfg->relay;
    char worker_id[160];
    if (rc->worker_id)
        snprintf(worker_id, sizeof worker_id, "%s", rc->worker_id);
    else
        default_worker_id(worker_id, sizeof worker_id);

    static struct sc_relay_metrics m; /* read by the HTTP thread until exit */
    struct relay_io io;
    memset(&io, 0, sizeof io);
    io.cfg = cfg;
    io.worker_id = worker_id;
    struct sc_relay_params p = {
        .worker_id = worker_id, .exchange = rc->exchange, .batch = rc->batch,
        .lease_ms = rc->lease_ms, .confirm_timeout_ms = rc->confirm_timeout_ms,
        .poll_ms = rc->poll_ms, .heartbeat_ms = cfg->amqp_heartbeat_s * 1000,
        .binary = strcmp(rc->content_mode, "binary") == 0,
        .per_aggregate = sc_relay_per_aggregate(rc),
        .max_message_bytes = rc->max_message_bytes,
        .claim_waits = sc_relay_binlog(rc),
        .checkpointed = sc_relay_binlog(rc),
    };
    struct sc_relay_core core;
    const struct sc_relay_ops *ops = tenants ? &tenant_ops : sc_relay_binlog(rc) ? &binlog_ops : &relay_ops;
    sc_relay_metrics_init(&m, worker_id);
    io.m = &m;
    if (sc_relay_db_init(&io.db, cfg, worker_id) || sc_binlog_source_init(&io.binlog, cfg, worker_id) ||
        (tenants && sc_relay_tenants_init(&io.tenants, cfg, worker_id, &m)) ||
        sc_relay_core_init(&core, &p, ops, &io, &m)) {
        sc_error("relay: out of memory");
        sc_relay_tenants_free(&io.tenants);
        sc_binlog_source_free(&io.binlog);
        sc_relay_db_free(&io.db);
        return 1;
    }
    io.tenants.beat = tenants_beat;
    io.tenants.beat_arg = &io;
    if (sc_relay_binlog(rc)) {
        io.binlog.m = &m;
        atomic_store(&m.binlog_lag_bytes, 0);
        atomic_store(&m.binlog_lag_ms, 0);
    }
    sc_metrics_register_relay(&m);
    struct sc_http *http = NULL;
    char err[512];
    if (strcmp(cfg->http_listen, "off") != 0 &&
        !(http = sc_http_start(cfg->http_listen, err, sizeof err))) {
        sc_error("%s", err);
        sc_relay_core_free(&core);
        sc_relay_tenants_free(&io.tenants);
        sc_binlog_source_free(&io.binlog);
        sc_relay_db_free(&io.db);
        return 1;
    }
    sc_info("relay %s: publishing outbox_event to exchange %s (source %s, batch %d, lease %d ms, "
            "ordering %s, %s mode, messages up to %d bytes)", worker_id, rc->exchange, rc->source,
            rc->batch, rc->lease_ms, rc->ordering, rc->content_mode, rc->max_message_bytes);
    if (tenants)
        sc_info("relay %s: reading the outbox of %d tenant databases (%s, listed again every %d "
                "ms): one batch per tenant per round, an idle tenant claimed from once per %d ms, "
                "at most %d sessions open", worker_id, io.tenants.live,
                cfg->tenants.discover ? "tenants.discover" : "tenants.list",
                cfg->tenants.discover ? cfg->tenants.discover_ms : 0, rc->poll_ms,
                cfg->tenants.max_connections);
    sc_relay_db_log_claim_sql(rc->batch, sc_relay_per_aggregate(rc));
    sc_notify_ready("relaying: /readyz tells when connected");

    while (!sc_stop_requested()) {
        /* In binlog mode rows stay PENDING: counted against the watermark,
         * and not at all on a schema without one. */
        if (core.phase == SC_RELAY_CLAIM && !sc_relay_binlog(rc) && !tenants)
            sc_relay_db_refresh_gauges(&io.db, &io.db.db, &m);
        else if (core.phase == SC_RELAY_CLAIM && sc_relay_binlog(rc) && io.binlog.ckpt.wm_column)
            sc_relay_db_refresh_gauges(&io.db, &io.binlog.db, &m);
        int wait = sc_relay_step(&core);
        if (wait > 0)
            sc_sleep_ms(wait);
    }
    /* SIGTERM: claim nothing more, finish the batches in hand. */
    core.stopping = 1;
    while (!sc_relay_holds_nothing(&core))
        sc_relay_step(&core);

    sc_info("relay %s stopped: published=%llu lease_lost=%llu returned=%llu nacked=%llu "
            "unconfirmed=%llu batches=%llu",
            worker_id, atomic_load(&m.published), atomic_load(&m.lease_lost),
            atomic_load(&m.returned), atomic_load(&m.nacked), atomic_load(&m.unconfirmed),
            atomic_load(&m.batches));
    int gone = io.binlog.core.gone;
    if (sc_relay_binlog(rc))
        sc_info("relay %s: binlog source: %llu checkpoints, %llu rewinds, %llu rows deleted before "
                "they were read", worker_id, io.binlog.core.checkpoints, io.binlog.core.rewinds, io.binlog.core.missing);
    sc_otel_stop();
    sc_http_stop(http);
    sc_amqp_close(&io.amqp);
    sc_relay_core_free(&core);
    sc_relay_tenants_free(&io.tenants);
    sc_binlog_source_free(&io.binlog);
    sc_relay_db_free(&io.db);
    sc_tenant_series_free(&m.backlog);
    return gone ? 2 : 0;
}
