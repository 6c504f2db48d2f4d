/* Shared by the benchmark's C tools: a config from the URLs in argv. */
#ifndef SC_BENCH_COMMON_H
#define SC_BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sidecar/config.h"

static inline void bench_config(struct sc_config *c, const char *amqp_url, const char *mysql_url)
{
    memset(c, 0, sizeof *c);
    c->amqp_url = (char *)amqp_url;
    c->amqp_heartbeat_s = 30;
    c->amqp_connect_timeout_ms = 5000;
    c->mysql_url = (char *)mysql_url;
    c->mysql_lock_wait_timeout_s = 5;
    c->mysql_connect_timeout_s = 5;
}

static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#endif
