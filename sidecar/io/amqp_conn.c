#include "amqp_conn.h"

#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#include "lifecycle.h"
#include "log.h"
#include "metrics.h"
#include "url.h"

/* Longest any single broker RPC (declare, bind, qos, consume) may take. */
#define SC_AMQP_RPC_TIMEOUT_S 10

static int fail(char *err, size_t len, const char *what, const char *detail)
{
    snprintf(err, len, "%s: %s", what, detail);
    return -1;
}

/* Describes an RPC reply; returns 0 for a normal reply, -1 otherwise. */
static int reply_error(amqp_rpc_reply_t r, const char *what, char *err, size_t len)
{
    char detail[256];
    switch (r.reply_type) {
    case AMQP_RESPONSE_NORMAL:
        return 0;
    case AMQP_RESPONSE_NONE:
        return fail(err, len, what, "no RPC reply");
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
        return fail(err, len, what, amqp_error_string2(r.library_error));
    case AMQP_RESPONSE_SERVER_EXCEPTION:
        if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
            amqp_connection_close_t *m = r.reply.decoded;
            snprintf(detail, sizeof detail, "connection closed by broker: %u %.*s", m->reply_code,
                     (int)m->reply_text.len, (const char *)m->reply_text.bytes);
        } else if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
            amqp_channel_close_t *m = r.reply.decoded;
            snprintf(detail, sizeof detail, "channel closed by broker: %u %.*s", m->reply_code,
                     (int)m->reply_text.len, (const char *)m->reply_text.bytes);
        } else {
            snprintf(detail, sizeof detail, "unexpected server method 0x%08x", r.reply.id);
        }
        return fail(err, len, what, detail);
    }
    return fail(err, len, what, "unknown reply type");
}

/* Keeps a dead peer from blocking a send forever: rabbitmq-c 0.11 can hang
 * in a publish to a peer that vanished without a FIN. */
