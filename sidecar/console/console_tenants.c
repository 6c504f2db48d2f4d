/* The console's tenants (tenants.list, or those tenants.discover found):
 * which name a request selects, and the overview's per-tenant backlog
 * table, read from the tenants' samples (console_sample_tenants.c) under
 * the sampler's lock, never from a server. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console_sampler.h"
#include "tenant.h"

int sc_console_tenant_index(const struct sc_console_sampler *s, const char *name)
{
    for (size_t i = 0; i < s->nt; i++)
        if (strcmp(s->tnames[i], name) == 0)
            return (int)i;
    return -1;
}

int sc_console_tenant(const struct sc_console *con, const char *name, const char **tenant,
                      json_t **err, unsigned *status)
{
    *tenant = NULL;
    if (!name)
        return 0;
    const struct sc_tenants_config *tc = &con->cfg->tenants;
    char msg[300];
    if (!tc->present) {
        *status = 400;
        *err = json_pack("{s:s}", "error", "tenant: this console has no tenants section");
        return -1;
    }
    size_t n = strlen(name);
    int plain = n > 0 && n <= SC_TENANT_MAX;
    for (size_t i = 0; plain && i < n; i++)
        plain = (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
                (name[i] >= '0' && name[i] <= '9') || name[i] == '_' || name[i] == '-';
    if (!plain) {
        *status = 400;
        snprintf(msg, sizeof msg, "tenant: a name is 1 to %d letters, digits, _ and -",
                 SC_TENANT_MAX);
        *err = json_pack("{s:s}", "error", msg);
        return -1;
    }
    /* Only the tenants known now (tenants.list, or the last listing's): the
     * console reads no database it was not told of or did not find. */
    struct sc_console_sampler *s = con->sampler;
    pthread_mutex_lock(&s->lock);
    int known = sc_console_tenant_index(s, name) >= 0, listed = s->listed;
    char why[sizeof s->list_error];
    snprintf(why, sizeof why, "%s", s->list_error);
    pthread_mutex_unlock(&s->lock);
    if (known) {
        *tenant = name;
        return 0;
    }
    if (tc->discover && !listed) {
        /* Not known yet, not known not to be one: ask again. */
        *status = 503;
        snprintf(msg, sizeof msg,
                 "tenant %s: the tenants are not listed yet (tenants.discover%s%.200s)", name,
                 why[0] ? ": " : "", why);
    } else {
        *status = 404;
        snprintf(msg, sizeof msg, tc->discover ? "tenant %s: not among the tenants found "
                 "(tenants.discover)" : "tenant %s: not in tenants.list", name);
    }
    *err = json_pack("{s:s, s:s}", "error", msg, "tenant", name);
    return -1;
}

/* A tenant's count: exact, or past the cap ("capped": more than n - 1). */
static json_t *count_json(const struct sample_count *c)
{
    return json_pack("{s:o, s:b, s:b}", "n", c->n < 0 ? json_null() : json_integer(c->n), "exact",
                     c->exact, "capped", c->n >= 0 && !c->exact);
}

static long long backlog(const struct tenant_reading *r)
{
    const struct sample_count *st = r->by_status;
    return st[ST_PENDING].n < 0 ? -1 : st[ST_PENDING].n + (st[ST_PUBLISHING].n > 0 ? st[ST_PUBLISHING].n : 0);
}

/* One tenant's row: its name, counts, oldest PENDING age, and whether its
 * database answered (else why, and the error's class). */
json_t *sc_console_tenant_json(const struct sc_console_sampler *s, size_t i)
{
    const struct tenant_reading *r = &s->tenants[i];
    const char *state = !r->sampled ? "unknown" : r->ok ? "ok" : "unreachable";
    json_t *o = json_pack("{s:s, s:s}", "tenant", s->tnames[i], "state", state);
    json_t *counts = json_object();
    for (int k = 0; k < N_ST; k++)
        json_object_set_new(counts, sc_console_st_names[k], count_json(&r->by_status[k]));
    json_object_set_new(o, "counts", counts);
    long long b = backlog(r);
    json_object_set_new(o, "backlog", b < 0 ? json_null() : json_integer(b));
    json_object_set_new(o, "oldest_pending_age_s",
                        r->oldest_age_s < 0 ? json_null() : json_real(r->oldest_age_s));
    json_object_set_new(o, "error", r->error[0] && !r->ok ? json_string(r->error) : json_null());
    json_object_set_new(o, "error_class",
                        r->error_class && !r->ok ? json_string(r->error_class) : json_null());
    json_object_set_new(o, "last_ok", r->last_ok_wall_ms ? json_integer(r->last_ok_wall_ms)
                                                         : json_null());
    return o;
}

/* Unreachable first (an operator must see those), then the largest
 * backlog, then by name. */
static int by_backlog(const void *a, const void *b, void *arg)
{
    const struct sc_console_sampler *s = arg;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    const struct tenant_reading *x = &s->tenants[i], *y = &s->tenants[j];
    int dx = x->sampled && !x->ok, dy = y->sampled && !y->ok;
    if (dx != dy)
        return dy - dx;
    long long bx = backlog(x), by = backlog(y);
    if (bx != by)
        return bx < by ? 1 : -1;
    return strcmp(s->tnames[i], s->tnames[j]);
}

json_t *sc_console_tenants_table(const struct sc_console_sampler *s)
{
    size_t *order = malloc((s->nt ? s->nt : 1) * sizeof *order);
    if (!order)
        return json_null();
    for (size_t i = 0; i < s->nt; i++)
        order[i] = i;
    qsort_r(order, s->nt, sizeof *order, by_backlog, (void *)s);
    json_t *rows = json_array();
    size_t shown = s->nt < SC_CONSOLE_TENANTS_SHOWN ? s->nt : SC_CONSOLE_TENANTS_SHOWN;
    for (size_t k = 0; k < shown; k++)
        json_array_append_new(rows, sc_console_tenant_json(s, order[k]));
    free(order);
    json_t *total = sc_console_tenants_total(s);
    return json_pack("{s:I, s:I, s:o, s:o}", "count", (json_int_t)s->nt, "more",
                     (json_int_t)(s->nt - shown), "rows", rows, "total", total);
}

json_t *sc_console_tenants_total(const struct sc_console_sampler *s)
{
    struct sample_count sum[N_ST];
    double oldest = -1;
    size_t unreachable = 0, unknown = 0;
    for (int k = 0; k < N_ST; k++)
        sum[k] = (struct sample_count){0, 1};
    for (size_t i = 0; i < s->nt; i++) {
        const struct tenant_reading *r = &s->tenants[i];
        if (!r->sampled) {
            unknown++;
            continue;
        }
        unreachable += !r->ok;
        if (!r->ok)
            continue;
        for (int k = 0; k < N_ST; k++) {
            sum[k].n += r->by_status[k].n < 0 ? 0 : r->by_status[k].n;
            sum[k].exact &= r->by_status[k].exact;
        }
        if (r->oldest_age_s > oldest)
            oldest = r->oldest_age_s;
    }
    json_t *counts = json_object();
    for (int k = 0; k < N_ST; k++)
        json_object_set_new(counts, sc_console_st_names[k], count_json(&sum[k]));
    return json_pack("{s:o, s:o, s:I, s:I, s:I}", "counts", counts, "oldest_pending_age_s",
                     oldest < 0 ? json_null() : json_real(oldest), "tenants", (json_int_t)s->nt,
                     "unreachable", (json_int_t)unreachable, "unknown", (json_int_t)unknown);
}
