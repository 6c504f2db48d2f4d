/* The console's HTTP server: libmicrohttpd, a thread per connection (a
 * request that waits on a slow server holds only its own thread), the page
 * and the API. Every reply carries a strict Content-Security-Policy (scripts
 * and styles from this origin only, nothing inline, no frames, no forms);
 * every action passes, in order: POST, the console has tokens, the request
 * comes from this origin, its body is JSON, its bearer token is one of the
 * console's. Refusals are logged like actions. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "console.h"
#include "io/http.h"
#include "log.h"

#define BODY_MAX 4096

static const char csp[] = "default-src 'none'; script-src 'self'; style-src 'self'; "
                          "img-src 'self'; connect-src 'self'; base-uri 'none'; "
                          "form-action 'none'; frame-ancestors 'none'";

struct sc_console_http {
    struct sc_http *srv;
    struct sc_console *con;
};

struct req {
    char body[BODY_MAX + 1];
    size_t len;
    int too_big;
};

static enum MHD_Result send_bytes(struct MHD_Connection *c, unsigned status, const char *type,
                                  const void *data, size_t len, enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)data, mode);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Content-Security-Policy", csp);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "Cross-Origin-Opener-Policy", "same-origin");
    MHD_add_response_header(r, "Cross-Origin-Resource-Policy", "same-origin");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    if (status == 401)
        MHD_add_response_header(r, "WWW-Authenticate", "Bearer realm=\"sidecar console\"");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* Sends j (and drops it); NULL is an out-of-memory 500. */
static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_t *j)
{
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (!text)
        return send_bytes(c, 500, "application/json", "{\"error\":\"out of memory\"}", 25,
                          MHD_RESPMEM_PERSISTENT);
    return send_bytes(c, status, "application/json; charset=utf-8", text, strlen(text),
                      MHD_RESPMEM_MUST_FREE);
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *msg)
{
    return send_json(c, status, json_pack("{s:s}", "error", msg));
}

/* The page asked with a tenant that is not one: a page saying so (the
 * message is escaped: the name came from the URL), and a link back. */
static enum MHD_Result send_page_error(struct MHD_Connection *c, unsigned status, json_t *err)
{
    const char *msg = json_string_value(json_object_get(err, "error"));
    char esc[1200];
    size_t j = 0;
    for (const char *p = msg ? msg : "error"; *p && j + 7 < sizeof esc; p++) {
        const char *rep = *p == '<' ? "&lt;" : *p == '>' ? "&gt;" : *p == '&' ? "&amp;"
                          : *p == '"' ? "&quot;" : *p == '\'' ? "&#39;" : NULL;
        if (rep) {
            memcpy(esc + j, rep, strlen(rep));
            j += strlen(rep);
        } else {
            esc[j++] = *p;
        }
    }
    esc[j] = 0;
    json_decref(err);
    char *page = NULL;
    int n = asprintf(&page, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                     "<title>sidecar console: %u</title></head><body><h1>%u</h1>"
                     "<p id=\"error\">%s</p><p><a href=\"/\">Every tenant</a></p></body></html>\n",
                     status, status, esc);
    if (n < 0)
        return send_bytes(c, 500, "text/plain", "out of memory\n", 14, MHD_RESPMEM_PERSISTENT);
    return send_bytes(c, status, "text/html; charset=utf-8", page, (size_t)n, MHD_RESPMEM_MUST_FREE);
}

static const char *arg(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
}

static int int_arg(struct MHD_Connection *c, const char *name, int def)
{
    const char *v = arg(c, name);
    if (!v || !*v)
        return def;
    char *end;
    long n = strtol(v, &end, 10);
    return *end || n < 0 || n > 1000000 ? def : (int)n;
}

/* The peer's address, for the log. */
static void peer(struct MHD_Connection *c, char *out, size_t len)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    snprintf(out, len, "?");
    if (!ci || !ci->client_addr)
        return;
    const struct sockaddr *sa = ci->client_addr;
    char ip[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
        port = ntohs(in->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
        port = ntohs(in6->sin6_port);
    }
    snprintf(out, len, "%s:%u", ip, port);
}

/* The Host header must name an address, or localhost: a page on another
 * site that points a name of its own at this address (DNS rebinding)
 * cannot read the API through the visitor's browser. */
