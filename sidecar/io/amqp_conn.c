/* The broker connection: connect to one of the configured nodes, close,
 * keep it alive, and read what the broker sends on its own (a close). */
#include "amqp_conn.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#include "io/amqp_private.h"
#include "lifecycle.h"
#include "log.h"
#include "metrics.h"
#include "url.h"

/* Longest any single broker RPC (declare, bind, qos, consume) may take. */
#define SC_AMQP_RPC_TIMEOUT_S 10

int sc_amqp_fail(char *err, size_t len, const char *what, const char *detail)
{
    snprintf(err, len, "%s: %s", what, detail);
    return -1;
}

/* Describes an RPC reply; returns 0 for a normal reply, -1 otherwise. */
int sc_amqp_reply_error(amqp_rpc_reply_t r, const char *what, char *err, size_t len)
{
    char detail[256];
    switch (r.reply_type) {
    case AMQP_RESPONSE_NORMAL:
        return 0;
    case AMQP_RESPONSE_NONE:
        return sc_amqp_fail(err, len, what, "no RPC reply");
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
        return sc_amqp_fail(err, len, what, amqp_error_string2(r.library_error));
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
        return sc_amqp_fail(err, len, what, detail);
    }
    return sc_amqp_fail(err, len, what, "unknown reply type");
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
        return sc_amqp_fail(err, err_len, "amqp", "out of memory");
    amqp_default_connection_info(&ci);
    if (amqp_parse_url(url, &ci) != AMQP_STATUS_OK) {
        free(url);
        return sc_amqp_fail(err, err_len, "amqp.url", "cannot parse the URL");
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
        return sc_amqp_fail(err, err_len, "amqp", "cannot create a socket");
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
        return sc_amqp_fail(err, err_len, what, amqp_error_string2(rc));
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
    if (sc_amqp_reply_error(r, "amqp login", err, err_len)) {
        sc_amqp_close(a);
        return -1;
    }
    amqp_channel_open(a->conn, SC_AMQP_CHANNEL);
    if (sc_amqp_reply_error(amqp_get_rpc_reply(a->conn), "amqp channel.open", err, err_len)) {
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

/* Answers a broker-initiated close so the broker can release the resources,
 * and describes it. */
void sc_amqp_answer_close(struct sc_amqp *a, const amqp_frame_t *f, char *err, size_t err_len)
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
            return sc_amqp_fail(err, err_len, "amqp", amqp_error_string2(rc));
        if (f.frame_type == AMQP_FRAME_METHOD &&
            (f.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD ||
             f.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD)) {
            sc_amqp_answer_close(a, &f, err, err_len);
            return -1;
        }
        /* Anything else here is a late confirm of an earlier timed-out
         * publish: its message was already treated as not confirmed. */
    }
}

int sc_amqp_heartbeat(struct sc_amqp *a)
{
    if (!a->conn)
        return -1;
    amqp_frame_t f = {.frame_type = AMQP_FRAME_HEARTBEAT, .channel = 0};
    return amqp_send_frame(a->conn, &f) == AMQP_STATUS_OK ? 0 : -1;
}