static void harden_socket(int fd, int heartbeat_s)
{
    int on = 1, idle = 10, intvl = 5, cnt = 3;
    unsigned user_timeout_ms = (unsigned)(heartbeat_s > 0 ? heartbeat_s * 2000 : 60000);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

static int connect_one(struct sc_amqp *a, const struct sc_config *cfg, const char *amqp_url,
                       const char *name, char *err, size_t err_len)
{
    struct amqp_connection_info ci;
    memset(a, 0, sizeof *a);
    char *url = strdup(amqp_url);
    if (!url)
        return fail(err, err_len, "amqp", "out of memory");
    amqp_default_connection_info(&ci);
    if (amqp_parse_url(url, &ci) != AMQP_STATUS_OK) {
        free(url);
        return fail(err, err_len, "amqp.url", "cannot parse the URL");
    }
    a->conn = amqp_new_connection();
    amqp_socket_t *sock = NULL;
    if (a->conn && ci.ssl) {
        /* TLS: the broker's certificate must chain to tls_ca and name the
         * host we asked for; a client certificate when one is configured. */
        sock = amqp_ssl_socket_new(a->conn);
        const char *what = NULL;
        if (sock && amqp_ssl_socket_set_cacert(sock, cfg->amqp_tls_ca) != AMQP_STATUS_OK)
            what = "amqp.tls_ca: cannot load the CA file";
        else if (sock && cfg->amqp_tls_cert &&
                 amqp_ssl_socket_set_key(sock, cfg->amqp_tls_cert, cfg->amqp_tls_key) != AMQP_STATUS_OK)
            what = "amqp.tls_cert: cannot load the client certificate and key";
        if (what) {
            free(url);
            sc_amqp_close(a);
            snprintf(err, err_len, "%s", what);
            return -1;
        }
        if (sock) {
            amqp_ssl_socket_set_verify_peer(sock, 1);
            amqp_ssl_socket_set_verify_hostname(sock, cfg->amqp_tls_verify_hostname);
        }
    } else if (a->conn) {
        sock = amqp_tcp_socket_new(a->conn);
    }
    if (!sock) {
        free(url);
        sc_amqp_close(a);
        return fail(err, err_len, "amqp", "cannot create a socket");
    }
    struct timeval tv = {cfg->amqp_connect_timeout_ms / 1000,
                         (cfg->amqp_connect_timeout_ms % 1000) * 1000};
    int rc = amqp_socket_open_noblock(sock, ci.host, ci.port, &tv);
    if (rc != AMQP_STATUS_OK) {
        char what[300];
        snprintf(what, sizeof what, "amqp connect %s:%d%s", ci.host, ci.port,
                 ci.ssl ? " (TLS: is the broker's certificate signed by tls_ca and for this host?)" : "");
        free(url);
        sc_amqp_close(a);
        return fail(err, err_len, what, amqp_error_string2(rc));
    }
    harden_socket(amqp_socket_get_sockfd(sock), cfg->amqp_heartbeat_s);
    amqp_set_handshake_timeout(a->conn, &tv);
    struct timeval rpc_tv = {SC_AMQP_RPC_TIMEOUT_S, 0};
    amqp_set_rpc_timeout(a->conn, &rpc_tv);

    /* rabbitmq-c 0.11 advertises authentication_failure_close and
     * exchange_exchange_bindings and merges these capabilities into its
     * own. Without consumer_cancel_notify the broker never says that it
     * cancelled a consumer (its queue was deleted): the worker would wait
     * for deliveries forever. */
    amqp_table_entry_t caps_entries[1];
    caps_entries[0].key = amqp_cstring_bytes("consumer_cancel_notify");
    caps_entries[0].value.kind = AMQP_FIELD_KIND_BOOLEAN;
    caps_entries[0].value.value.boolean = 1;
    amqp_table_entry_t props_entries[3];
    props_entries[0].key = amqp_cstring_bytes("connection_name");
    props_entries[0].value.kind = AMQP_FIELD_KIND_UTF8;
    props_entries[0].value.value.bytes = amqp_cstring_bytes(name);
    props_entries[1].key = amqp_cstring_bytes("product");
    props_entries[1].value.kind = AMQP_FIELD_KIND_UTF8;
    props_entries[1].value.value.bytes = amqp_cstring_bytes("sidecar");
    props_entries[2].key = amqp_cstring_bytes("capabilities");
    props_entries[2].value.kind = AMQP_FIELD_KIND_TABLE;
    props_entries[2].value.value.table = (amqp_table_t){1, caps_entries};
    amqp_table_t props = {3, props_entries};
    amqp_rpc_reply_t r = amqp_login_with_properties(a->conn, ci.vhost, 0, 131072,
                                                    cfg->amqp_heartbeat_s, &props,
                                                    AMQP_SASL_METHOD_PLAIN, ci.user, ci.password);
    free(url);
    if (reply_error(r, "amqp login", err, err_len)) {
        sc_amqp_close(a);
        return -1;
    }
    amqp_channel_open(a->conn, SC_AMQP_CHANNEL);
    if (reply_error(amqp_get_rpc_reply(a->conn), "amqp channel.open", err, err_len)) {
        sc_amqp_close(a);
        return -1;
    }
    return 0;
}

/* Where this thread's next connect starts: after the node it was last on. */
static _Thread_local size_t next_node;

int sc_amqp_connect(struct sc_amqp *a, const struct sc_config *cfg, const char *name, char *err,
                    size_t err_len)
{
    char *const single[1] = {cfg->amqp_url};
    char *const *urls = cfg->n_amqp_urls ? cfg->amqp_urls : single;
    size_t n = cfg->n_amqp_urls ? cfg->n_amqp_urls : 1;
    size_t start = next_node; /* next_node moves below: each node once */
    for (size_t k = 0; k < n; k++) {
        size_t i = (start + k) % n;
        char where[300];
        sc_url_endpoint(urls[i], where, sizeof where);
        next_node = i + 1;
        if (connect_one(a, cfg, urls[i], name, err, err_len) == 0) {
            a->node = (int)i;
            sc_metrics_endpoint(name, "amqp", (int)i, where);
            if (n > 1)
                sc_info("amqp: %s: connected to node %zu of %zu (%s)", name, i, n, where);
            return 0;
        }
        if (n > 1 && k + 1 < n)
            sc_warn("amqp: %s: node %zu (%s): %s; trying the next node", name, i, where, err);
    }
    return -1;
}

void sc_amqp_close(struct sc_amqp *a)
{
    if (!a->conn)
        return;
    /* Best effort and bounded by the RPC timeout; the broker requeues every
     * unacked delivery when the connection goes, however it goes. */
    amqp_connection_close(a->conn, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(a->conn);
    memset(a, 0, sizeof *a);
}

int sc_amqp_connected(const struct sc_amqp *a)
{
    return a->conn != NULL;
}

void sc_amqp_retry_queue_name(const struct sc_consumer_config *k, int delay_ms, char *out,
                              size_t out_len)
{
    snprintf(out, out_len, "%s.retry.%dms", k->queue, delay_ms);
}

static int declare_queue_seen(struct sc_amqp *a, const char *name, const char *type,
                              const amqp_table_entry_t *extra, int n_extra, char *seen,
                              size_t seen_len, char *err, size_t err_len)
{
    amqp_table_entry_t entries[6];
    int n = 0;
    for (int i = 0; i < n_extra; i++)
        entries[n++] = extra[i];
    if (strcmp(type, "quorum") == 0) {
        entries[n].key = amqp_cstring_bytes("x-queue-type");
        entries[n].value.kind = AMQP_FIELD_KIND_UTF8;
        entries[n].value.value.bytes = amqp_cstring_bytes("quorum");
        n++;
    }
    amqp_table_t args = {n, entries};
    amqp_queue_declare(a->conn, SC_AMQP_CHANNEL, amqp_cstring_bytes(name), 0, 1, 0, 0, args);
    amqp_rpc_reply_t r = amqp_get_rpc_reply(a->conn);
    if (seen && seen_len) {
        /* The whole refusal, which err would cut: its end names a value. */
        seen[0] = 0;
        if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
            r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
            amqp_channel_close_t *m = r.reply.decoded;
            snprintf(seen, seen_len, "%.*s", (int)m->reply_text.len,
                     (const char *)m->reply_text.bytes);
        }
    }
    char what[300];
    snprintf(what, sizeof what, "declare queue %.280s", name);
    return reply_error(r, what, err, err_len);
}

static int declare_queue(struct sc_amqp *a, const char *name, const char *type,
                         const amqp_table_entry_t *extra, int n_extra, char *err, size_t err_len)
{
    return declare_queue_seen(a, name, type, extra, n_extra, NULL, 0, err, err_len);
}

int sc_amqp_declare_exchange(struct sc_amqp *a, const char *exchange, char *err, size_t err_len)
{
    char what[300];
    amqp_exchange_declare(a->conn, SC_AMQP_CHANNEL, amqp_cstring_bytes(exchange),
                          amqp_cstring_bytes("topic"), 0, 1, 0, 0, amqp_empty_table);
    snprintf(what, sizeof what, "declare exchange %s", exchange);
    return reply_error(amqp_get_rpc_reply(a->conn), what, err, err_len);
}

/* After the broker closed channel 1 over a refused declare: answers the
 * close and opens the channel again. Returns 0, or -1 with err set. */
static int reopen_channel(struct sc_amqp *a, char *err, size_t err_len)
{
    amqp_channel_close_ok_t ok;
    if (amqp_send_method(a->conn, SC_AMQP_CHANNEL, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok) != AMQP_STATUS_OK)
        return fail(err, err_len, "amqp channel.close-ok", "cannot send it");
    amqp_channel_open(a->conn, SC_AMQP_CHANNEL);
    return reply_error(amqp_get_rpc_reply(a->conn), "amqp channel.open", err, err_len);
}

/* The x-delivery-limit of every quorum queue the sidecar declares: the
 * largest the field takes (a signed 32-bit integer). A quorum queue counts
 * each return as a delivery — a failed attempt, and every delivery in hand
 * when a session ends (a crash, a lost connection, a database outage longer
 * than db_outage_hold_ms) or a `sidecar dlq` browse gives back what it read —
 * and RabbitMQ 4 drops a message at its limit, 20 when none was declared,
 * without a trace. The consumer dead-letters at max_attempts itself
 * (x-delivery-count), so the broker's limit must never come first, however
 * many sessions end: a fixed value no count reaches, which also leaves
 * max_attempts free to change (a queue's arguments cannot). -1, RabbitMQ 4's
 * "no limit", is no answer: RabbitMQ 3.x reads it as a limit below zero and
 * drops every message the first time it is given back (measured on 3.10). */
#define SC_QUORUM_DELIVERY_LIMIT 2147483647

int sc_amqp_existing_delivery_limit(const char *text, long long *limit)
{
    /* "... but current is none", "... but current is '50'" and "... but
     * current is the value '50' of type 'signedint'" (RabbitMQ 3.10, 4). */
    static const char tail[] = "but current is ";
    const char *p = NULL;
    for (const char *q = strstr(text, tail); q; q = strstr(q + 1, tail))
        p = q + strlen(tail);
    size_t n = strlen(text);
    /* Cut at 255 bytes, the text ends in "...": what is left may be the name's. */
    if (!p || !strstr(text, "inequivalent arg 'x-delivery-limit'") ||
        (n >= 3 && strcmp(text + n - 3, "...") == 0))
        return -1;
    if (strcmp(p, "none") == 0)
        return 0;
    if (strncmp(p, "the value ", 10) == 0)
        p += 10;
    if (*p++ != '\'')
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (end == p || *end != '\'' || errno)
        return -1;
    *limit = v;
    return 1;
}

int sc_amqp_delivery_limit_enough(int has, long long limit, int max_attempts)
{
    if (has < 0)
        return 0;
    if (has == 0)
        limit = SC_DELIVERY_LIMIT_DEFAULT;
    /* Negative: no limit on RabbitMQ 4, every return dropped on 3.x. */
    return limit >= (long long)max_attempts + SC_DELIVERY_LIMIT_MARGIN;
}

enum queue_use {
    Q_CONSUMED,    /* the queue, or a partition: what the workers take from */
    Q_DELAY,       /* a delay queue: no one consumes, nothing is given back */
    Q_DEAD_LETTER, /* taken from only by `sidecar dlq` */
};

static void limit_words(int has, long long limit, char *out, size_t len)
{
    if (has > 0)
        snprintf(out, len, "x-delivery-limit %lld%s", limit,
                 limit < 0 ? " (no limit on RabbitMQ 4, but RabbitMQ 3.x drops a message the "
                             "first time it is given back)" : "");
    else if (has == 0)
        snprintf(out, len, "no x-delivery-limit (so RabbitMQ 4 gives it %d)",
                 SC_DELIVERY_LIMIT_DEFAULT);
    else
        snprintf(out, len, "an x-delivery-limit the broker's answer cuts off (a long name; "
                 "`rabbitmqctl list_queues name arguments` shows it)");
}

/* A consumed queue whose limit lets the broker drop a message before
 * max_attempts dead-letters it: not taken. */
static int refuse(const struct sc_consumer_config *k, const char *q, int has, long long limit,
                  char *err, size_t err_len)
{
    char what[200], times[40] = "", lower[60] = "";
    limit_words(has, limit, what, sizeof what);
    long long at = has == 0 ? SC_DELIVERY_LIMIT_DEFAULT : limit;
    if (has >= 0 && at >= 0)
        snprintf(times, sizeof times, " more than %lld times", at);
    if (has >= 0 && at - SC_DELIVERY_LIMIT_MARGIN >= 1)
        snprintf(lower, sizeof lower, "lower max_attempts to %lld or ",
                 at - SC_DELIVERY_LIMIT_MARGIN);
    snprintf(err, err_len,
             "quorum queue %s has %s, less than the max_attempts + %d = %d it needs: the broker "
             "would drop a message given back%s before the consumer dead-letters it, and cannot "
             "change a queue's arguments: %smove the consumer to a new queue (docs/upgrading.md)",
             q, what, SC_DELIVERY_LIMIT_MARGIN, k->max_attempts + SC_DELIVERY_LIMIT_MARGIN, times,
             lower);
    return SC_AMQP_REFUSED;
}

/* A quorum queue, with SC_QUORUM_DELIVERY_LIMIT. One that exists with another
 * limit or none (declared by an earlier version) is declared again as it is,
 * its other arguments still checked, when nothing is lost by it: a delay
 * queue; the dead-letter queue (`sidecar dlq` gives a dead letter a fresh
 * count before it nears 20; a warning); a consumed queue whose limit is at
 * least max_attempts + SC_DELIVERY_LIMIT_MARGIN (a warning). Otherwise
 * SC_AMQP_REFUSED. A policy's delivery-limit is not seen (AMQP 0-9-1 shows
 * none); where both are set RabbitMQ takes the lower. */
static int declare_quorum(struct sc_amqp *a, const struct sc_consumer_config *k, const char *q,
                          enum queue_use use, const amqp_table_entry_t *extra, int n_extra,
                          char *err, size_t err_len)
{
    amqp_table_entry_t e[5];
    for (int i = 0; i < n_extra; i++)
        e[i] = extra[i];
    e[n_extra].key = amqp_cstring_bytes("x-delivery-limit");
    e[n_extra].value.kind = AMQP_FIELD_KIND_I32;
    e[n_extra].value.value.i32 = SC_QUORUM_DELIVERY_LIMIT;
    char seen[512];
    if (declare_queue_seen(a, q, "quorum", e, n_extra + 1, seen, sizeof seen, err, err_len) == 0)
        return 0;
    if (!strstr(seen, "inequivalent arg 'x-delivery-limit'"))
        return -1;
    long long limit = 0;
    int has = sc_amqp_existing_delivery_limit(seen, &limit), declared = 0;
    if (reopen_channel(a, err, err_len))
        return -1;
    if (has < 0) {
        /* The answer was cut short: none, or some limit? */
        if (declare_queue_seen(a, q, "quorum", extra, n_extra, seen, sizeof seen, err,
                               err_len) == 0) {
            has = 0;
            declared = 1;
        } else if (!strstr(seen, "inequivalent arg 'x-delivery-limit'") ||
                   reopen_channel(a, err, err_len)) {
            return -1;
        } else {
            has = sc_amqp_existing_delivery_limit(seen, &limit);
        }
    }
    if (use == Q_CONSUMED && !sc_amqp_delivery_limit_enough(has, limit, k->max_attempts))
        return refuse(k, q, has, limit, err, err_len);
    if (!declared && has > 0) {
        e[n_extra].value.kind = AMQP_FIELD_KIND_I64;
        e[n_extra].value.value.i64 = limit;
        if (declare_queue(a, q, "quorum", e, n_extra + 1, err, err_len))
            return -1;
    } else if (!declared && has == 0) {
        if (declare_queue(a, q, "quorum", extra, n_extra, err, err_len))
            return -1;
    } else if (!declared) {
        amqp_queue_declare(a->conn, SC_AMQP_CHANNEL, amqp_cstring_bytes(q), 1, 0, 0, 0,
                           amqp_empty_table);
        char what[300];
        snprintf(what, sizeof what, "declare queue %.270s (passive)", q);
        if (reply_error(amqp_get_rpc_reply(a->conn), what, err, err_len))
            return -1;
    }
    char what[200];
    limit_words(has, limit, what, sizeof what);
    if (use == Q_DEAD_LETTER)
        sc_warn("amqp: dead-letter queue %s keeps %s, since the broker cannot change a queue's "
                "arguments: each `sidecar dlq` browse counts as a delivery there, and RabbitMQ 4 "
                "drops a message at its limit; `sidecar dlq` gives a dead letter a fresh count "
                "before it nears 20, and a policy with delivery-limit -1 (RabbitMQ 4) lifts it",
                q, what);
    else if (use == Q_CONSUMED)
        sc_warn("amqp: quorum queue %s keeps %s, since the broker cannot change a queue's "
                "arguments: enough for max_attempts %d + %d, but RabbitMQ drops a message given "
                "back more often (sessions that end with it in hand count too); a new queue "
                "gets %d (docs/upgrading.md)",
                q, what, k->max_attempts, SC_DELIVERY_LIMIT_MARGIN, SC_QUORUM_DELIVERY_LIMIT);
    else
        sc_info("amqp: delay queue %s keeps %s: no one consumes from it", q, what);
    return 0;
}

/* The queue type of the consumer's config: a quorum queue with its limit. */
static int declare_for(struct sc_amqp *a, const struct sc_consumer_config *k, const char *q,
                       enum queue_use use, const amqp_table_entry_t *extra, int n_extra,
                       char *err, size_t err_len)
{
    if (strcmp(k->queue_type, "quorum") == 0)
        return declare_quorum(a, k, q, use, extra, n_extra, err, err_len);
    return declare_queue(a, q, k->queue_type, extra, n_extra, err, err_len);
}

void sc_amqp_partition_queue_name(const struct sc_consumer_config *k, int i, char *out,
                                  size_t out_len)
{
    snprintf(out, out_len, "%s.p%d", k->queue, i);
}

void sc_amqp_ordering_exchange_name(const struct sc_consumer_config *k, char *out, size_t out_len)
{
    snprintf(out, out_len, "%s.ordering", k->queue);
}

/* An ordered stream's queue: one consumer at a time takes from it (the
 * others wait as hot standbys), so its order is the queue's order. */
static int declare_ordered_queue(struct sc_amqp *a, const struct sc_consumer_config *k,
                                 const char *name, char *err, size_t err_len)
{
    amqp_table_entry_t sac;
    sac.key = amqp_cstring_bytes("x-single-active-consumer");
    sac.value.kind = AMQP_FIELD_KIND_BOOLEAN;
    sac.value.value.boolean = 1;
    return declare_for(a, k, name, Q_CONSUMED, &sac, 1, err, err_len);
}

static int bind_queue(struct sc_amqp *a, const char *queue, const char *exchange, const char *key,
                      char *err, size_t err_len)
{
    char what[600];
    amqp_queue_bind(a->conn, SC_AMQP_CHANNEL, amqp_cstring_bytes(queue),
                    amqp_cstring_bytes(exchange), amqp_cstring_bytes(key), amqp_empty_table);
    snprintf(what, sizeof what, "bind %.250s to %.250s (%.80s)", queue, exchange, key);
    return reply_error(amqp_get_rpc_reply(a->conn), what, err, err_len);
}

/* partitions > 1: the consistent-hash exchange <queue>.ordering (hashing
 * header x-ordering-key), bound to every exchange of the bindings, spreads
 * the keys over <queue>.p0 .. p<N-1>, each with one active consumer. Every
 * partition has the same weight. */
static int declare_partitions(struct sc_amqp *a, const struct sc_consumer_config *k, char *err,
                              size_t err_len)
{
    char ex[300], q[300], what[700];
    sc_amqp_ordering_exchange_name(k, ex, sizeof ex);
    amqp_table_entry_t hh;
    hh.key = amqp_cstring_bytes("hash-header");
    hh.value.kind = AMQP_FIELD_KIND_UTF8;
    hh.value.value.bytes = amqp_cstring_bytes(SC_H_ORDERING_KEY);
    amqp_table_t args = {1, &hh};
    amqp_exchange_declare(a->conn, SC_AMQP_CHANNEL, amqp_cstring_bytes(ex),
                          amqp_cstring_bytes("x-consistent-hash"), 0, 1, 0, 0, args);
    snprintf(what, sizeof what, "declare exchange %s (x-consistent-hash: is the plugin "
             "rabbitmq_consistent_hash_exchange enabled?)", ex);
    if (reply_error(amqp_get_rpc_reply(a->conn), what, err, err_len))
        return -1;
    for (int i = 0; i < k->ordering.partitions; i++) {
        sc_amqp_partition_queue_name(k, i, q, sizeof q);
        int rc = declare_ordered_queue(a, k, q, err, err_len);
        if (rc)
            return rc;
        if (bind_queue(a, q, ex, "1", err, err_len))
            return -1;
    }
    for (size_t i = 0; i < k->n_bindings; i++) {
        const struct sc_binding *b = &k->bindings[i];
        amqp_exchange_bind(a->conn, SC_AMQP_CHANNEL, amqp_cstring_bytes(ex),
                           amqp_cstring_bytes(b->exchange), amqp_cstring_bytes(b->routing_key),
                           amqp_empty_table);
        snprintf(what, sizeof what, "bind exchange %s to %s (%s)", ex, b->exchange, b->routing_key);
        if (reply_error(amqp_get_rpc_reply(a->conn), what, err, err_len))
            return -1;
    }
    return 0;
}

int sc_amqp_declare_consumer(struct sc_amqp *a, const struct sc_consumer_config *k, char *err,
                             size_t err_len)
{
    int rc;
    for (size_t i = 0; i < k->n_bindings; i++)
        if (sc_amqp_declare_exchange(a, k->bindings[i].exchange, err, err_len))
            return -1;
    if (k->ordering.present) {
        /* Retries run in place (consume/order.h): no delay queues. */
        if (declare_for(a, k, k->dead_letter_queue, Q_DEAD_LETTER, NULL, 0, err, err_len))
            return -1;
        if (k->ordering.partitions > 1)
            return declare_partitions(a, k, err, err_len);
        if ((rc = declare_ordered_queue(a, k, k->queue, err, err_len)))
            return rc;
        for (size_t i = 0; i < k->n_bindings; i++)
            if (bind_queue(a, k->queue, k->bindings[i].exchange, k->bindings[i].routing_key, err,
                           err_len))
                return -1;
        return 0;
    }
    if ((rc = declare_for(a, k, k->queue, Q_CONSUMED, NULL, 0, err, err_len)))
        return rc;
    if (declare_for(a, k, k->dead_letter_queue, Q_DEAD_LETTER, NULL, 0, err, err_len))
        return -1;
    for (size_t i = 0; i < k->n_retry_delays; i++) {
        /* A delay queue holds a message for its TTL, then dead-letters it
         * through the default exchange back onto the consumer's queue. */
        char name[300];
        sc_amqp_retry_queue_name(k, k->retry_delays_ms[i], name, sizeof name);
        amqp_table_entry_t extra[3];
        extra[0].key = amqp_cstring_bytes("x-message-ttl");
        extra[0].value.kind = AMQP_FIELD_KIND_I64;
        extra[0].value.value.i64 = k->retry_delays_ms[i];
        extra[1].key = amqp_cstring_bytes("x-dead-letter-exchange");
        extra[1].value.kind = AMQP_FIELD_KIND_UTF8;
        extra[1].value.value.bytes = amqp_cstring_bytes("");
        extra[2].key = amqp_cstring_bytes("x-dead-letter-routing-key");
        extra[2].value.kind = AMQP_FIELD_KIND_UTF8;
        extra[2].value.value.bytes = amqp_cstring_bytes(k->queue);
        if (declare_for(a, k, name, Q_DELAY, extra, 3, err, err_len))
            return -1;
    }
    for (size_t i = 0; i < k->n_bindings; i++)
        if (bind_queue(a, k->queue, k->bindings[i].exchange, k->bindings[i].routing_key, err,
                       err_len))
            return -1;
    return 0;
}

int sc_amqp_start_consume(struct sc_amqp *a, const char *queue, int prefetch, const char *tag,
                          char *err, size_t err_len)
{
    amqp_basic_qos(a->conn, SC_AMQP_CHANNEL, 0, (uint16_t)prefetch, 0);
    if (reply_error(amqp_get_rpc_reply(a->conn), "basic.qos", err, err_len))
        return -1;
    amqp_basic_consume(a->conn, SC_AMQP_CHANNEL, amqp_cstring_bytes(queue),
                       amqp_cstring_bytes(tag), 0, 0 /* manual ack */, 0, amqp_empty_table);
    if (reply_error(amqp_get_rpc_reply(a->conn), "basic.consume", err, err_len))
        return -1;
    snprintf(a->consumer_tag, sizeof a->consumer_tag, "%s", tag);
    snprintf(a->queue, sizeof a->queue, "%s", queue);
    a->prefetch = prefetch;
    return 0;
}

enum sc_queue_state sc_amqp_check_queue(struct sc_amqp *a, const char *queue, char *err,
                                        size_t err_len)
{
    if (!a->check_open) {
        amqp_channel_open(a->conn, SC_AMQP_CHECK_CHANNEL);
        if (reply_error(amqp_get_rpc_reply(a->conn), "amqp channel.open (queue check)", err,
                        err_len))
            return SC_QUEUE_UNKNOWN;
        a->check_open = 1;
    }
    /* Frames of the consuming channel that arrive meanwhile are queued by
     * the library and read by the next receive, in order. */
    amqp_queue_declare_ok_t *ok = amqp_queue_declare(a->conn, SC_AMQP_CHECK_CHANNEL,
                                                     amqp_cstring_bytes(queue), 1, 0, 0, 0,
                                                     amqp_empty_table);
    amqp_rpc_reply_t r = amqp_get_rpc_reply(a->conn);
    if (r.reply_type == AMQP_RESPONSE_NORMAL && ok)
        return ok->consumer_count > 0 ? SC_QUEUE_CONSUMED : SC_QUEUE_UNCONSUMED;
    char what[300];
    snprintf(what, sizeof what, "declare queue %.250s (passive, check)", queue);
    reply_error(r, what, err, err_len);
    if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION && r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_t *m = r.reply.decoded;
        amqp_channel_close_ok_t close_ok;
        a->check_open = 0;
        if (amqp_send_method(a->conn, SC_AMQP_CHECK_CHANNEL, AMQP_CHANNEL_CLOSE_OK_METHOD,
                             &close_ok) != AMQP_STATUS_OK)
            return SC_QUEUE_UNKNOWN;
        if (m->reply_code == AMQP_NOT_FOUND)
            return SC_QUEUE_GONE;
    }
    return SC_QUEUE_UNKNOWN;
}

