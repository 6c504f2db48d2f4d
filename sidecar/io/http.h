/* The HTTP endpoints (libmicrohttpd, its own thread): /metrics, /healthz,
 * /readyz on http.listen. */
#ifndef SC_HTTP_H
#define SC_HTTP_H

#include <microhttpd.h>
#include <stddef.h>

struct sc_http;

/* What one HTTP server is: the config key its address comes from (named in
 * errors), the name its log lines carry, the request handler (and the
 * completion callback, or NULL), the idle timeout, and whether each
 * connection gets its own thread (a handler that may block on a server) or
 * all share one epoll/poll thread. */
struct sc_http_spec {
    const char *key;
    const char *log_name;
    MHD_AccessHandlerCallback handler;
    void *handler_cls;
    MHD_RequestCompletedCallback completed;
    unsigned timeout_s;
    int thread_per_connection;
};

/* Listens on "host:port" (IPv4; port 0 picks a free one) and serves spec's
 * handler; never select() (it fails past 1,024 descriptors). Returns NULL
 * with err set ("KEY: cannot listen on ...") when it cannot. */
struct sc_http *sc_http_serve(const char *listen, const struct sc_http_spec *spec, char *err,
                              size_t err_len);

/* The metrics server: /metrics, /healthz, /readyz on listen (the log says
 * which port). Returns NULL with err set when it cannot listen. */
struct sc_http *sc_http_start(const char *listen, char *err, size_t err_len);
void sc_http_stop(struct sc_http *h);

/* The port it listens on (the one picked for port 0). */
unsigned sc_http_port(const struct sc_http *h);

#endif
