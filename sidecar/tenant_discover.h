/* Tenant discovery (tenants.discover): the tenants are the databases on the
 * server of the first tenants.database_url node whose name matches the
 * URL's database name, {tenant} standing for the name, that hold an
 * outbox_event table the user can see. One listing, shared by the relay
 * (refreshed) and the tools (once). */
#ifndef SC_TENANT_DISCOVER_H
#define SC_TENANT_DISCOVER_H

#include <regex.h>
#include <stddef.h>

#include "config.h"

struct sc_tenant_found {
    char **names;        /* accepted tenant names, sorted */
    size_t n;
    char **refused;      /* database names matching whose tenant part the names refuse */
    size_t n_refused;
};

/* Lists the tenants now. Returns 0 with *out filled (free with
 * sc_tenant_found_free), or -1 with why (connect or query failed, out of
 * memory; never the URL). */
int sc_tenant_discover(const struct sc_config *cfg, const regex_t *names,
                       struct sc_tenant_found *out, char *why, size_t why_len);
void sc_tenant_found_free(struct sc_tenant_found *f);

/* The most refused database names a listing's user remembers as logged:
 * past it the rest are not logged (the set must not grow with every
 * database). */
#define SC_TENANT_REFUSED_LOGGED_MAX 1024

/* For logging a refused database name once: 1 when db is not in *seen
 * (n names) and was added to it (log it now), 0 when it is there already
 * or cannot be added (full, out of memory). Free with
 * sc_tenant_names_free. */
int sc_tenant_refused_first(char ***seen, size_t *n, const char *db);

/* The tenant part of database name db, given the pattern's prefix and
 * suffix around {tenant} (pure, for the tests). Returns its length with
 * the part in out, or -1 when db does not match or the part is empty or
 * does not fit. */
int sc_tenant_from_db(const char *db, const char *prefix, const char *suffix, char *out,
                      size_t out_len);

/* The tenants the tools go over: tenants.list, or the discovered ones
 * (refused names reported on stderr). Returns 0 with *names, *n (free
 * with sc_tenant_names_free), or -1 with the reason printed. */
int sc_tenant_names_all(const struct sc_config *cfg, char ***names, size_t *n);
void sc_tenant_names_free(char **names, size_t n);

#endif