int sc_amqp_consume_again(struct sc_amqp *a, const struct sc_consumer_config *k, char *err,
                          size_t err_len)
{
    if (sc_amqp_declare_consumer(a, k, err, err_len))
        return -1;
    char tag[sizeof a->consumer_tag];
    memcpy(tag, a->consumer_tag, sizeof tag);
    return sc_amqp_start_consume(a, k->queue, a->prefetch, tag, err, err_len);
}

/* Answers a broker-initiated close so the broker can release the resources,
 * and describes it. */
static void handle_close_frame(struct sc_amqp *a, const amqp_frame_t *f, char *err, size_t err_len)
{
    if (f->payload.method.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_t *m = f->payload.method.decoded;
        snprintf(err, err_len, "channel closed by broker: %u %.*s", m->reply_code,
                 (int)m->reply_text.len, (const char *)m->reply_text.bytes);
        amqp_channel_close_ok_t ok;
        amqp_send_method(a->conn, f->channel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
    } else {
        amqp_connection_close_t *m = f->payload.method.decoded;
        snprintf(err, err_len, "connection closed by broker: %u %.*s", m->reply_code,
                 (int)m->reply_text.len, (const char *)m->reply_text.bytes);
        amqp_connection_close_ok_t ok;
        amqp_send_method(a->conn, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
    }
}

enum sc_amqp_recv sc_amqp_receive(struct sc_amqp *a, amqp_envelope_t *env, int timeout_ms,
                                  char *err, size_t err_len)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    amqp_maybe_release_buffers(a->conn);
    amqp_rpc_reply_t r = amqp_consume_message(a->conn, env, &tv, 0);
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return SC_AMQP_RECV_MESSAGE;
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && r.library_error == AMQP_STATUS_TIMEOUT)
        return SC_AMQP_RECV_TIMEOUT;
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
        r.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
        /* A frame other than a delivery is waiting: read it. */
        amqp_frame_t f;
        struct timeval wait = {1, 0};
        int rc = amqp_simple_wait_frame_noblock(a->conn, &f, &wait);
        if (rc != AMQP_STATUS_OK) {
            fail(err, err_len, "amqp", amqp_error_string2(rc));
            return SC_AMQP_RECV_CLOSED;
        }
        if (f.frame_type != AMQP_FRAME_METHOD)
            return SC_AMQP_RECV_TIMEOUT;
        switch (f.payload.method.id) {
        case AMQP_CHANNEL_CLOSE_METHOD:
        case AMQP_CONNECTION_CLOSE_METHOD:
            handle_close_frame(a, &f, err, err_len);
            return SC_AMQP_RECV_CLOSED;
        case AMQP_BASIC_CANCEL_METHOD: {
            /* The channel stays open; RabbitMQ sends it with nowait. */
            amqp_basic_cancel_t *m = f.payload.method.decoded;
            snprintf(err, err_len, "the broker cancelled consumer %.*s of queue %s (queue deleted?)",
                     (int)m->consumer_tag.len, (const char *)m->consumer_tag.bytes,
                     a->queue[0] ? a->queue : "?");
            if (!m->nowait) {
                amqp_basic_cancel_ok_t ok = {m->consumer_tag};
                amqp_send_method(a->conn, f.channel, AMQP_BASIC_CANCEL_OK_METHOD, &ok);
            }
            return SC_AMQP_RECV_CANCELLED;
        }
        default:
            return SC_AMQP_RECV_TIMEOUT;
        }
    }
    reply_error(r, "amqp receive", err, err_len);
    return SC_AMQP_RECV_CLOSED;
}

