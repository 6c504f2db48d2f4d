#include "otel.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "envelope/event.h"
#include "lifecycle.h"
#include "log.h"

struct exporter {
    char host[256], port[8], path[512], service[64];
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    struct sc_otel_span *queue; /* ring of SC_OTEL_QUEUE_MAX */
    size_t head, n;
    int stopping;
    atomic_ullong exported, dropped, failed;
    int failing; /* the last request failed: logged once per change */
};

static struct exporter *ex;

int sc_otel_enabled(void)
{
    return ex != NULL;
}

/* http://host[:port][/path]: https is not spoken here (a collector beside
 * the sidecar listens on plain HTTP, port 4318). */
static int parse_endpoint(struct exporter *e, const char *url, char *err, size_t err_len)
{
    if (strncmp(url, "http://", 7) != 0) {
        snprintf(err, err_len, "otel.endpoint: must be an http:// URL (http://host:4318/v1/traces)");
        return -1;
    }
    const char *h = url + 7, *slash = strchr(h, '/');
    size_t hl = slash ? (size_t)(slash - h) : strlen(h);
    const char *colon = memchr(h, ':', hl);
    size_t name_len = colon ? (size_t)(colon - h) : hl;
    if (name_len == 0 || name_len >= sizeof e->host) {
        snprintf(err, err_len, "otel.endpoint: no host in '%s'", url);
        return -1;
    }
    memcpy(e->host, h, name_len);
    e->host[name_len] = 0;
    size_t pl = colon ? hl - name_len - 1 : 0;
    if (colon && (pl == 0 || pl >= sizeof e->port || strspn(colon + 1, "0123456789") < pl)) {
        snprintf(err, err_len, "otel.endpoint: bad port in '%s'", url);
        return -1;
    }
    snprintf(e->port, sizeof e->port, "%.*s", colon ? (int)pl : 4, colon ? colon + 1 : "4318");
    snprintf(e->path, sizeof e->path, "%s", slash ? slash : "/v1/traces");
    return 0;
}

/* Unix time in ns of a monotonic sc_now_us() reading. */
static long long unix_ns(int64_t mono_us)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long now_ns = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    return now_ns - (long long)(sc_now_us() - mono_us) * 1000LL;
}

static json_t *attr(const char *key, const char *value)
{
    return json_pack("{s:s, s:{s:s}}", "key", key, "value", "stringValue", value);
}

static json_t *span_json(const struct sc_otel_span *s)
{
    char start[24], end[24];
    snprintf(start, sizeof start, "%lld", unix_ns(s->start_us));
    snprintf(end, sizeof end, "%lld", unix_ns(s->end_us));
    json_t *attrs = json_array();
    json_array_append_new(attrs, attr("messaging.system", "rabbitmq"));
    json_array_append_new(attrs, attr("messaging.operation.type",
                                      s->kind == SC_OTEL_PRODUCER ? "send" : "process"));
    json_array_append_new(attrs, attr("messaging.operation.name",
                                      s->kind == SC_OTEL_PRODUCER ? "publish" : "process"));
    json_array_append_new(attrs, attr("messaging.destination.name", s->destination));
    json_array_append_new(attrs, attr("messaging.message.id", s->message_id));
    if (s->routing_key[0])
        json_array_append_new(attrs, attr("messaging.rabbitmq.destination.routing_key", s->routing_key));
    if (s->consumer_group[0])
        json_array_append_new(attrs, attr("messaging.consumer.group.name", s->consumer_group));
    json_array_append_new(attrs, attr("sidecar.outcome", s->outcome));
    json_t *j = json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:o, s:{s:i}}", "traceId", s->trace_id,
                          "spanId", s->span_id, "name", s->name, "kind", (int)s->kind,
                          "startTimeUnixNano", start, "endTimeUnixNano", end, "attributes", attrs,
                          "status", "code", s->error ? 2 : 1);
    if (j && s->parent_span_id[0])
        json_object_set_new(j, "parentSpanId", json_string(s->parent_span_id));
    return j;
}

/* The ExportTraceServiceRequest of spans[0..n), as OTLP/JSON text. */
static char *request_json(const struct exporter *e, const struct sc_otel_span *spans, size_t n)
{
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(list, span_json(&spans[i]));
    json_t *req = json_pack("{s:[{s:{s:[o]}, s:[{s:{s:s}, s:o}]}]}", "resourceSpans", "resource",
                            "attributes", attr("service.name", e->service), "scopeSpans", "scope",
                            "name", "sidecar", "spans", list);
    char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    return text;
}

