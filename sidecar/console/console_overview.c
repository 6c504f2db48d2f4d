/* What the page shows of the samples: the overview (the last reading of
 * each server, and whether it answers) and the charts' hour of history.
 * Both read the sampler's state under its lock, never a server. */
#include <stdio.h>
#include <stdlib.h>

#include "console_sampler.h"
#include "io/url.h"
#include "lifecycle.h"

/* A server's state as the page shows it: "ok", "error" (the last sample
 * failed: error says why), "stalled" (a sample has run for over 5 s: the
 * server does not answer), "unknown" (no sample has finished yet). */
static json_t *server_json(const struct server_state *srv, const char *endpoint)
{
    int64_t now = sc_now_ms();
    const char *state = !srv->sampled ? "unknown" : srv->ok ? "ok" : "error";
    double busy_s = srv->busy_since_ms ? (double)(now - srv->busy_since_ms) / 1000.0 : 0;
    if (busy_s > 5)
        state = "stalled";
    json_t *o = json_pack("{s:s, s:s, s:f, s:I}", "state", state, "endpoint", endpoint,
                          "busy_s", busy_s, "last_took_ms", (json_int_t)srv->last_took_ms);
    json_object_set_new(o, "error", srv->error[0] ? json_string(srv->error) : json_null());
    json_object_set_new(o, "last_ok", srv->last_ok_wall_ms ? json_integer(srv->last_ok_wall_ms)
                                                             : json_null());
    return o;
}

static json_t *num_or_null(long long v)
{
    return v < 0 ? json_null() : json_integer(v);
}

static json_t *real_or_null(double v)
{
    return v < 0 ? json_null() : json_real(v);
}

static json_t *outbox_json(const struct sample_count *st, double oldest, json_t *expired,
                           double per_min)
{
    json_t *counts = json_object();
    for (int i = 0; i < N_ST; i++)
        json_object_set_new(counts, sc_console_st_names[i],
                            json_pack("{s:o, s:b}", "n", num_or_null(st[i].n), "exact", st[i].exact));
    return json_pack("{s:o, s:o, s:o, s:o}", "counts", counts, "oldest_pending_age_s",
                     real_or_null(oldest), "expired_leases", expired, "published_per_min",
                     real_or_null(per_min));
}

/* A tenant's database as the page's server badge shows it. */
static json_t *tenant_server_json(const struct tenant_reading *r, const char *name)
{
    const char *state = !r->sampled ? "unknown" : r->ok ? "ok" : "error";
    json_t *o = json_pack("{s:s, s:s, s:s}", "state", state, "endpoint", name, "tenant", name);
    json_object_set_new(o, "error", r->error[0] && !r->ok ? json_string(r->error) : json_null());
    json_object_set_new(o, "last_ok", r->last_ok_wall_ms ? json_integer(r->last_ok_wall_ms)
                                                         : json_null());
    return o;
}

/* The reply for a tenant that a listing dropped since the request's name
 * was checked. */
static json_t *tenant_gone(const char *tenant, unsigned *status)
{
    *status = 404;
    char msg[200];
    snprintf(msg, sizeof msg, "tenant %s: no longer among the tenants found (tenants.discover)",
             tenant);
    return json_pack("{s:s, s:s}", "error", msg, "tenant", tenant);
}

/* With tenants.discover: how the listing goes. */
static json_t *discover_json(const struct sc_console_sampler *s)
{
    const struct sc_tenants_config *tc = &s->con->cfg->tenants;
    if (!tc->discover)
        return json_null();
    return json_pack("{s:i, s:b, s:o}", "every_ms", tc->discover_ms, "listed", s->listed, "error",
                     s->list_error[0] ? json_string(s->list_error) : json_null());
}

/* The overview: of mysql.url's database; with tenants, of their totals
 * and a table of them; of one tenant when tenant is not NULL. */