int sc_amqp_ack(struct sc_amqp *a, uint64_t tag, int multiple)
{
    return amqp_basic_ack(a->conn, SC_AMQP_CHANNEL, tag, multiple) == AMQP_STATUS_OK ? 0 : -1;
}

int sc_amqp_nack_requeue(struct sc_amqp *a, uint64_t tag, int multiple)
{
    return amqp_basic_nack(a->conn, SC_AMQP_CHANNEL, tag, multiple, 1) == AMQP_STATUS_OK ? 0 : -1;
}

int sc_amqp_confirm_select(struct sc_amqp *a, char *err, size_t err_len)
{
    amqp_confirm_select(a->conn, SC_AMQP_CHANNEL);
    if (reply_error(amqp_get_rpc_reply(a->conn), "confirm.select", err, err_len))
        return -1;
    a->next_seq = 1;
    return 0;
}

int sc_amqp_reopen_channel(struct sc_amqp *a, char *err, size_t err_len)
{
    amqp_channel_open(a->conn, SC_AMQP_CHANNEL);
    if (reply_error(amqp_get_rpc_reply(a->conn), "amqp channel.open (again, after the broker closed it)",
                    err, err_len))
        return -1;
    return sc_amqp_confirm_select(a, err, err_len);
}

static int bytes_eq(amqp_bytes_t x, amqp_bytes_t y)
{
    return x.len == y.len && (x.len == 0 || memcmp(x.bytes, y.bytes, x.len) == 0);
}

