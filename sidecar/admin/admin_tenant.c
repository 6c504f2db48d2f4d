/* Which database an operator command works on: mysql.url's, or a tenant's
 * reached through tenants.database_url. */
#include <stdio.h>
#include <string.h>

#include "admin.h"
#include "io/db.h"
#include "tenant.h"

int sc_admin_tenant_ok(const struct sc_config *cfg, const char *cmd, const char *tenant)
{
    if (!cfg->tenants.present) {
        fprintf(stderr, "sidecar: %s: --tenant needs a tenants section in the config\n", cmd);
        return 2;
    }
    regex_t re;
    char why[256];
    if (sc_tenant_names_compile(cfg->tenants.names, &re, why, sizeof why)) {
        fprintf(stderr, "sidecar: %s: tenants.names: %s\n", cmd, why);
        return 2;
    }
    int good = sc_tenant_name_ok(&re, tenant, why, sizeof why);
    regfree(&re);
    if (!good) {
        fprintf(stderr, "sidecar: %s: --tenant: %s\n", cmd, why);
        return 2;
    }
    return 0;
}

int sc_admin_take_tenant(const struct sc_config *cfg, const char *cmd, int *argc, char **argv,
                         const char **tenant)
{
    *tenant = NULL;
    int out = 0;
    for (int i = 0; i < *argc; i++) {
        if (strcmp(argv[i], "--tenant") != 0) {
            argv[out++] = argv[i];
            continue;
        }
        if (i + 1 >= *argc) {
            fprintf(stderr, "sidecar: %s: --tenant needs a NAME\n", cmd);
            return 2;
        }
        if (*tenant) {
            fprintf(stderr, "sidecar: %s: --tenant given twice\n", cmd);
            return 2;
        }
        *tenant = argv[++i];
    }
    *argc = out;
    return *tenant ? sc_admin_tenant_ok(cfg, cmd, *tenant) : 0;
}

int sc_admin_connect(struct sc_db *db, const struct sc_config *cfg, const char *tenant,
                     struct sc_db_err *e)
{
    if (!tenant)
        return sc_db_connect(db, cfg, e);
    char **urls;
    if (sc_tenant_urls(&cfg->tenants, tenant, &urls)) {
        memset(e, 0, sizeof *e);
        snprintf(e->msg, sizeof e->msg, "out of memory");
        return -1;
    }
    int rc = sc_db_connect_urls(db, cfg, urls, cfg->tenants.n_database_urls, e);
    sc_tenant_urls_free(urls, cfg->tenants.n_database_urls);
    return rc;
}
