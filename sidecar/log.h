/* Structured logging: one JSON object per line on stderr. */
#ifndef SC_LOG_H
#define SC_LOG_H

#include <stddef.h>
#include <stdint.h>

enum sc_log_level { SC_LOG_DEBUG = 0, SC_LOG_INFO, SC_LOG_WARN, SC_LOG_ERROR };

/* Optional fields of a line; zero/NULL members are left out. */
struct sc_log_fields {
    const char *consumer;
    const char *event_id;
    uint64_t delivery_tag;
    int attempt;
    const char *outcome;
    unsigned error_code;
    const char *sqlstate;
    uint64_t duration_us;  /* receive to commit, on "applied" */
    int redelivered;       /* the broker's redelivered flag, on "received" */
    const char *message_id; /* a plain message's message_id that is not a UUID (event_id
                               is its UUIDv5) */
    const char *ce_id;      /* a CloudEvents id that is not a UUID (event_id is the UUIDv5
                               of its source and it) */
    int batch_member;      /* a member of a batch-mode message: its index + 1 (0: not one) */
    /* W3C trace context of the event (NULL or empty: none): its trace id,
     * this process's span handling it, and the span it came from */
    const char *trace_id;
    const char *span_id;
    const char *parent_span_id;
};

extern int sc_log_min_level;

/* Now in UTC as RFC 3339 with microseconds: 2026-11-29T18:25:09.420816Z. */
void sc_log_timestamp(char *out, size_t len);

/* Returns 0, or -1 when name is not one of debug|info|warn|error. */
int sc_log_set_level(const char *name);

void sc_log(enum sc_log_level level, const struct sc_log_fields *f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define sc_log_enabled(level) ((int)(level) >= sc_log_min_level)
#define SC_LOG(level, ...) do { if (sc_log_enabled(level)) sc_log((level), NULL, __VA_ARGS__); } while (0)
#define sc_debug(...) SC_LOG(SC_LOG_DEBUG, __VA_ARGS__)
#define sc_info(...) SC_LOG(SC_LOG_INFO, __VA_ARGS__)
#define sc_warn(...) SC_LOG(SC_LOG_WARN, __VA_ARGS__)
#define sc_error(...) SC_LOG(SC_LOG_ERROR, __VA_ARGS__)

#endif
