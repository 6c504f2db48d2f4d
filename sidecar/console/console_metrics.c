/* The console's /metrics: the sampler's last readings as Prometheus text
 * (read under its lock, never from a server), so a scrape costs the
 * servers nothing. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "console_sampler.h"

struct text {
    char *p;
    size_t len, cap;
};

__attribute__((format(printf, 2, 3))) static void add(struct text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = (t->cap + (size_t)n) * 2;
        char *p = realloc(t->p, cap);
        if (!p)
            return;
        t->p = p;
        t->cap = cap;
    }
}

/* A label value: \ " and newline escaped (consumer and queue names are
 * config text). */
static const char *label_value(const char *s, char *buf, size_t len)
{
    size_t j = 0;
    for (; *s && j + 2 < len; s++) {
        if (*s == '\\' || *s == '"' || *s == '\n') {
            buf[j++] = '\\';
            buf[j++] = *s == '\n' ? 'n' : *s;
        } else {
            buf[j++] = *s;
        }
    }
    buf[j] = 0;
    return buf;
}

char *sc_console_metrics(struct sc_console_sampler *s)
{
    struct text t = {malloc(4096), 0, 4096};
    if (!t.p)
        return NULL;
    t.p[0] = 0;
    pthread_mutex_lock(&s->lock);
    add(&t, "# HELP sidecar_console_up 1 when the console's last sample of that server succeeded.\n"
            "# TYPE sidecar_console_up gauge\n"
            "sidecar_console_up{server=\"mysql\"} %d\nsidecar_console_up{server=\"amqp\"} %d\n",
        s->dbs.sampled && s->dbs.ok, s->amqps.sampled && s->amqps.ok);
    add(&t, "# HELP sidecar_console_sample_seconds How long the console's last sample took.\n"
            "# TYPE sidecar_console_sample_seconds gauge\n"
            "sidecar_console_sample_seconds{server=\"mysql\"} %.3f\n"
            "sidecar_console_sample_seconds{server=\"amqp\"} %.3f\n",
        (double)s->dbs.last_took_ms / 1000.0, (double)s->amqps.last_took_ms / 1000.0);
    if (s->nt) {
        size_t down = 0;
        for (size_t i = 0; i < s->nt; i++)
            down += s->tenants[i].sampled && !s->tenants[i].ok;
        add(&t, "sidecar_console_sample_seconds{server=\"tenants\"} %.3f\n"
                "# HELP sidecar_console_tenants_unreachable Tenants whose database the console's "
                "last sample could not read.\n# TYPE sidecar_console_tenants_unreachable gauge\n"
                "sidecar_console_tenants_unreachable %zu\n",
            (double)s->tens.last_took_ms / 1000.0, down);
    }
    add(&t, "# HELP sidecar_outbox_rows Outbox rows by status (exact up to %d, above it the "
            "optimiser's estimate: sidecar_outbox_rows_exact 0).\n# TYPE sidecar_outbox_rows gauge\n",
        SC_CONSOLE_CAP_EXACT);
    for (int i = 0; i < N_ST; i++)
        if (s->by_status[i].n >= 0)
            add(&t, "sidecar_outbox_rows{status=\"%s\"} %lld\n", sc_console_st_names[i],
                s->by_status[i].n);
    add(&t, "# HELP sidecar_outbox_rows_exact 1 when sidecar_outbox_rows of that status is an "
            "exact count.\n# TYPE sidecar_outbox_rows_exact gauge\n");
    for (int i = 0; i < N_ST; i++)
        if (s->by_status[i].n >= 0)
            add(&t, "sidecar_outbox_rows_exact{status=\"%s\"} %d\n", sc_console_st_names[i],
                s->by_status[i].exact);
    if (s->dbs.sampled && s->dbs.ok)
        add(&t, "# HELP sidecar_outbox_oldest_pending_age_seconds Age of the oldest PENDING outbox "
                "row (0 when none).\n# TYPE sidecar_outbox_oldest_pending_age_seconds gauge\n"
                "sidecar_outbox_oldest_pending_age_seconds %.3f\n",
            s->oldest_age_s < 0 ? 0 : s->oldest_age_s);
    if (s->expired.n >= 0)
        add(&t, "# HELP sidecar_outbox_expired_leases PUBLISHING rows whose lease has expired.\n"
                "# TYPE sidecar_outbox_expired_leases gauge\nsidecar_outbox_expired_leases %lld\n",
            s->expired.n);
    static const struct {
        const char *name, *help;
        int which; /* 0 queue, 1 consumers, 2 dlq */
    } qs[] = {
        {"sidecar_queue_messages", "Messages ready in a consumer's queue.", 0},
        {"sidecar_queue_consumers", "Consumers attached to a consumer's queue.", 1},
        {"sidecar_dlq_messages", "Messages in a consumer's dead-letter queue.", 2},
    };
    char a[300], b[300];
    for (size_t j = 0; j < sizeof qs / sizeof *qs; j++) {
        add(&t, "# HELP %s %s\n# TYPE %s gauge\n", qs[j].name, qs[j].help, qs[j].name);
        for (size_t k = 0; k < s->nk; k++) {
            const struct sc_consumer_config *c = &s->con->cfg->consumers[k];
            long long v = qs[j].which == 0 ? s->queue_msgs[k]
                          : qs[j].which == 1 ? s->queue_cons[k] : s->dlq_msgs[k];
            if (v >= 0)
                add(&t, "%s{consumer=\"%s\",queue=\"%s\"} %lld\n", qs[j].name,
                    label_value(c->name, a, sizeof a),
                    label_value(qs[j].which == 2 ? c->dead_letter_queue : c->queue, b, sizeof b), v);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return t.p;
}
