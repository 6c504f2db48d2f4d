/* One sample of one tenant's database for the console (console_sampler.h).
 * The tenants' databases differ only in their names (tenants.database_url
 * has {tenant} in the database name, nowhere else), so one session, opened
 * without a default database, reads every tenant by its qualified name:
 * one statement a tenant a sample, no session per tenant. The statement
 * reads index ranges only: each status's count over ix_outbox_event_claim
 * capped at SC_CONSOLE_TENANT_CAP, the oldest PENDING row off the end of
 * the same range, MAX(id) of consumed_event (the primary key's end).
 * Rates are the change of the PUBLISHED count and of MAX(id) since the
 * tenant's last sample. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console_sampler.h"
#include "io/db_rows.h"
#include "io/url.h"
#include "lifecycle.h"
#include "tenant.h"

/* A database_url with its database part left out (the session's URL). */
static char *without_database(const char *url)
{
    const char *p = strstr(url, "://");
    char *out = strdup(url);
    if (!p || !out)
        return out;
    char *slash = strchr(out + (p - url) + 3, '/');
    if (slash) {
        size_t q = strcspn(slash, "?");
        memmove(slash + 1, slash + q, strlen(slash + q) + 1);
    }
    return out;
}

/* `name` of tenant's database, or "" when it cannot be quoted. */
static void qualified_name(const struct sc_tenants_config *tc, const char *tenant, char *out,
                           size_t len)
{
    out[0] = 0;
    char **urls;
    if (sc_tenant_urls(tc, tenant, &urls))
        return;
    struct sc_mysql_url u;
    char err[200];
    if (tc->n_database_urls && sc_mysql_url_parse(urls[0], &u, err, sizeof err) == 0) {
        if (u.database && !strchr(u.database, '`') && strlen(u.database) + 3 <= len)
            snprintf(out, len, "`%s`", u.database);
        sc_mysql_url_free(&u);
    }
    sc_tenant_urls_free(urls, tc->n_database_urls);
}

void sc_console_tenant_track_init(struct tenant_track *k, const struct sc_console *con,
                                  const char *tenant)
{
    memset(k, 0, sizeof *k);
    qualified_name(&con->cfg->tenants, tenant, k->qname, sizeof k->qname);
    k->published_prev = k->max_id_prev = -1;
}

int sc_console_tenants_init(struct tenant_sampling *t, const struct sc_console *con)
{
    const struct sc_tenants_config *tc = &con->cfg->tenants;
    memset(t, 0, sizeof *t);
    t->nt = tc->present && !tc->discover ? tc->n_list : 0;
    t->track = calloc(t->nt ? t->nt : 1, sizeof *t->track);
    if (!t->track)
        return -1;
    for (size_t i = 0; i < t->nt; i++)
        sc_console_tenant_track_init(&t->track[i], con, tc->list[i]);
    return 0;
}

void sc_console_tenants_free(struct tenant_sampling *t)
{
    if (sc_db_connected(&t->db))
        sc_db_close(&t->db);
    free(t->track);
    sc_console_discover_free(&t->disc);
    memset(t, 0, sizeof *t);
}

static int connect_session(struct tenant_sampling *t, const struct sc_console *con,
                           struct sc_db_err *e)
{
    const struct sc_tenants_config *tc = &con->cfg->tenants;
    char **urls = calloc(tc->n_database_urls ? tc->n_database_urls : 1, sizeof *urls);
    int rc = -1;
    size_t n = 0;
    if (!urls)
        goto out;
    for (; n < tc->n_database_urls; n++)
        if (!(urls[n] = without_database(tc->database_urls[n])))
            goto out;
    rc = sc_db_connect_urls(&t->db, &con->cfg_short, urls, n, e);
    if (rc == 0) {
        sc_console_db_session(&t->db);
        /* Each SELECT its own transaction: no statement to end it, no
         * metadata lock on a tenant's tables kept past its read. */
        mysql_autocommit(t->db.conn, 1);
    }
out:
    if (rc && !e->code && !e->msg[0])
        snprintf(e->msg, sizeof e->msg, "out of memory");
    for (size_t i = 0; urls && i < n; i++)
        free(urls[i]);
    free(urls);
    return rc;
}