/* Marks the pending message a basic.return refers to: by message_id where
 * both have one, else by body. */
static void mark_returned(struct sc_publish *msgs, size_t n, const amqp_message_t *m)
{
    int has_id = (m->properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG) != 0;
    for (size_t i = 0; i < n; i++) {
        if (msgs[i].result != SC_PUB_PENDING)
            continue;
        const amqp_basic_properties_t *p = msgs[i].props;
        int match;
        if (has_id && p && (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG))
            match = bytes_eq(p->message_id, m->properties.message_id);
        else
            match = bytes_eq(msgs[i].body, m->body);
        if (match) {
            msgs[i].result = SC_PUB_RETURNED;
            return;
        }
    }
}

/* Applies a basic.ack / basic.nack for tag (and all below when multiple). */
static size_t settle(struct sc_publish *msgs, size_t n, uint64_t tag, int multiple, int ack)
{
    size_t settled = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(msgs[i].seq == tag || (multiple && msgs[i].seq <= tag)))
            continue;
        if (msgs[i].result == SC_PUB_PENDING) {
            msgs[i].result = ack ? SC_PUB_ACKED : SC_PUB_NACKED;
            settled++;
        } else if (msgs[i].result == SC_PUB_RETURNED && msgs[i].seq != 0) {
            msgs[i].seq = 0; /* the ack that follows a return settles it */
            settled++;
        }
    }
    return settled;
}