json_t *sc_console_overview(struct sc_console_sampler *s, const char *tenant, unsigned *status)
{
    struct sc_console *con = s->con;
    char db_ep[300] = "", amqp_ep[300] = "";
    sc_url_endpoint(con->cfg->mysql_url, db_ep, sizeof db_ep);
    sc_url_endpoint(con->cfg->amqp_url, amqp_ep, sizeof amqp_ep);
    json_t *out = json_object();
    pthread_mutex_lock(&s->lock);
    int ti = tenant ? sc_console_tenant_index(s, tenant) : -1;
    if (tenant && ti < 0) {
        pthread_mutex_unlock(&s->lock);
        json_decref(out);
        return tenant_gone(tenant, status);
    }
    const struct tenant_reading *tr = ti >= 0 ? &s->tenants[ti] : NULL;
    json_object_set_new(out, "time", json_integer(sc_console_wall_ms()));
    json_object_set_new(out, "sample_ms", json_integer(con->cfg->console_sample_ms));
    json_object_set_new(out, "read_only", json_boolean(con->n_tokens == 0));
    json_object_set_new(out, "scope",
                        json_string(tr ? "tenant" : s->tenanted ? "totals" : "database"));
    json_object_set_new(out, "tenant", tr ? json_string(tenant) : json_null());
    json_t *names = json_array();
    for (size_t i = 0; i < s->nt; i++)
        json_array_append_new(names, json_string(s->tnames[i]));
    json_object_set_new(out, "tenants_list", names);
    json_object_set_new(out, "tenants_discover", discover_json(s));
    json_object_set_new(out, "database", tr ? tenant_server_json(tr, tenant)
                                            : server_json(&s->dbs, db_ep));
    json_object_set_new(out, "broker", server_json(&s->amqps, amqp_ep));
    if (tr) {
        json_object_set_new(out, "outbox", outbox_json(tr->by_status, tr->oldest_age_s, json_null(),
                                                       tr->publish_per_min));
        json_object_set_new(out, "tenant_row", sc_console_tenant_json(s, (size_t)ti));
        json_object_set_new(out, "tenant_consumed_per_min", real_or_null(tr->consumed_per_min));
    } else if (s->tenanted) {
        json_t *total = sc_console_tenants_total(s);
        json_t *o = json_pack("{s:O, s:O, s:n, s:n}", "counts", json_object_get(total, "counts"),
                              "oldest_pending_age_s", json_object_get(total, "oldest_pending_age_s"),
                              "expired_leases", "published_per_min");
        json_decref(total);
        json_object_set_new(out, "outbox", o);
        json_object_set_new(out, "tenants", sc_console_tenants_table(s));
    } else {
        json_object_set_new(out, "outbox", outbox_json(s->by_status, s->oldest_age_s,
                                                       num_or_null(s->expired.n), s->publish_per_min));
    }
    json_t *cs = json_array();
    for (size_t k = 0; k < s->nk; k++) {
        const struct sc_consumer_config *c = &con->cfg->consumers[k];
        /* per consumer in mysql.url's database only (a tenant's: the total) */
        json_t *o = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:o}", "name", c->name, "queue",
                              c->queue, "dead_letter_queue", c->dead_letter_queue,
                              "queue_messages", num_or_null(s->queue_msgs[k]), "queue_consumers",
                              num_or_null(s->queue_cons[k]), "dlq_messages",
                              num_or_null(s->dlq_msgs[k]), "consumed_per_min",
                              real_or_null(tr || s->tenanted ? -1 : s->consumed_per_min[k]));
        json_object_set_new(o, "queue_error", s->queue_err[k][0] ? json_string(s->queue_err[k])
                                                                 : json_null());
        json_array_append_new(cs, o);
    }
    json_object_set_new(out, "consumers", cs);
    pthread_mutex_unlock(&s->lock);
    return out;
}

/* The charts' hour: of mysql.url's database; with tenants, of their
 * totals, or of the one tenant (its backlog, publish rate and oldest age:
 * consumption per consumer is mysql.url's only). */
json_t *sc_console_history(struct sc_console_sampler *s, const char *tenant, unsigned *status)
{
    size_t nk = s->nk;
    const char **db_names = calloc(3 + nk, sizeof *db_names);
    const char **amqp_names = calloc(2 * nk + 1, sizeof *amqp_names);
    char (*labels)[160] = calloc(3 * nk + 1, sizeof *labels);
    json_t *out = NULL;
    if (!db_names || !amqp_names || !labels)
        goto done;
    db_names[0] = "backlog";
    db_names[1] = "published_per_min";
    db_names[2] = "oldest_pending_age_s";
    for (size_t k = 0; k < nk; k++) {
        const char *n = s->con->cfg->consumers[k].name;
        snprintf(labels[k], sizeof labels[k], "consumed_per_min:%s", n);
        snprintf(labels[nk + k], sizeof labels[nk + k], "dlq_messages:%s", n);
        snprintf(labels[2 * nk + k], sizeof labels[2 * nk + k], "queue_messages:%s", n);
        db_names[3 + k] = labels[k];
        amqp_names[k] = labels[nk + k];
        amqp_names[nk + k] = labels[2 * nk + k];
    }
    pthread_mutex_lock(&s->lock);
    int ti = tenant ? sc_console_tenant_index(s, tenant) : -1;
    if (tenant && ti < 0) {
        pthread_mutex_unlock(&s->lock);
        out = tenant_gone(tenant, status);
        goto done;
    }
    json_t *dbj = !s->tenanted ? sc_console_ring_json(&s->dbr, db_names)
                  : sc_console_ring_json(ti >= 0 ? &s->tenr[ti] : &s->totr, db_names);
    json_t *aj = sc_console_ring_json(&s->amqpr, amqp_names);
    pthread_mutex_unlock(&s->lock);
    out = json_pack("{s:i, s:o?, s:o?}", "sample_ms", s->con->cfg->console_sample_ms,
                    "database", dbj, "broker", aj);
done:
    free(db_names);
    free(amqp_names);
    free(labels);
    return out;
}