static void count_cell(const char *v, struct sample_count *c)
{
    c->n = v ? atoll(v) : -1;
    c->exact = c->n >= 0 && c->n <= SC_CONSOLE_TENANT_CAP;
    if (!c->exact && c->n >= 0)
        c->n = SC_CONSOLE_TENANT_CAP + 1;
}

void sc_console_sample_tenant(struct tenant_sampling *t, const struct sc_console *con, size_t i,
                              struct tenant_reading *out)
{
    memset(out, 0, sizeof *out);
    out->oldest_age_s = out->publish_per_min = out->consumed_per_min = -1;
    for (int k = 0; k < N_ST; k++)
        out->by_status[k].n = -1;
    out->sampled = 1;
    struct sc_db_err e = {0};
    struct tenant_track *tk = &t->track[i];
    const char *q = tk->qname;
    if (!q[0]) {
        snprintf(out->error, sizeof out->error, "tenants.database_url: no database name for "
                 "this tenant that can be quoted");
        out->error_class = "config";
        return;
    }
    if (!sc_db_connected(&t->db) && connect_session(t, con, &e))
        goto fail;
    char sql[2400], part[N_ST][360];
    for (int k = 0; k < N_ST; k++)
        snprintf(part[k], sizeof part[k],
                 "(SELECT COUNT(*) FROM (SELECT 1 FROM %s.outbox_event FORCE INDEX "
                 "(ix_outbox_event_claim) WHERE status = '%s' LIMIT %d) c%d)",
                 q, sc_console_st_names[k], SC_CONSOLE_TENANT_CAP + 1, k);
    snprintf(sql, sizeof sql,
             "SELECT %s, %s, %s, %s, TIMESTAMPDIFF(MICROSECOND, (SELECT MIN(created_at) FROM "
             "%s.outbox_event WHERE status = 'PENDING'), UTC_TIMESTAMP(6)), "
             "(SELECT MAX(id) FROM %s.consumed_event)",
             part[0], part[1], part[2], part[3], q, q);
    struct sc_rows rows;
    if (sc_db_select_params(&t->db, sql, NULL, 0, 1, 0, &rows, &e))
        goto fail;
    for (int k = 0; k < N_ST; k++)
        count_cell(sc_rows_get(&rows, 0, (size_t)k), &out->by_status[k]);
    const char *age = sc_rows_get(&rows, 0, 4), *max_id = sc_rows_get(&rows, 0, 5);
    out->oldest_age_s = age ? (double)atoll(age) / 1e6 : -1;
    long long hi = max_id ? atoll(max_id) : 0;
    sc_rows_free(&rows);

    int64_t now = sc_now_ms();
    double minutes = tk->prev_ms ? (double)(now - tk->prev_ms) / 60000.0 : 0;
    const struct sample_count *pub = &out->by_status[ST_PUBLISHED];
    /* A count past the cap, or one that fell (a purge), tells no rate. */
    if (minutes > 0 && pub->exact && tk->published_prev >= 0 && pub->n >= tk->published_prev)
        out->publish_per_min = (double)(pub->n - tk->published_prev) / minutes;
    if (minutes > 0 && tk->max_id_prev >= 0 && hi >= tk->max_id_prev)
        out->consumed_per_min = (double)(hi - tk->max_id_prev) / minutes;
    tk->published_prev = pub->exact ? pub->n : -1;
    tk->max_id_prev = hi;
    tk->prev_ms = now;
    out->ok = 1;
    out->last_ok_wall_ms = sc_console_wall_ms();
    return;
fail:
    snprintf(out->error, sizeof out->error, "error %u: %.250s", e.code, e.msg);
    out->error_class = sc_db_error_class_name(e.cls ? e.cls : SC_DBERR_CONNECTION);
    tk->prev_ms = 0;
    if (sc_db_connected(&t->db) && sc_console_db_broken(&e))
        sc_db_close(&t->db);
}