int sc_amqp_publish_confirmed(struct sc_amqp *a, struct sc_publish *msgs, size_t n, int timeout_ms,
                              char *err, size_t err_len)
{
    if (sc_amqp_publish_begin(a, msgs, n, err, err_len))
        return -1;
    return sc_amqp_collect_confirms(a, msgs, n, timeout_ms, NULL, err, err_len);
}

int sc_amqp_publish_begin(struct sc_amqp *a, struct sc_publish *msgs, size_t n, char *err,
                          size_t err_len)
{
    for (size_t i = 0; i < n; i++) {
        msgs[i].result = SC_PUB_PENDING;
        msgs[i].seq = a->next_seq;
        int rc = amqp_basic_publish(a->conn, SC_AMQP_CHANNEL, amqp_cstring_bytes(msgs[i].exchange),
                                    amqp_cstring_bytes(msgs[i].routing_key), msgs[i].mandatory, 0,
                                    msgs[i].props, msgs[i].body);
        if (rc != AMQP_STATUS_OK) {
            for (size_t j = i; j < n; j++)
                msgs[j].result = SC_PUB_FAILED;
            fail(err, err_len, "basic.publish", amqp_error_string2(rc));
            return -1;
        }
        a->next_seq++; /* a message refused before sending (bad data) takes no number */
    }
    return 0;
}

