/* Tenant names and their databases (the `tenants` section): which names are
 * accepted, and the URLs of a tenant's database. Shared by the consumer, the
 * relay and the tools. */
#ifndef SC_TENANT_H
#define SC_TENANT_H

#include <regex.h>
#include <stddef.h>

#include "config.h"

/* What stands in tenants.database_url for the tenant's name. */
#define SC_TENANT_PLACEHOLDER "{tenant}"

/* Compiles tenants.names. Returns 0, or -1 with why. */
int sc_tenant_names_compile(const char *pattern, regex_t *re, char *why, size_t why_len);

/* 1 when name is a tenant: 1 to SC_TENANT_MAX bytes of letters, digits, _
 * and - (it becomes part of a database name inside a URL), and the pattern
 * matches it; 0 with why otherwise. */
int sc_tenant_name_ok(const regex_t *re, const char *name, char *why, size_t why_len);

/* The nodes of tenant's database: every tenants.database_url with each
 * {tenant} replaced. Returns 0 with *urls (free with sc_tenant_urls_free),
 * or -1 (out of memory). */
int sc_tenant_urls(const struct sc_tenants_config *t, const char *tenant, char ***urls);
void sc_tenant_urls_free(char **urls, size_t n);

/* Checks tenants.database_url's URLs: each has {tenant} in its database
 * name. Returns 0, or -1 with why naming the key (never the URL). */
int sc_tenant_url_check(const char *url, const char *key, char *why, size_t why_len);

/* A tenant whose server goes silent holds its worker, and the broker
 * connection's heartbeats, for up to a connect and a read; the broker drops
 * a connection silent for about two intervals. Returns 1 with the advice in
 * out when tenants.read_timeout_s + mysql.connect_timeout_s exceed one and
 * a half amqp.heartbeat_s (a lost broker connection: redeliveries, and the
 * relay's unconfirmed events published again), else 0. */
int sc_tenant_silence_advice(const struct sc_config *cfg, char *out, size_t len);

#endif
