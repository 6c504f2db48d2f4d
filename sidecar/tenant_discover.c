/* Tenant discovery: one information_schema query on the first
 * tenants.database_url node. */
#include "tenant_discover.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/db.h"
#include "tenant.h"

/* The database name's bounds in url: [*start, *end). Returns 0, or -1
 * when it has none. Same reading as sc_tenant_url_check. */
static int db_span(const char *url, const char **start, const char **end)
{
    const char *auth = strncmp(url, "mysql://", 8) == 0 ? url + 8 : url;
    const char *at = strrchr(auth, '@');
    const char *path = strchr(at ? at : auth, '/');
    if (!path)
        return -1;
    const char *q = strchr(path, '?');
    *start = path + 1;
    *end = q ? q : path + strlen(path);
    return 0;
}

/* Letters, digits, _, $ and -: what a prefix may hold so that it goes into
 * a LIKE pattern with only _ escaped. */
static int plain(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '$' || s[i] == '-'))
            return 0;
    return 1;
}

int sc_tenant_from_db(const char *db, const char *prefix, const char *suffix, char *out,
                      size_t out_len)
{
    size_t n = strlen(db), p = strlen(prefix), s = strlen(suffix);
    if (n <= p + s || strncmp(db, prefix, p) != 0 || strcmp(db + n - s, suffix) != 0)
        return -1;
    size_t len = n - p - s;
    if (len + 1 > out_len)
        return -1;
    memcpy(out, db + p, len);
    out[len] = 0;
    return (int)len;
}

static void like_escaped(char *o, size_t cap, const char *s, size_t n)
{
    size_t k = strlen(o);
    for (size_t i = 0; i < n && k + 3 < cap; i++) {
        if (s[i] == '_')
            o[k++] = '!';
        o[k++] = s[i];
    }
    o[k] = 0;
}

static int push(char ***arr, size_t *n, const char *s)
{
    char **a = realloc(*arr, (*n + 1) * sizeof *a);
    if (!a)
        return -1;
    *arr = a;
    if (!(a[*n] = strdup(s)))
        return -1;
    (*n)++;
    return 0;
}