/* 1 when a channel.close blames one message of those published: a 406 on
 * basic.publish (RabbitMQ: larger than max_message_size). A close for any
 * other reason (404 no exchange, 403) would refuse every message alike. */
static int refuses_a_message(const amqp_frame_t *f)
{
    if (f->payload.method.id != AMQP_CHANNEL_CLOSE_METHOD)
        return 0;
    const amqp_channel_close_t *m = f->payload.method.decoded;
    return m->reply_code == AMQP_PRECONDITION_FAILED &&
           ((uint32_t)m->class_id << 16 | m->method_id) == AMQP_BASIC_PUBLISH_METHOD;
}

int sc_amqp_collect_confirms(struct sc_amqp *a, struct sc_publish *msgs, size_t n, int timeout_ms,
                             enum sc_amqp_error_class *cls, char *err, size_t err_len)
{
    enum sc_amqp_error_class why = SC_AMQPERR_CONNECTION;
    size_t pending = 0;
    for (size_t i = 0; i < n; i++)
        pending += msgs[i].result == SC_PUB_PENDING;
    int64_t deadline = sc_now_ms() + timeout_ms;
    while (pending > 0) {
        int64_t left = deadline - sc_now_ms();
        if (left <= 0)
            break;
        struct timeval tv = {(time_t)(left / 1000), (suseconds_t)((left % 1000) * 1000)};
        amqp_frame_t f;
        int rc = amqp_simple_wait_frame_noblock(a->conn, &f, &tv);
        if (rc == AMQP_STATUS_TIMEOUT)
            break;
        if (rc != AMQP_STATUS_OK) {
            fail(err, err_len, "waiting for publisher confirms", amqp_error_string2(rc));
            goto failed;
        }
        if (f.frame_type != AMQP_FRAME_METHOD)
            continue;
        switch (f.payload.method.id) {
        case AMQP_BASIC_ACK_METHOD: {
            amqp_basic_ack_t *m = f.payload.method.decoded;
            pending -= settle(msgs, n, m->delivery_tag, m->multiple, 1);
            break;
        }
        case AMQP_BASIC_NACK_METHOD: {
            amqp_basic_nack_t *m = f.payload.method.decoded;
            pending -= settle(msgs, n, m->delivery_tag, m->multiple, 0);
            break;
        }
        case AMQP_BASIC_RETURN_METHOD: {
            amqp_message_t m;
            amqp_rpc_reply_t r = amqp_read_message(a->conn, f.channel, &m, 0);
            if (reply_error(r, "reading basic.return", err, err_len))
                goto failed;
            mark_returned(msgs, n, &m);
            amqp_destroy_message(&m);
            break;
        }
        case AMQP_CHANNEL_CLOSE_METHOD:
        case AMQP_CONNECTION_CLOSE_METHOD:
            if (refuses_a_message(&f))
                why = SC_AMQPERR_REFUSED;
            handle_close_frame(a, &f, err, err_len);
            goto failed;
        default:
            break;
        }
    }
    int acked = 0;
    for (size_t i = 0; i < n; i++) {
        if (msgs[i].result == SC_PUB_PENDING)
            msgs[i].result = SC_PUB_TIMEOUT;
        acked += msgs[i].result == SC_PUB_ACKED;
    }
    /* Every confirm and basic.return above was decoded into the channel's
     * frame pool, which only grows until it is recycled: without this a
     * publishing connection keeps every confirm it ever read. Nothing of
     * this connection's pool is referenced past this point. */
    amqp_maybe_release_buffers(a->conn);
    return acked;
failed:
    for (size_t i = 0; i < n; i++)
        if (msgs[i].result == SC_PUB_PENDING)
            msgs[i].result = SC_PUB_FAILED;
    if (cls)
        *cls = why;
    return -1;
}

