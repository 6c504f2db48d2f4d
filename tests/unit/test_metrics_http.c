/* /metrics and /readyz past the old fixed tables and past select()'s
 * FD_SETSIZE: 70 consumers and 600 endpoints from 300 threads all show, and
 * the server answers while the process holds more than 1,024 descriptors
 * (its own listening and accepted sockets above 1,024). No servers needed. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#include "io/http.h"
#include "metrics.h"
#include "tests/unit/tap.h"

#define N_CONSUMERS 70
#define N_THREADS 300

static struct sc_consumer_metrics cm[N_CONSUMERS];
static char names[N_CONSUMERS][32];
static pthread_barrier_t all_up, all_done;

static void *worker(void *arg)
{
    int i = (int)(long)arg;
    char name[64], ep[32];
    snprintf(name, sizeof name, "sidecar consume w-%03d", i);
    snprintf(ep, sizeof ep, "10.0.%d.%d:5672", i / 250, i % 250);
    /* held alive together: each is its own thread */
    pthread_barrier_wait(&all_up);
    sc_metrics_endpoint(name, "amqp", i % 3, ep);
    sc_metrics_endpoint(NULL, "mysql", i % 2, "127.0.0.1:3306");
    pthread_barrier_wait(&all_done);
    return NULL;
}

/* GET path from 127.0.0.1:port; returns the whole response (malloc'd). */
static char *get(unsigned port, const char *path, int *fd_used)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    *fd_used = s;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a)) {
        if (s >= 0)
            close(s);
        return NULL;
    }
    char req[128];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: x\r\n\r\n", path);
    if (write(s, req, (size_t)n) != n) {
        close(s);
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (len + 4096 > cap)
            buf = realloc(buf, cap *= 2);
        ssize_t r = read(s, buf + len, cap - len - 1);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    buf[len] = 0;
    close(s);
    return buf;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

int main(void)
{
    /* More descriptors than select() can watch, before the server starts. */
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < 2048 && rl.rlim_max >= 2048) {
        rl.rlim_cur = 2048;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < 1200) {
        printf("Bail out! RLIMIT_NOFILE is %llu: cannot hold more than 1,024 descriptors\n",
               (unsigned long long)rl.rlim_cur);
        return 1;
    }
    int null = open("/dev/null", O_RDONLY);
    int highest = null;
    while (highest < FD_SETSIZE + 64)
        highest = dup(null);
    ok(highest > FD_SETSIZE, "the process holds %d descriptors (FD_SETSIZE is %d)", highest + 1,
       FD_SETSIZE);

    for (int i = 0; i < N_CONSUMERS; i++) {
        snprintf(names[i], sizeof names[i], "consumer-%02d", i);
        sc_consumer_metrics_init(&cm[i], names[i], 1);
        atomic_store(&cm[i].consuming, 1);
        atomic_store(&cm[i].db_connected, 1);
        atomic_store(&cm[i].amqp_connected, 1);
        is_int(sc_metrics_register_consumer(&cm[i]), 0, "consumer %d registered", i);
    }
    pthread_t t[N_THREADS];
    pthread_barrier_init(&all_up, NULL, N_THREADS);
    pthread_barrier_init(&all_done, NULL, N_THREADS + 1);
    for (long i = 0; i < N_THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    pthread_barrier_wait(&all_done);

    /* the tables themselves, without HTTP */
    char *direct = sc_metrics_render();
    is_int(direct ? count(direct, "sidecar_workers{consumer=") : 0, N_CONSUMERS,
           "sc_metrics_render: every one of %d consumers", N_CONSUMERS);
    is_int(direct ? count(direct, "sidecar_endpoint{worker=") : 0, 2 * N_THREADS,
           "sc_metrics_render: every one of %d endpoints", 2 * N_THREADS);
    free(direct);
    char why[256];
    atomic_store(&cm[N_CONSUMERS - 1].consuming, 0);
    ok(!sc_metrics_ready(why, sizeof why) && strstr(why, "consumer-69"),
       "sc_metrics_ready: the 70th consumer counts (%s)", why);
    atomic_store(&cm[N_CONSUMERS - 1].consuming, 1);

    char err[256] = "";
    struct sc_http *h = sc_http_start("127.0.0.1:0", err, sizeof err);
    ok(h != NULL, "the HTTP server starts with descriptors above FD_SETSIZE open (%s)", err);
    if (!h)
        return done();
    int fd = -1;
    char *m = get(sc_http_port(h), "/metrics", &fd);
    ok(fd > FD_SETSIZE, "the scrape's own socket is descriptor %d", fd);
    ok(m && strncmp(m, "HTTP/1.", 7) == 0 && strncmp(m + 8, " 200 ", 5) == 0, "/metrics answers 200 (%.12s)",
       m ? m : "no answer");
    int missing = 0;
    for (int i = 0; i < N_CONSUMERS && m; i++) {
        char line[128];
        snprintf(line, sizeof line, "sidecar_consuming{consumer=\"%.31s\"} 1", names[i]);
        if (!strstr(m, line)) {
            printf("# missing: %s\n", line);
            missing++;
        }
    }
    ok(m && missing == 0, "all %d consumers are in /metrics (%d missing)", N_CONSUMERS, missing);
    is_int(m ? count(m, "sidecar_workers{consumer=") : 0, N_CONSUMERS, "one sidecar_workers per consumer");
    is_int(m ? count(m, "sidecar_endpoint{worker=\"sidecar consume w-") : 0, 2 * N_THREADS,
           "both endpoints of each of %d worker threads, named after the thread", N_THREADS);
    ok(m && strstr(m, "worker=\"sidecar consume w-299\",server=\"mysql\""),
       "the 300th thread's database connection carries its thread's name");
    free(m);

    char *r = get(sc_http_port(h), "/readyz", &fd);
    ok(r && strstr(r, " 200 ") && strstr(r, "ready"), "/readyz: ready with all 70 consuming");
    free(r);
    atomic_store(&cm[N_CONSUMERS - 1].consuming, 0);
    r = get(sc_http_port(h), "/readyz", &fd);
    if (r && strchr(r, '\n') && r[strlen(r) - 1] == '\n')
        r[strlen(r) - 1] = 0;
    ok(r && strstr(r, " 503 ") && strstr(r, "consumer consumer-69: 0 of 1"),
       "/readyz: 503 naming the 70th consumer when it stops consuming (%s)",
       r && strstr(r, "\r\n\r\n") ? strstr(r, "\r\n\r\n") + 4 : "no answer");
    free(r);
    sc_http_stop(h);
    for (int i = 0; i < N_THREADS; i++)
        pthread_join(t[i], NULL);
    sc_metrics_reset();
    return done();
}