static int host_ok(const char *host)
{
    if (!host || !*host || strlen(host) > 255)
        return 0;
    char h[256];
    snprintf(h, sizeof h, "%s", host);
    if (h[0] == '[') {
        char *end = strchr(h, ']');
        if (!end || (end[1] && end[1] != ':'))
            return 0;
        *end = 0;
        struct in6_addr a6;
        return inet_pton(AF_INET6, h + 1, &a6) == 1;
    }
    char *colon = strchr(h, ':');
    if (colon) {
        if (strchr(colon + 1, ':'))
            return 0;
        *colon = 0;
    }
    struct in_addr a4;
    return strcmp(h, "localhost") == 0 || inet_pton(AF_INET, h, &a4) == 1;
}

/* The bearer token's holder, or NULL. Compares every token in full, in time
 * that does not depend on where the first difference is. */
static const char *token_holder(const struct sc_console *con, const char *auth)
{
    if (!auth || strncmp(auth, "Bearer ", 7) != 0)
        return NULL;
    const char *t = auth + 7;
    size_t n = strlen(t);
    const char *who = NULL;
    for (int i = 0; i < con->n_tokens; i++) {
        const char *k = con->tokens[i].token;
        size_t kn = strlen(k);
        unsigned diff = (unsigned)(kn ^ n);
        for (size_t j = 0; j < kn; j++)
            diff |= (unsigned)(unsigned char)k[j] ^ (unsigned)(unsigned char)(j < n ? t[j] : 0);
        if (diff == 0 && !who)
            who = con->tokens[i].name;
    }
    return who;
}

static enum MHD_Result refuse_action(struct MHD_Connection *c, const char *url, const char *from,
                                     unsigned status, const char *why)
{
    struct sc_log_fields lf = {.outcome = "refused"};
    sc_log(SC_LOG_WARN, &lf, "console: POST %s from %s refused (%u): %s", url, from, status, why);
    return send_error(c, status, why);
}

