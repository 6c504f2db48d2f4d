/* tenants.discover and tenants.metrics_top: their keys and refusals, the
 * tenant part of a database name, and the top-N tenant series (the ranking
 * and a tenant leaving the top). */
#include <stdlib.h>
#include <string.h>

#include "sidecar/config.h"
#include "sidecar/metrics.h"
#include "sidecar/tenant_discover.h"
#include "tap.h"

#define HEAD "{\"amqp\":{\"url\":\"amqp://guest:guest@127.0.0.1:5672/%2f\"}," \
             "\"mysql\":{\"url\":\"mysql://u:p@127.0.0.1:3306/app\"}," \
             "\"tenants\":{\"key\":\"extension:tenant\"," \
             "\"database_url\":\"mysql://u:secret@db:3306/app_{tenant}\""

static int parse(const char *text, struct sc_config *c, char *err)
{
    return sc_config_parse(text, strlen(text), 0, c, err, 512);
}

static void keys(void)
{
    struct sc_config c;
    char err[512] = "";
    ok(parse(HEAD "}}", &c, err) == 0, "a tenants section without the new keys (%s)", err);
    is_int(c.tenants.discover, 0, "discover defaults to false");
    is_int(c.tenants.discover_ms, 30000, "discover_ms defaults to 30000");
    is_int(c.tenants.metrics_top, 10, "metrics_top defaults to 10");
    sc_config_free(&c);
    ok(parse(HEAD ",\"discover\":true,\"discover_ms\":1000,\"metrics_top\":0}}", &c, err) == 0,
       "discover true, discover_ms 1000, metrics_top 0 (%s)", err);
    is_int(c.tenants.discover, 1, "discover true");
    sc_config_free(&c);
    static const struct {
        const char *text, *want;
    } bad[] = {
        {HEAD ",\"discover\":true,\"list\":[\"a\"]}}", "tenants.discover and tenants.list"},
        {HEAD ",\"discover_ms\":999}}", "tenants.discover_ms"},
        {HEAD ",\"discover_ms\":3600001}}", "tenants.discover_ms"},
        {HEAD ",\"metrics_top\":1001}}", "tenants.metrics_top"},
        {HEAD ",\"metrics_top\":-1}}", "tenants.metrics_top"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = parse(bad[i].text, &c, err);
        ok(rc != 0 && strstr(err, bad[i].want) && !strstr(err, "secret"), "refused naming %s (%s)",
           bad[i].want, err);
        if (rc == 0)
            sc_config_free(&c);
    }
}

static void tenant_part(void)
{
    char out[64];
    is_int(sc_tenant_from_db("app_acme", "app_", "", out, sizeof out), 4, "app_acme: 4 bytes");
    is_str(out, "acme", "app_acme -> acme");
    is_int(sc_tenant_from_db("t_acme_db", "t_", "_db", out, sizeof out), 4, "prefix and suffix");
    is_str(out, "acme", "t_acme_db -> acme");
    is_int(sc_tenant_from_db("app_", "app_", "", out, sizeof out), -1, "an empty part is none");
    is_int(sc_tenant_from_db("APP_acme", "app_", "", out, sizeof out), -1, "the prefix exactly");
    is_int(sc_tenant_from_db("other", "app_", "", out, sizeof out), -1, "another name");
    is_int(sc_tenant_from_db("app_0123456789", "app_", "", out, 8), -1, "a part that does not fit");
}

static void series(void)
{
    struct sc_tenant_series s;
    struct sc_tenant_value top[3];
    sc_tenant_series_init(&s, 2);
    sc_tenant_series_add(&s, "a", 5);
    sc_tenant_series_add(&s, "b", 9);
    sc_tenant_series_add(&s, "c", 7);
    sc_tenant_series_add(&s, "d", 1);
    size_t k = sc_tenant_series_top(&s, top);
    is_int(k, 2, "top 2 of 4");
    ok(k == 2 && strcmp(top[0].name, "b") == 0 && top[0].v == 9 && strcmp(top[1].name, "c") == 0,
       "the two largest, largest first (b 9, c 7)");
    sc_tenant_series_add(&s, "b", -9);
    k = sc_tenant_series_top(&s, top);
    ok(k == 2 && strcmp(top[0].name, "c") == 0 && strcmp(top[1].name, "a") == 0,
       "b at 0 is gone: c, a");
    is_int(s.n, 3, "a tenant at 0 is forgotten (3 kept)");
    struct sc_tenant_value set[3] = {{"x", 3, 100}, {"y", 0, 0}, {"z", 8, 200}};
    sc_tenant_series_set(&s, set, 3);
    k = sc_tenant_series_top(&s, top);
    ok(k == 2 && strcmp(top[0].name, "z") == 0 && top[0].age_ms == 200 && strcmp(top[1].name, "x") == 0,
       "set replaces every value: z, x (the old ones gone)");
    is_int(s.n, 2, "zeros left out of a set");
    s.top_n = 0;
    is_int(sc_tenant_series_top(&s, top), 0, "metrics_top 0: no per-tenant series");
    sc_tenant_series_free(&s);
}

int main(void)
{
    keys();
    tenant_part();
    series();
    return done();
}
