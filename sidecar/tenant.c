/* Tenant names and the URLs of their databases. */
#include "tenant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sc_tenant_names_compile(const char *pattern, regex_t *re, char *why, size_t why_len)
{
    int rc = regcomp(re, pattern, REG_EXTENDED | REG_NOSUB);
    if (rc == 0)
        return 0;
    char msg[128];
    regerror(rc, re, msg, sizeof msg);
    snprintf(why, why_len, "not a POSIX extended regular expression: %s", msg);
    return -1;
}

int sc_tenant_name_ok(const regex_t *re, const char *name, char *why, size_t why_len)
{
    size_t n = strlen(name);
    if (n == 0 || n > SC_TENANT_MAX) {
        snprintf(why, why_len, "tenant name of %zu bytes (1 to %d)", n, SC_TENANT_MAX);
        return 0;
    }
    /* Whatever tenants.names allows, the name goes into a database name in
     * a URL: nothing that could end the path or be decoded there. */
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-')) {
            snprintf(why, why_len, "tenant name \"%.48s\" has a character other than letters, "
                     "digits, _ and -", name);
            return 0;
        }
    if (regexec(re, name, 0, NULL, 0) != 0) {
        snprintf(why, why_len, "tenant name \"%.48s\" does not match tenants.names", name);
        return 0;
    }
    return 1;
}

/* url with every {tenant} replaced by tenant, or NULL (out of memory). */
static char *substitute(const char *url, const char *tenant)
{
    size_t ph = strlen(SC_TENANT_PLACEHOLDER), tl = strlen(tenant), count = 0;
    for (const char *p = strstr(url, SC_TENANT_PLACEHOLDER); p; p = strstr(p + ph, SC_TENANT_PLACEHOLDER))
        count++;
    char *out = malloc(strlen(url) + count * tl + 1), *o = out;
    if (!out)
        return NULL;
    for (const char *p = url;;) {
        const char *q = strstr(p, SC_TENANT_PLACEHOLDER);
        size_t n = q ? (size_t)(q - p) : strlen(p);
        memcpy(o, p, n);
        o += n;
        if (!q)
            break;
        memcpy(o, tenant, tl);
        o += tl;
        p = q + ph;
    }
    *o = 0;
    return out;
}

int sc_tenant_urls(const struct sc_tenants_config *t, const char *tenant, char ***urls)
{
    char **list = calloc(t->n_database_urls ? t->n_database_urls : 1, sizeof *list);
    if (!list)
        return -1;
    for (size_t i = 0; i < t->n_database_urls; i++)
        if (!(list[i] = substitute(t->database_urls[i], tenant))) {
            sc_tenant_urls_free(list, i);
            return -1;
        }
    *urls = list;
    return 0;
}

void sc_tenant_urls_free(char **urls, size_t n)
{
    for (size_t i = 0; urls && i < n; i++) {
        memset(urls[i], 0, strlen(urls[i])); /* a password may be in it */
        free(urls[i]);
    }
    free(urls);
}

int sc_tenant_url_check(const char *url, const char *key, char *why, size_t why_len)
{
    /* The database name is the path after the authority, which ends at the
     * first / behind the last @ (a password's own @ and / are
     * percent-encoded). */
    const char *auth = strncmp(url, "mysql://", 8) == 0 ? url + 8 : url;
    const char *at = strrchr(auth, '@');
    const char *path = strchr(at ? at : auth, '/');
    const char *q = path ? strchr(path, '?') : NULL;
    const char *ph = path ? strstr(path, SC_TENANT_PLACEHOLDER) : NULL;
    if (!ph || (q && ph > q)) {
        snprintf(why, why_len, "%s: the database name must contain %s "
                 "(mysql://user@host:3306/app_{tenant})", key, SC_TENANT_PLACEHOLDER);
        return -1;
    }
    return 0;
}

int sc_tenant_silence_advice(const struct sc_config *cfg, char *out, size_t len)
{
    int silent = cfg->tenants.read_timeout_s + cfg->mysql_connect_timeout_s;
    if (!cfg->tenants.present || cfg->amqp_heartbeat_s <= 0 || 2 * silent <= 3 * cfg->amqp_heartbeat_s)
        return 0;
    snprintf(out, len, "tenants.read_timeout_s (%d) plus mysql.connect_timeout_s (%d) exceed 1.5 x "
             "amqp.heartbeat_s (%d): a tenant whose server goes silent can hold the broker "
             "connection past its heartbeat, and the broker then closes it (redeliveries, events "
             "published again); lower them or raise amqp.heartbeat_s",
             cfg->tenants.read_timeout_s, cfg->mysql_connect_timeout_s, cfg->amqp_heartbeat_s);
    return 1;
}