static enum MHD_Result action(struct sc_console_http *h, struct MHD_Connection *c, const char *url,
                              struct req *rq)
{
    struct sc_console *con = h->con;
    char from[80];
    peer(c, from, sizeof from);
    if (con->n_tokens == 0)
        return refuse_action(c, url, from, 403, "read-only console: console.token_file is not set");
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    const char *site = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Sec-Fetch-Site");
    if (origin) {
        const char *rest = strncmp(origin, "http://", 7) == 0    ? origin + 7
                           : strncmp(origin, "https://", 8) == 0 ? origin + 8 : NULL;
        if (!rest || !host || strcmp(rest, host) != 0)
            return refuse_action(c, url, from, 403, "cross-origin request: Origin is not this console");
    }
    if (site && strcmp(site, "same-origin") != 0 && strcmp(site, "none") != 0)
        return refuse_action(c, url, from, 403, "cross-site request (Sec-Fetch-Site)");
    const char *type = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    if (!type || strncmp(type, "application/json", 16) != 0)
        return refuse_action(c, url, from, 415, "the body must be application/json");
    const char *who = token_holder(con, MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                                    "Authorization"));
    if (!who)
        return refuse_action(c, url, from, 401, "a bearer token of the console is required");
    if (rq->too_big)
        return refuse_action(c, url, from, 413, "body larger than 4096 bytes");
    json_t *req = json_loadb(rq->body, rq->len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(req)) {
        json_decref(req);
        return refuse_action(c, url, from, 400, "the body must be a JSON object");
    }
    char by[200];
    snprintf(by, sizeof by, "%s from %s", who, from);
    unsigned status = 500;
    const char *tenant = NULL;
    json_t *out = NULL;
    if (sc_console_tenant(con, arg(c, "tenant"), &tenant, &out, &status) == 0)
        out = strcmp(url, "/api/dlq/replay") == 0
                  ? sc_console_replay(con, by, tenant, req, &status)
                  : sc_console_set_pending(con, tenant, by, req, &status);
    json_decref(req);
    if (out)
        json_object_set_new(out, "by", json_string(who));
    return send_json(c, status, out);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **state)
{
    (void)version;
    struct sc_console_http *h = cls;
    struct sc_console *con = h->con;
    struct req *rq = *state;
    if (!rq) {
        if (!(rq = calloc(1, sizeof *rq)))
            return MHD_NO;
        *state = rq;
        return MHD_YES;
    }
    if (*upload_size) {
        if (rq->len + *upload_size > BODY_MAX)
            rq->too_big = 1;
        else {
            memcpy(rq->body + rq->len, upload, *upload_size);
            rq->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (!host_ok(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host")))
        return send_error(c, 421, "the Host header must be an address or localhost");
    int get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    int post = strcmp(method, "POST") == 0;
    int is_action = strcmp(url, "/api/dlq/replay") == 0 || strcmp(url, "/api/outbox/pending") == 0;
    if (is_action) {
        if (!post)
            return send_error(c, 405, "actions are POST only");
        return action(h, c, url, rq);
    }
    if (!get)
        return send_error(c, 405, "GET only here");

    /* ?tenant=NAME selects a tenant's database; a name that is not one is
     * refused here, before any query. */
    unsigned status = 200;
    json_t *out = NULL;
    const char *tenant = NULL;
    if (sc_console_tenant(con, arg(c, "tenant"), &tenant, &out, &status)) {
        if (strncmp(url, "/api/", 5) == 0)
            return send_json(c, status, out);
        return send_page_error(c, status, out);
    }
    const char *asset = strcmp(url, "/") == 0 ? "/index.html" : url;
    for (size_t i = 0; i < sc_console_n_assets; i++)
        if (strcmp(asset, sc_console_assets[i].path) == 0)
            return send_bytes(c, 200, sc_console_assets[i].content_type, sc_console_assets[i].data,
                              sc_console_assets[i].len, MHD_RESPMEM_PERSISTENT);
    if (strcmp(url, "/favicon.ico") == 0)
        return send_bytes(c, 204, "text/plain", "", 0, MHD_RESPMEM_PERSISTENT);
    if (strcmp(url, "/healthz") == 0)
        return send_bytes(c, 200, "text/plain", "ok\n", 3, MHD_RESPMEM_PERSISTENT);
    if (strcmp(url, "/metrics") == 0) {
        char *m = sc_console_metrics(con->sampler);
        if (!m)
            return send_error(c, 500, "out of memory");
        return send_bytes(c, 200, "text/plain; version=0.0.4", m, strlen(m), MHD_RESPMEM_MUST_FREE);
    }
    if (strcmp(url, "/api/overview") == 0)
        out = sc_console_overview(con->sampler, tenant, &status);
    else if (strcmp(url, "/api/history") == 0)
        out = sc_console_history(con->sampler, tenant, &status);
    else if (strcmp(url, "/api/outbox") == 0)
        out = sc_console_outbox_rows(con, tenant, arg(c, "status"), arg(c, "after"),
                                     int_arg(c, "limit", 50), &status);
    else if (strcmp(url, "/api/event") == 0)
        out = sc_console_event(con, tenant, arg(c, "id"), &status);
    else if (strcmp(url, "/api/aggregate") == 0)
        out = sc_console_aggregate(con, tenant, arg(c, "type"), arg(c, "id"), arg(c, "after"),
                                   int_arg(c, "limit", 50), &status);
    else if (strcmp(url, "/api/dlq") == 0)
        out = sc_console_dlq(con, arg(c, "consumer"), tenant,
                             int_arg(c, "offset", 0), int_arg(c, "limit", 20), &status);
    else if (strcmp(url, "/api/dlq/find") == 0)
        out = sc_console_dlq_find(con, arg(c, "id"), tenant, &status);
    else
        return send_error(c, 404, "not found: see docs/operations.md for the console's API");
    return send_json(c, status, out);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state,
                         enum MHD_RequestTerminationCode code)
{
    (void)cls, (void)c, (void)code;
    free(*state);
    *state = NULL;
}

struct sc_console_http *sc_console_http_start(struct sc_console *con, char *err, size_t err_len)
{
    struct sc_console_http *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    h->con = con;
    /* A thread per connection: a request that waits on a slow server holds
     * only its own thread. */
    const struct sc_http_spec spec = {.key = "console.listen", .log_name = "console",
                                      .handler = on_request, .handler_cls = h,
                                      .completed = on_completed, .timeout_s = 30,
                                      .thread_per_connection = 1};
    const char *listen = con->cfg->console_listen;
    if (!(h->srv = sc_http_serve(listen, &spec, err, err_len))) {
        free(h);
        return NULL;
    }
    sc_info("console: listening on %.*s:%u (%s)", (int)(strrchr(listen, ':') - listen), listen,
            sc_http_port(h->srv), con->n_tokens ? "actions with a bearer token" : "read-only");
    return h;
}

void sc_console_http_stop(struct sc_console_http *h)
{
    if (!h)
        return;
    sc_http_stop(h->srv);
    free(h);
}
