#include "http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "log.h"
#include "metrics.h"

struct sc_http {
    struct MHD_Daemon *d;
    unsigned port;
    const char *log_name;
    _Atomic int running; /* set once MHD_start_daemon has returned */
};

/* libmicrohttpd's own messages as JSON log lines (it would otherwise print
 * plain text on stderr beside them). While the daemon starts, a failure
 * (a listen that fails: "Failed to bind to port ...") is reported once by
 * whoever decides, sc_http_start's caller, so the library's wording is
 * debug detail; once running, its messages (connection limit reached,
 * accept or thread errors) are the only report of a refused scrape: warn. */
__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    struct sc_http *h = cls;
    enum sc_log_level level = atomic_load(&h->running) ? SC_LOG_WARN : SC_LOG_DEBUG;
    if (!sc_log_enabled(level))
        return;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = 0;
    sc_log(level, NULL, "%s: libmicrohttpd: %s", h->log_name, msg);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type, char *body,
                             int owned)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        strlen(body), body, owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **state)
{
    (void)cls;
    (void)version;
    (void)upload;
    (void)upload_size;
    (void)state;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return reply(c, 405, "text/plain", "method not allowed\n", 0);
    if (strcmp(url, "/metrics") == 0) {
        char *body = sc_metrics_render();
        if (!body)
            return reply(c, 500, "text/plain", "out of memory\n", 0);
        return reply(c, 200, "text/plain; version=0.0.4", body, 1);
    }
    if (strcmp(url, "/healthz") == 0)
        return reply(c, 200, "text/plain", "ok\n", 0);
    if (strcmp(url, "/readyz") == 0) {
        char why[512], body[600];
        int ready = sc_metrics_ready(why, sizeof why);
        snprintf(body, sizeof body, "%s\n", why);
        return reply(c, ready ? 200 : 503, "text/plain", body, 0);
    }
    return reply(c, 404, "text/plain", "not found: /metrics, /healthz, /readyz\n", 0);
}

struct sc_http *sc_http_serve(const char *listen, const struct sc_http_spec *spec, char *err,
                              size_t err_len)
{
    char host[256];
    const char *colon = strrchr(listen, ':');
    if (!colon || (size_t)(colon - listen) >= sizeof host) {
        snprintf(err, err_len, "%s: expected host:port, got \"%s\"", spec->key, listen);
        return NULL;
    }
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = 0;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)port);
    if (*end || port < 0 || port > 65535 || inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        snprintf(err, err_len, "%s: expected an IPv4 address and port, got \"%s\"", spec->key,
                 listen);
        return NULL;
    }
    struct sc_http *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    h->log_name = spec->log_name;
    /* epoll (or poll), never select(): select cannot watch a descriptor
     * above FD_SETSIZE (1,024), and a sidecar with many workers holds more
     * (two broker and one database connection per worker, files, the
     * handler's). A thread per connection goes with poll only. */
    unsigned flags = spec->thread_per_connection
                         ? MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_THREAD_PER_CONNECTION
                     : MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES
                         ? MHD_USE_EPOLL_INTERNAL_THREAD
                         : MHD_USE_POLL_INTERNAL_THREAD;
    if ((flags & MHD_USE_POLL_INTERNAL_THREAD) == MHD_USE_POLL_INTERNAL_THREAD &&
        MHD_is_feature_supported(MHD_FEATURE_POLL) != MHD_YES) {
        snprintf(err, err_len, "%s: libmicrohttpd has neither epoll nor poll (select "
                 "fails past 1,024 descriptors)", spec->key);
        free(h);
        return NULL;
    }
    h->d = MHD_start_daemon(flags | MHD_USE_ERROR_LOG, 0, NULL, NULL,
                            spec->handler, spec->handler_cls,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                            MHD_OPTION_CONNECTION_TIMEOUT, spec->timeout_s,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)64,
                            MHD_OPTION_NOTIFY_COMPLETED, spec->completed, spec->handler_cls,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h, MHD_OPTION_END);
    if (!h->d) {
        snprintf(err, err_len, "%s: cannot listen on %s (in use, or not a local address)",
                 spec->key, listen);
        free(h);
        return NULL;
    }
    atomic_store(&h->running, 1);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : (unsigned)port;
    return h;
}

struct sc_http *sc_http_start(const char *listen, char *err, size_t err_len)
{
    static const struct sc_http_spec spec = {.key = "http.listen", .log_name = "http",
                                             .handler = on_request, .timeout_s = 10};
    struct sc_http *h = sc_http_serve(listen, &spec, err, err_len);
    if (h)
        sc_info("http: /metrics /healthz /readyz on %.*s:%u", (int)(strrchr(listen, ':') - listen),
                listen, h->port);
    return h;
}

unsigned sc_http_port(const struct sc_http *h)
{
    return h->port;
}

void sc_http_stop(struct sc_http *h)
{
    if (!h)
        return;
    MHD_stop_daemon(h->d);
    free(h);
}
