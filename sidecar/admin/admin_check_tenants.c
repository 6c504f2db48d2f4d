/* `sidecar check` for tenants: every tenant, listed or discovered (or the one
 * named with --tenant) reached through tenants.database_url, its schema
 * checked for what the consumers need. */
#include <stdio.h>
#include <string.h>

#include "admin.h"
#include "consume/held.h"
#include "io/db.h"
#include "io/schema.h"
#include "tenant.h"
#include "tenant_discover.h"

/* One tenant: 0 when its database answers and has the schema, 1 when it
 * cannot be reached or checked, 2 when its schema lacks a table. */
static int check_one(const struct sc_config *cfg, const char *tenant)
{
    char **urls;
    if (sc_tenant_urls(&cfg->tenants, tenant, &urls)) {
        fprintf(stderr, "sidecar: tenant %s: out of memory\n", tenant);
        return 1;
    }
    struct sc_db db;
    struct sc_db_err e = {0};
    int rc = 0;
    if (sc_db_connect_urls(&db, cfg, urls, cfg->tenants.n_database_urls, &e)) {
        fprintf(stderr, "sidecar: tenant %s: mysql: error %u: %s\n", tenant, e.code, e.msg);
        rc = 1;
    } else {
        int parts = SC_SCHEMA_CONSUMER;
        for (size_t i = 0; i < cfg->n_consumers; i++)
            if (sc_held_mode(&cfg->consumers[i]))
                parts |= SC_SCHEMA_HOLD;
        char why[512];
        int schema = sc_schema_check(&db, parts, why, sizeof why, &e);
        if (schema == 1) {
            fprintf(stderr, "sidecar: tenant %s: mysql: %s\n", tenant, why);
            rc = 2;
        } else if (schema < 0) {
            fprintf(stderr, "sidecar: tenant %s: the schema could not be checked: error %u: %s\n",
                    tenant, e.code, e.msg);
            rc = 1;
        } else {
            printf("tenant %s: connected (%s), schema has what the consumers need\n", tenant,
                   db.endpoint);
        }
        sc_db_close(&db);
    }
    sc_tenant_urls_free(urls, cfg->tenants.n_database_urls);
    return rc;
}

int sc_check_tenants(const struct sc_config *cfg, const char *only)
{
    if (!cfg->tenants.present)
        return 0;
    char advice[512];
    if (sc_tenant_silence_advice(cfg, advice, sizeof advice))
        printf("tenants: warning: %s\n", advice);
    if (only)
        return check_one(cfg, only);
    char **names;
    size_t n;
    if (sc_tenant_names_all(cfg, &names, &n))
        return 1;
    if (n == 0) {
        printf(cfg->tenants.discover ? "tenants: tenants.discover found none; check one with --tenant NAME\n"
                                     : "tenants: none listed (tenants.list); check one with --tenant NAME\n");
        return 0;
    }
    int worst = 0;
    for (size_t i = 0; i < n; i++) {
        int rc = check_one(cfg, names[i]);
        if (rc > worst)
            worst = rc;
    }
    sc_tenant_names_free(names, n);
    return worst;
}
