#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int sc_log_min_level = SC_LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

int sc_log_set_level(const char *name)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, level_names[i]) == 0) {
            sc_log_min_level = i;
            return 0;
        }
    }
    return -1;
}

void sc_log_timestamp(char *out, size_t len)
{
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    size_t n = strftime(out, len, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, len - n, ".%06ldZ", (long)tv.tv_usec);
}

struct buf {
    char *p;
    size_t len, cap;
};

static void put(struct buf *b, const char *s, size_t n)
{
    if (b->len + n >= b->cap)
        n = b->cap - b->len - 1;
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

/* Appends s as a JSON string body (no quotes), escaping what JSON requires. */
static void put_escaped(struct buf *b, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            put(b, esc, 2);
        } else if (c == '\n') {
            put(b, "\\n", 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put(b, esc, 6);
        } else {
            put(b, (const char *)&c, 1);
        }
    }
}

static void put_str_field(struct buf *b, const char *key, const char *val)
{
    if (!val)
        return;
    put(b, ",\"", 2);
    put(b, key, strlen(key));
    put(b, "\":\"", 3);
    put_escaped(b, val);
    put(b, "\"", 1);
}

static void put_num_field(struct buf *b, const char *key, unsigned long long val)
{
    char num[32];
    int n = snprintf(num, sizeof num, "%llu", val);
    put(b, ",\"", 2);
    put(b, key, strlen(key));
    put(b, "\":", 2);
    put(b, num, (size_t)n);
}

void sc_log(enum sc_log_level level, const struct sc_log_fields *f, const char *fmt, ...)
{
    if (!sc_log_enabled(level))
        return;
    char line[4096], msg[2048], ts[64];
    struct buf b = {line, 0, sizeof line - 2}; /* room kept for "}\n" */
    sc_log_timestamp(ts, sizeof ts);

    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);

    put(&b, "{\"time\":\"", 9);
    put(&b, ts, strlen(ts));
    put(&b, "\"", 1);
    put_str_field(&b, "level", level_names[level]);
    put_str_field(&b, "msg", msg);
    if (f) {
        put_str_field(&b, "consumer", f->consumer);
        put_str_field(&b, "event_id", f->event_id);
        if (f->delivery_tag)
            put_num_field(&b, "delivery_tag", f->delivery_tag);
        if (f->attempt)
            put_num_field(&b, "attempt", (unsigned)f->attempt);
        put_str_field(&b, "outcome", f->outcome);
        if (f->error_code)
            put_num_field(&b, "error_code", f->error_code);
        put_str_field(&b, "sqlstate", f->sqlstate);
        if (f->duration_us)
            put_num_field(&b, "duration_us", f->duration_us);
        if (f->redelivered)
            put(&b, ",\"redelivered\":true", 19);
        put_str_field(&b, "message_id", f->message_id);
        put_str_field(&b, "ce_id", f->ce_id);
        if (f->batch_member > 0)
            put_num_field(&b, "batch_index", (unsigned)(f->batch_member - 1));
        if (f->trace_id && f->trace_id[0]) {
            put_str_field(&b, "trace_id", f->trace_id);
            put_str_field(&b, "span_id", f->span_id);
            put_str_field(&b, "parent_span_id", f->parent_span_id);
        }
    }
    line[b.len++] = '}';
    line[b.len++] = '\n';
    /* One write per line so lines from worker threads never interleave. */
    ssize_t w = write(STDERR_FILENO, line, b.len);
    (void)w;
}