/* Waits for fd to be ready for events until deadline (ms). */
static int wait_fd(int fd, short events, int64_t deadline)
{
    int64_t left = deadline - sc_now_ms();
    if (left <= 0)
        return -1;
    struct pollfd p = {.fd = fd, .events = events};
    int r = poll(&p, 1, (int)left);
    return r == 1 ? 0 : -1;
}

/* POSTs body; returns the HTTP status, or -1 with why filled. Bounded by
 * SC_OTEL_TIMEOUT_MS altogether. */
static int post(const struct exporter *e, const char *body, char *why, size_t why_len)
{
    int64_t deadline = sc_now_ms() + SC_OTEL_TIMEOUT_MS;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    int rc = getaddrinfo(e->host, e->port, &hints, &ai);
    if (rc != 0) {
        snprintf(why, why_len, "%s: %s", e->host, gai_strerror(rc));
        return -1;
    }
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    int status = -1;
    if (fd < 0) {
        snprintf(why, why_len, "socket: %s", strerror(errno));
        goto out;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
        snprintf(why, why_len, "connect %s:%s: %s", e->host, e->port, strerror(errno));
        goto out;
    }
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (wait_fd(fd, POLLOUT, deadline) || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) || soerr) {
        snprintf(why, why_len, "connect %s:%s: %s", e->host, e->port,
                 soerr ? strerror(soerr) : "timed out");
        goto out;
    }
    char head[1024];
    size_t blen = strlen(body);
    int hl = snprintf(head, sizeof head, "POST %s HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: "
                      "application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                      e->path, e->host, e->port, blen);
    const char *parts[2] = {head, body};
    size_t lens[2] = {(size_t)hl, blen};
    for (int i = 0; i < 2; i++)
        for (size_t off = 0; off < lens[i];) {
            ssize_t w = send(fd, parts[i] + off, lens[i] - off, MSG_NOSIGNAL);
            if (w > 0) {
                off += (size_t)w;
            } else if ((w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) ||
                       wait_fd(fd, POLLOUT, deadline)) {
                snprintf(why, why_len, "sending to %s:%s failed", e->host, e->port);
                goto out;
            }
        }
    char answer[64];
    size_t got = 0;
    while (got < sizeof answer - 1 && !memchr(answer, '\n', got)) {
        if (wait_fd(fd, POLLIN, deadline)) {
            snprintf(why, why_len, "no answer from %s:%s in time", e->host, e->port);
            goto out;
        }
        ssize_t r = recv(fd, answer + got, sizeof answer - 1 - got, 0);
        if (r <= 0) {
            snprintf(why, why_len, "%s:%s closed the connection", e->host, e->port);
            goto out;
        }
        got += (size_t)r;
    }
    answer[got] = 0;
    /* Read the rest of the answer until the collector closes (Connection:
     * close), so it never writes to a connection already gone. */
    char rest[512];
    while (wait_fd(fd, POLLIN, deadline) == 0 && recv(fd, rest, sizeof rest, 0) > 0)
        ;
    if (sscanf(answer, "HTTP/%*d.%*d %d", &status) != 1) {
        snprintf(why, why_len, "%s:%s did not answer HTTP", e->host, e->port);
        status = -1;
    }
out:
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
    return status;
}

/* Sends up to one batch from the queue. Returns the number sent or dropped. */
static size_t flush_once(struct exporter *e)
{
    static struct sc_otel_span batch[SC_OTEL_BATCH_MAX];
    pthread_mutex_lock(&e->lock);
    size_t n = e->n < SC_OTEL_BATCH_MAX ? e->n : SC_OTEL_BATCH_MAX;
    for (size_t i = 0; i < n; i++)
        batch[i] = e->queue[(e->head + i) % SC_OTEL_QUEUE_MAX];
    e->head = (e->head + n) % SC_OTEL_QUEUE_MAX;
    e->n -= n;
    pthread_mutex_unlock(&e->lock);
    if (n == 0)
        return 0;
    char why[300] = "";
    char *body = request_json(e, batch, n);
    int status = body ? post(e, body, why, sizeof why) : -1;
    free(body);
    if (status >= 200 && status < 300) {
        atomic_fetch_add(&e->exported, n);
        if (e->failing)
            sc_info("otel: the collector at %s:%s takes spans again", e->host, e->port);
        e->failing = 0;
    } else {
        atomic_fetch_add(&e->dropped, n);
        atomic_fetch_add(&e->failed, 1);
        if (status > 0)
            snprintf(why, sizeof why, "HTTP status %d", status);
        if (!e->failing)
            sc_warn("otel: exporting %zu spans failed (%s): they are dropped and counted in "
                    "sidecar_otel_spans_dropped_total; logged again when it works", n, why);
        e->failing = 1;
    }
    return n;
}

