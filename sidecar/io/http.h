/* The HTTP endpoints (libmicrohttpd, its own thread): /metrics, /healthz,
 * /readyz on http.listen. */
#ifndef SC_HTTP_H
#define SC_HTTP_H

#include <stddef.h>

struct sc_http;

/* Listens on "host:port" (port 0 picks a free one; the log says which).
 * Returns NULL with err set when it cannot listen. */
struct sc_http *sc_http_start(const char *listen, char *err, size_t err_len);
void sc_http_stop(struct sc_http *h);

/* The port it listens on (the one picked for port 0). */
unsigned sc_http_port(const struct sc_http *h);

#endif
