/* The console's /metrics: the sampler's last readings as Prometheus text
 * (read under its lock, never from a server), so a scrape costs the
 * servers nothing. */
#include <stdio.h>
#include <stdlib.h>

#include "console_sampler.h"
#include "metrics_out.h"

char *sc_console_metrics(struct sc_console_sampler *s)
{
    struct sc_metrics_out t = {malloc(4096), 0, 4096};
    if (!t.p)
        return NULL;
    t.p[0] = 0;
    pthread_mutex_lock(&s->lock);
    sc_metrics_emit(&t,
            "# HELP sidecar_console_up 1 when the console's last sample of that server succeeded.\n"
            "# TYPE sidecar_console_up gauge\n"
            "sidecar_console_up{server=\"mysql\"} %d\nsidecar_console_up{server=\"amqp\"} %d\n",
        s->dbs.sampled && s->dbs.ok, s->amqps.sampled && s->amqps.ok);
    sc_metrics_emit(&t,
            "# HELP sidecar_console_sample_seconds How long the console's last sample took.\n"
            "# TYPE sidecar_console_sample_seconds gauge\n"
            "sidecar_console_sample_seconds{server=\"mysql\"} %.3f\n"
            "sidecar_console_sample_seconds{server=\"amqp\"} %.3f\n",
        (double)s->dbs.last_took_ms / 1000.0, (double)s->amqps.last_took_ms / 1000.0);
    if (s->tenanted) {
        size_t down = 0;
        for (size_t i = 0; i < s->nt; i++)
            down += s->tenants[i].sampled && !s->tenants[i].ok;
        sc_metrics_emit(&t, "sidecar_console_sample_seconds{server=\"tenants\"} %.3f\n"
                "# HELP sidecar_console_tenants_unreachable Tenants whose database the console's "
                "last sample could not read.\n# TYPE sidecar_console_tenants_unreachable gauge\n"
                "sidecar_console_tenants_unreachable %zu\n",
            (double)s->tens.last_took_ms / 1000.0, down);
    }
    sc_metrics_emit(&t,
            "# HELP sidecar_outbox_rows Outbox rows by status (exact up to %d, above it the "
            "optimiser's estimate: sidecar_outbox_rows_exact 0).\n# TYPE sidecar_outbox_rows gauge\n",
        SC_CONSOLE_CAP_EXACT);
    for (int i = 0; i < N_ST; i++)
        if (s->by_status[i].n >= 0)
            sc_metrics_emit(&t, "sidecar_outbox_rows{status=\"%s\"} %lld\n", sc_console_st_names[i],
                s->by_status[i].n);
    sc_metrics_emit(&t,
            "# HELP sidecar_outbox_rows_exact 1 when sidecar_outbox_rows of that status is an "
            "exact count.\n# TYPE sidecar_outbox_rows_exact gauge\n");
    for (int i = 0; i < N_ST; i++)
        if (s->by_status[i].n >= 0)
            sc_metrics_emit(&t,
                    "sidecar_outbox_rows_exact{status=\"%s\"} %d\n", sc_console_st_names[i],
                s->by_status[i].exact);
    if (s->dbs.sampled && s->dbs.ok)
        sc_metrics_emit(&t,
                "# HELP sidecar_outbox_oldest_pending_age_seconds Age of the oldest PENDING outbox "
                "row (0 when none).\n# TYPE sidecar_outbox_oldest_pending_age_seconds gauge\n"
                "sidecar_outbox_oldest_pending_age_seconds %.3f\n",
            s->oldest_age_s < 0 ? 0 : s->oldest_age_s);
    if (s->expired.n >= 0)
        sc_metrics_emit(&t,
                "# HELP sidecar_outbox_expired_leases PUBLISHING rows whose lease has expired.\n"
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
        sc_metrics_emit(&t, "# HELP %s %s\n# TYPE %s gauge\n", qs[j].name, qs[j].help, qs[j].name);
        for (size_t k = 0; k < s->nk; k++) {
            const struct sc_consumer_config *c = &s->con->cfg->consumers[k];
            long long v = qs[j].which == 0 ? s->queue_msgs[k]
                          : qs[j].which == 1 ? s->queue_cons[k] : s->dlq_msgs[k];
            if (v >= 0)
                sc_metrics_emit(&t, "%s{consumer=\"%s\",queue=\"%s\"} %lld\n", qs[j].name,
                    sc_metrics_esc(c->name, a, sizeof a),
                    sc_metrics_esc(qs[j].which == 2 ? c->dead_letter_queue : c->queue, b,
                                   sizeof b),
                    v);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return t.p;
}