static void *exporter_main(void *arg)
{
    struct exporter *e = arg;
    pthread_setname_np(pthread_self(), "otel");
    pthread_mutex_lock(&e->lock);
    while (!e->stopping) {
        if (e->n < SC_OTEL_BATCH_MAX) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += SC_OTEL_FLUSH_MS / 1000;
            until.tv_nsec += (long)(SC_OTEL_FLUSH_MS % 1000) * 1000000L;
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&e->wake, &e->lock, &until);
        }
        if (e->stopping)
            break;
        pthread_mutex_unlock(&e->lock);
        while (flush_once(e) == SC_OTEL_BATCH_MAX)
            ;
        pthread_mutex_lock(&e->lock);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

int sc_otel_start(const char *endpoint, const char *service, char *err, size_t err_len)
{
    struct exporter *e = calloc(1, sizeof *e);
    if (!e || !(e->queue = calloc(SC_OTEL_QUEUE_MAX, sizeof *e->queue))) {
        free(e);
        snprintf(err, err_len, "otel: out of memory");
        return -1;
    }
    if (parse_endpoint(e, endpoint, err, err_len)) {
        free(e->queue);
        free(e);
        return -1;
    }
    snprintf(e->service, sizeof e->service, "%s", service);
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->wake, NULL);
    if (pthread_create(&e->thread, NULL, exporter_main, e) != 0) {
        snprintf(err, err_len, "otel: cannot start the exporter thread");
        free(e->queue);
        free(e);
        return -1;
    }
    ex = e;
    sc_info("otel: exporting spans to http://%s:%s%s (OTLP/HTTP JSON)", e->host, e->port, e->path);
    return 0;
}

void sc_otel_add(const struct sc_otel_span *s)
{
    struct exporter *e = ex;
    if (!e)
        return;
    pthread_mutex_lock(&e->lock);
    if (e->n == SC_OTEL_QUEUE_MAX) {
        pthread_mutex_unlock(&e->lock);
        atomic_fetch_add(&e->dropped, 1);
        return;
    }
    e->queue[(e->head + e->n) % SC_OTEL_QUEUE_MAX] = *s;
    if (++e->n == SC_OTEL_BATCH_MAX)
        pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->lock);
}

void sc_otel_stop(void)
{
    struct exporter *e = ex;
    if (!e)
        return;
    pthread_mutex_lock(&e->lock);
    e->stopping = 1;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->lock);
    pthread_join(e->thread, NULL);
    while (e->n > 0 && flush_once(e) > 0 && !e->failing)
        ;
}

void sc_otel_consumer_span(const struct sc_parsed_event *ev, const char *queue,
                           const char *consumer, const char *outcome, int error, int64_t start_us,
                           int64_t end_us)
{
    if (!ex || !ev->trace_id[0])
        return;
    struct sc_otel_span s;
    memset(&s, 0, sizeof s);
    memcpy(s.trace_id, ev->trace_id, sizeof s.trace_id);
    memcpy(s.span_id, ev->span_id, sizeof s.span_id);
    memcpy(s.parent_span_id, ev->parent_span_id, sizeof s.parent_span_id);
    snprintf(s.name, sizeof s.name, "%.80s process", queue);
    s.kind = SC_OTEL_CONSUMER;
    s.start_us = start_us;
    s.end_us = end_us > start_us ? end_us : start_us;
    s.error = error;
    snprintf(s.outcome, sizeof s.outcome, "%s", outcome);
    snprintf(s.message_id, sizeof s.message_id, "%s", ev->id);
    snprintf(s.destination, sizeof s.destination, "%s", queue);
    snprintf(s.consumer_group, sizeof s.consumer_group, "%s", consumer);
    sc_otel_add(&s);
}

int sc_otel_counters(unsigned long long *exported, unsigned long long *dropped,
                     unsigned long long *failed_requests)
{
    struct exporter *e = ex;
    if (!e)
        return 0;
    *exported = atomic_load(&e->exported);
    *dropped = atomic_load(&e->dropped);
    *failed_requests = atomic_load(&e->failed);
    return 1;
}