int sc_amqp_service(struct sc_amqp *a, char *err, size_t err_len)
{
    for (;;) {
        amqp_frame_t f;
        struct timeval tv = {0, 0};
        int rc = amqp_simple_wait_frame_noblock(a->conn, &f, &tv);
        if (rc == AMQP_STATUS_TIMEOUT) {
            amqp_maybe_release_buffers(a->conn); /* the drained frames' pool */
            return 0;
        }
        if (rc != AMQP_STATUS_OK)
            return fail(err, err_len, "amqp", amqp_error_string2(rc));
        if (f.frame_type == AMQP_FRAME_METHOD &&
            (f.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD ||
             f.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD)) {
            handle_close_frame(a, &f, err, err_len);
            return -1;
        }
        /* Anything else here is a late confirm of an earlier timed-out
         * publish: its message was already treated as not confirmed. */
    }
}

void sc_amqp_props_clear_ttl(amqp_basic_properties_t *p)
{
    p->_flags &= ~(amqp_flags_t)AMQP_BASIC_EXPIRATION_FLAG;
    p->expiration = amqp_empty_bytes;
}

const char *sc_publish_result_name(enum sc_publish_result r)
{
    static const char *const names[] = {"pending", "acked", "nacked", "returned (unroutable)",
                                        "confirm timeout", "connection failed"};
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "?";
}

static const amqp_field_value_t *header(const amqp_table_t *h, const char *key)
{
    if (!h)
        return NULL;
    size_t klen = strlen(key);
    for (int i = 0; i < h->num_entries; i++) {
        const amqp_table_entry_t *e = &h->entries[i];
        if (e->key.len == klen && memcmp(e->key.bytes, key, klen) == 0)
            return &e->value;
    }
    return NULL;
}

int64_t sc_amqp_header_int(const amqp_table_t *h, const char *key, int64_t def)
{
    const amqp_field_value_t *v = header(h, key);
    if (!v)
        return def;
    switch (v->kind) {
    case AMQP_FIELD_KIND_I8: return v->value.i8;
    case AMQP_FIELD_KIND_U8: return v->value.u8;
    case AMQP_FIELD_KIND_I16: return v->value.i16;
    case AMQP_FIELD_KIND_U16: return v->value.u16;
    case AMQP_FIELD_KIND_I32: return v->value.i32;
    case AMQP_FIELD_KIND_U32: return v->value.u32;
    case AMQP_FIELD_KIND_I64: return v->value.i64;
    case AMQP_FIELD_KIND_U64: return (int64_t)v->value.u64;
    default: return def;
    }
}

amqp_bytes_t sc_amqp_header_bytes(const amqp_table_t *h, const char *key)
{
    const amqp_field_value_t *v = header(h, key);
    if (v && (v->kind == AMQP_FIELD_KIND_UTF8 || v->kind == AMQP_FIELD_KIND_BYTES))
        return v->value.bytes;
    return amqp_empty_bytes;
}

int sc_amqp_heartbeat(struct sc_amqp *a)
{
    if (!a->conn)
        return -1;
    amqp_frame_t f = {.frame_type = AMQP_FRAME_HEARTBEAT, .channel = 0};
    return amqp_send_frame(a->conn, &f) == AMQP_STATUS_OK ? 0 : -1;
}