int sc_tenant_discover(const struct sc_config *cfg, const regex_t *names,
                       struct sc_tenant_found *out, char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    const char *url = cfg->tenants.database_urls[0], *b, *e;
    if (db_span(url, &b, &e)) {
        snprintf(why, why_len, "tenants.database_url has no database name");
        return -1;
    }
    const char *ph = strstr(b, SC_TENANT_PLACEHOLDER);
    size_t phl = strlen(SC_TENANT_PLACEHOLDER);
    if (!ph || ph >= e || !plain(b, (size_t)(ph - b)) || !plain(ph + phl, (size_t)(e - ph - phl))) {
        snprintf(why, why_len, "tenants.discover: the database name of tenants.database_url must "
                 "be letters, digits, _, $ and - around one %s", SC_TENANT_PLACEHOLDER);
        return -1;
    }
    char prefix[128] = "", suffix[128] = "";
    snprintf(prefix, sizeof prefix, "%.*s", (int)(ph - b), b);
    snprintf(suffix, sizeof suffix, "%.*s", (int)(e - ph - phl), ph + phl);
    /* The same URL on information_schema: every user may use it, and it
     * lists only what the user has privileges on. */
    size_t ul = strlen(url) + 32;
    char *probe = malloc(ul);
    if (!probe) {
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    snprintf(probe, ul, "%.*sinformation_schema%s", (int)(b - url), url, e);
    char pattern[600] = "";
    like_escaped(pattern, sizeof pattern, prefix, strlen(prefix));
    strcat(pattern, "%");
    like_escaped(pattern, sizeof pattern, suffix, strlen(suffix));
    char sql[800];
    snprintf(sql, sizeof sql, "SELECT DISTINCT TABLE_SCHEMA FROM information_schema.TABLES WHERE "
             "TABLE_NAME = 'outbox_event' AND TABLE_SCHEMA LIKE '%s' ESCAPE '!' ORDER BY 1", pattern);
    struct sc_db db = {0};
    struct sc_db_err err = {0};
    char *urls[1] = {probe};
    int rc = -1;
    /* A probe: the node this thread's next tenant connect starts at stays
     * where it was. */
    size_t rotation = sc_db_rotation();
    int failed = sc_db_connect_urls(&db, cfg, urls, 1, &err);
    sc_db_set_rotation(rotation);
    if (failed) {
        snprintf(why, why_len, "connecting: error %u (SQLSTATE %s): %s", err.code, err.sqlstate,
                 err.msg);
        goto out;
    }
    MYSQL_RES *res = sc_db_select(&db, sql, &err);
    if (!res) {
        snprintf(why, why_len, "listing the databases: error %u (SQLSTATE %s): %s", err.code,
                 err.sqlstate, err.msg);
        goto out;
    }
    rc = 0;
    MYSQL_ROW row;
    while (rc == 0 && (row = mysql_fetch_row(res))) {
        char name[SC_TENANT_MAX + 16], w[160];
        if (!row[0])
            continue;
        /* LIKE compares without case: the name is matched here exactly. */
        if (sc_tenant_from_db(row[0], prefix, suffix, name, sizeof name) < 0) {
            if (strncmp(row[0], prefix, strlen(prefix)) == 0)
                rc = push(&out->refused, &out->n_refused, row[0]);
            continue;
        }
        rc = sc_tenant_name_ok(names, name, w, sizeof w) ? push(&out->names, &out->n, name)
                                                          : push(&out->refused, &out->n_refused, row[0]);
    }
    mysql_free_result(res);
    sc_db_rollback(&db, &err);
    if (rc)
        snprintf(why, why_len, "out of memory");
out:
    sc_db_close(&db);
    memset(probe, 0, strlen(probe)); /* a password may be in it */
    free(probe);
    if (rc)
        sc_tenant_found_free(out);
    return rc;
}

static void free_list(char **a, size_t n)
{
    for (size_t i = 0; a && i < n; i++)
        free(a[i]);
    free(a);
}

void sc_tenant_found_free(struct sc_tenant_found *f)
{
    free_list(f->names, f->n);
    free_list(f->refused, f->n_refused);
    memset(f, 0, sizeof *f);
}

int sc_tenant_refused_first(char ***seen, size_t *n, const char *db)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*seen)[i], db) == 0)
            return 0;
    return *n < SC_TENANT_REFUSED_LOGGED_MAX && push(seen, n, db) == 0;
}

int sc_tenant_names_all(const struct sc_config *cfg, char ***names, size_t *n)
{
    *names = NULL;
    *n = 0;
    if (!cfg->tenants.discover) {
        for (size_t i = 0; i < cfg->tenants.n_list; i++)
            if (push(names, n, cfg->tenants.list[i])) {
                sc_tenant_names_free(*names, *n);
                fprintf(stderr, "sidecar: out of memory\n");
                return -1;
            }
        return 0;
    }
    regex_t re;
    char why[768];
    if (sc_tenant_names_compile(cfg->tenants.names, &re, why, sizeof why)) {
        fprintf(stderr, "sidecar: tenants.names: %s\n", why);
        return -1;
    }
    struct sc_tenant_found f;
    int rc = sc_tenant_discover(cfg, &re, &f, why, sizeof why);
    regfree(&re);
    if (rc) {
        fprintf(stderr, "sidecar: tenants.discover: %s\n", why);
        return -1;
    }
    for (size_t i = 0; i < f.n_refused; i++)
        fprintf(stderr, "sidecar: tenants.discover: database %s ignored: its tenant part is not a "
                "name tenants.names accepts\n", f.refused[i]);
    *names = f.names;
    *n = f.n;
    free_list(f.refused, f.n_refused);
    return 0;
}

void sc_tenant_names_free(char **names, size_t n)
{
    free_list(names, n);
}
