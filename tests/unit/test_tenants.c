/* The tenants section: defaults, every refusal naming its key, the env
 * override, the name check and a tenant's URLs; and a delivery's tenant as
 * tenants.key reads it. */
#include <stdlib.h>
#include <string.h>

#include "sidecar/config.h"
#include "sidecar/consume/tenant_key.h"
#include "sidecar/tenant.h"
#include "tap.h"

#define HEAD "{\"amqp\":{\"url\":\"amqp://guest:guest@127.0.0.1:5672/%2f\"}," \
             "\"mysql\":{\"url\":\"mysql://u:p@127.0.0.1:3306/app\"}," \
             "\"consumers\":[{\"name\":\"np\",\"handler\":\"x.so\"}],"
#define URL "\"database_url\":\"mysql://u:secret@db:3306/app_{tenant}\""

static int parse(const char *text, struct sc_config *c, char *err, int use_env)
{
    return sc_config_parse(text, strlen(text), use_env, c, err, 512);
}

static void refused(const char *text, const char *want, const char *label)
{
    struct sc_config c;
    char err[512] = "";
    int rc = parse(text, &c, err, 0);
    ok(rc != 0 && strstr(err, want) != NULL && !strstr(err, "secret"), "%s (error: %s)", label, err);
    if (rc == 0)
        sc_config_free(&c);
}

static amqp_envelope_t envelope(const char *body, const char *header, const char *value)
{
    amqp_envelope_t env;
    memset(&env, 0, sizeof env);
    env.message.body = amqp_cstring_bytes(body);
    env.message.properties._flags = AMQP_BASIC_CONTENT_TYPE_FLAG;
    env.message.properties.content_type = amqp_cstring_bytes("application/cloudevents+json");
    if (header) {
        static amqp_table_entry_t e;
        e.key = amqp_cstring_bytes(header);
        e.value.kind = AMQP_FIELD_KIND_UTF8;
        e.value.value.bytes = amqp_cstring_bytes(value);
        env.message.properties._flags |= AMQP_BASIC_HEADERS_FLAG;
        env.message.properties.headers.num_entries = 1;
        env.message.properties.headers.entries = &e;
    }
    return env;
}

#define EVENT(extra) "{\"specversion\":\"1.0\",\"id\":\"0b6b8a4e-8f6c-4a55-9a57-2b1d1a8d0001\"," \
                     "\"type\":\"T\",\"source\":\"S\",\"subject\":\"acme\"," extra \
                     "\"data\":{\"t\":\"globex\",\"n\":12}}"

static void read_case(const char *key, const char *body, const char *header, const char *value,
                      enum sc_tenant_kind want, const char *want_tenant, const char *label)
{
    struct sc_config c;
    char err[512] = "", text[1024], tenant[SC_TENANT_MAX + 1], why[256];
    snprintf(text, sizeof text, "%s\"tenants\":{\"key\":\"%s\",%s}}", HEAD, key, URL);
    if (parse(text, &c, err, 0)) {
        ok(0, "%s: config (%s)", label, err);
        return;
    }
    regex_t re;
    sc_tenant_names_compile(c.tenants.names, &re, why, sizeof why);
    amqp_envelope_t env = envelope(body, header, value);
    enum sc_tenant_kind got = sc_tenant_read(&c.tenants, &re, &c.consumers[0], &env, tenant, why,
                                             sizeof why);
    ok(got == want && (!want_tenant || strcmp(tenant, want_tenant) == 0),
       "%s (kind %d, tenant \"%s\", why \"%s\")", label, got, tenant, why);
    regfree(&re);
    sc_config_free(&c);
}

int main(void)
{
    struct sc_config c;
    char err[512] = "";
    ok(parse(HEAD "\"tenants\":{\"key\":\"subject\"," URL "}}", &c, err, 0) == 0, "parses (%s)", err);
    ok(c.tenants.present, "tenants present");
    is_str(c.tenants.names, "^[a-z0-9_]{1,48}$", "names default");
    ok(c.tenants.max_connections == 100, "max_connections default 100");
    ok(c.tenants.idle_close_ms == 60000, "idle_close_ms default 60000");
    ok(c.tenants.read_timeout_s == 10, "read_timeout_s default: lock_wait_timeout_s 5 + 5 (got %d)",
       c.tenants.read_timeout_s);
    ok(c.tenants.n_database_urls == 1, "one database URL");
    char **urls;
    ok(sc_tenant_urls(&c.tenants, "acme", &urls) == 0 &&
           strcmp(urls[0], "mysql://u:secret@db:3306/app_acme") == 0,
       "{tenant} replaced in the URL");
    sc_tenant_urls_free(urls, c.tenants.n_database_urls);
    sc_config_free(&c);
    ok(parse(HEAD "\"log\":{\"level\":\"info\"}}", &c, err, 0) == 0 && !c.tenants.present,
       "without a tenants section there are no tenants (%s)", err);
    sc_config_free(&c);

    refused(HEAD "\"tenants\":{" URL "}}", "tenants.key: required", "key required");
    refused(HEAD "\"tenants\":{\"key\":\"subject\"}}", "tenants.database_url", "database_url required");
    refused(HEAD "\"tenants\":{\"key\":\"tenant\"," URL "}}", "tenants.key: \"tenant\" is none of",
            "a key of no kind");
    refused(HEAD "\"tenants\":{\"key\":\"extension:Tenant\"," URL "}}", "tenants.key",
            "an extension name that CloudEvents does not allow");
    refused(HEAD "\"tenants\":{\"key\":\"header:\"," URL "}}", "tenants.key", "an empty header name");
    refused(HEAD "\"tenants\":{\"key\":\"subject\",\"database_url\":\"mysql://u:secret@db/app\"}}",
            "tenants.database_url: the database name must contain {tenant}", "URL without {tenant}");
    refused(HEAD "\"tenants\":{\"key\":\"subject\",\"database_url\":\"mysql://u:secret{tenant}@db/app\"}}",
            "tenants.database_url: the database name must contain {tenant}",
            "{tenant} outside the database name");
    refused(HEAD "\"tenants\":{\"key\":\"subject\",\"database_url\":\"http://db/{tenant}\"}}",
            "tenants.database_url: expected a mysql:// URL", "not a mysql URL");
    refused(HEAD "\"tenants\":{\"key\":\"subject\"," URL ",\"names\":\"([a-z\"}}", "tenants.names",
            "a pattern that does not compile");
    refused(HEAD "\"tenants\":{\"key\":\"subject\"," URL ",\"list\":[\"acme\",\"Bad!\"]}}",
            "tenants.list[1]", "a listed name the pattern refuses");
    refused(HEAD "\"tenants\":{\"key\":\"subject\"," URL ",\"max_connections\":0}}",
            "tenants.max_connections", "zero connections");
    refused(HEAD "\"tenants\":{\"key\":\"subject\"," URL ",\"read_timeout_s\":5}}",
            "tenants.read_timeout_s: 5 must be greater than mysql.lock_wait_timeout_s (5)",
            "a read timeout not above the lock wait");
    refused(HEAD "\"tenants\":{\"key\":\"subject\"," URL ",\"read_timeout_s\":0}}",
            "tenants.read_timeout_s", "a read timeout of 0");
    ok(parse("{\"amqp\":{\"url\":\"amqp://g:g@h/%2f\"},"
             "\"mysql\":{\"url\":\"mysql://u:p@h/a\",\"lock_wait_timeout_s\":20},"
             "\"consumers\":[{\"name\":\"o\",\"handler\":\"x.so\"}],"
             "\"tenants\":{\"key\":\"subject\"," URL "}}", &c, err, 0) == 0 &&
           c.tenants.read_timeout_s == 25,
       "read_timeout_s follows lock_wait_timeout_s 20: 25 (%s)", err);
    sc_config_free(&c);
    ok(parse(HEAD "\"tenants\":{\"key\":\"subject\"," URL ",\"read_timeout_s\":6}}", &c, err, 0) == 0 &&
           c.tenants.read_timeout_s == 6,
       "read_timeout_s 6 above the lock wait 5 accepted (%s)", err);
    sc_config_free(&c);
    {
        char advice[512] = "";
        ok(parse(HEAD "\"tenants\":{\"key\":\"subject\"," URL "}}", &c, err, 0) == 0 &&
               !sc_tenant_silence_advice(&c, advice, sizeof advice),
           "defaults (read 10 + connect 5 under 1.5 x heartbeat 30): no advice (%s)", advice);
        sc_config_free(&c);
        ok(parse(HEAD "\"tenants\":{\"key\":\"subject\"," URL ",\"read_timeout_s\":40}}", &c, err, 0) == 0 &&
               !sc_tenant_silence_advice(&c, advice, sizeof advice),
           "read 40 + connect 5 = 1.5 x heartbeat 30: no advice (%s)", advice);
        sc_config_free(&c);
        ok(parse(HEAD "\"tenants\":{\"key\":\"subject\"," URL ",\"read_timeout_s\":41}}", &c, err, 0) == 0 &&
               sc_tenant_silence_advice(&c, advice, sizeof advice) &&
               strstr(advice, "tenants.read_timeout_s (41) plus mysql.connect_timeout_s (5) exceed 1.5 x "
                              "amqp.heartbeat_s (30)"),
           "read 41 + connect 5 past 1.5 x heartbeat 30: advice naming the keys (%s)", advice);
        sc_config_free(&c);
        advice[0] = 0;
        ok(parse("{\"amqp\":{\"url\":\"amqp://g:g@h/%2f\",\"heartbeat_s\":0},"
                 "\"mysql\":{\"url\":\"mysql://u:p@h/a\"},"
                 "\"consumers\":[{\"name\":\"o\",\"handler\":\"x.so\"}],"
                 "\"tenants\":{\"key\":\"subject\"," URL ",\"read_timeout_s\":600}}", &c, err, 0) == 0 &&
               !sc_tenant_silence_advice(&c, advice, sizeof advice),
           "without heartbeats: no advice (%s)", advice);
        sc_config_free(&c);
        ok(parse("{\"amqp\":{\"url\":\"amqp://g:g@h/%2f\"},"
                 "\"mysql\":{\"url\":\"mysql://u:p@h/a\"},"
                 "\"consumers\":[{\"name\":\"o\",\"handler\":\"x.so\"}]}", &c, err, 0) == 0 &&
               !sc_tenant_silence_advice(&c, advice, sizeof advice),
           "without tenants: no advice (%s)", advice);
        sc_config_free(&c);
    }
    refused(HEAD "\"tenants\":{\"key\":\"subject\"," URL ",\"typo\":1}}", "tenants.typo: unknown key",
            "unknown key");
    ok(parse("{\"amqp\":{\"url\":\"amqp://g:g@h/%2f\"},\"mysql\":{\"url\":\"mysql://u:p@h/a\"},"
             "\"consumers\":[{\"name\":\"o\",\"handler\":\"x.so\",\"ordering\":{\"key\":\"subject\"}}],"
             "\"tenants\":{\"key\":\"subject\"," URL "}}", &c, err, 0) == 0 &&
           c.consumers[0].ordering.tenant_returns,
       "ordering with tenants: accepted, a down tenant's deliveries go round (%s)", err);
    sc_config_free(&c);

    setenv("SIDECAR_TENANTS_DATABASE_URL", "mysql://e:pw@env:3307/t_{tenant}", 1);
    ok(parse(HEAD "\"tenants\":{\"key\":\"subject\"," URL "}}", &c, err, 1) == 0 &&
           strcmp(c.tenants.database_urls[0], "mysql://e:pw@env:3307/t_{tenant}") == 0,
       "SIDECAR_TENANTS_DATABASE_URL overrides database_url (%s)", err);
    sc_config_free(&c);
    setenv("SIDECAR_TENANTS_DATABASE_URL", "mysql://e:pw@env:3307/fixed", 1);
    ok(parse(HEAD "\"tenants\":{\"key\":\"subject\"," URL "}}", &c, err, 1) != 0 &&
           strstr(err, "tenants.database_url") && !strstr(err, "pw"),
       "an override without {tenant} is refused, naming the key, not the password (%s)", err);
    unsetenv("SIDECAR_TENANTS_DATABASE_URL");

    regex_t re;
    char why[256];
    ok(sc_tenant_names_compile("^[a-z0-9_]{1,48}$", &re, why, sizeof why) == 0, "default compiles");
    ok(sc_tenant_name_ok(&re, "acme_1", why, sizeof why), "acme_1 accepted");
    ok(!sc_tenant_name_ok(&re, "Acme", why, sizeof why), "Acme refused by the pattern");
    ok(!sc_tenant_name_ok(&re, "", why, sizeof why), "empty refused");
    regfree(&re);
    ok(sc_tenant_names_compile(".*", &re, why, sizeof why) == 0, "a loose pattern compiles");
    ok(!sc_tenant_name_ok(&re, "a/b", why, sizeof why) && strstr(why, "character"),
       "a / is refused whatever the pattern (%s)", why);
    ok(!sc_tenant_name_ok(&re, "a%2fb", why, sizeof why), "a %% is refused whatever the pattern");
    ok(!sc_tenant_name_ok(&re, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", why, sizeof why),
       "49 bytes refused");
    regfree(&re);

    read_case("subject", EVENT(""), NULL, NULL, SC_TENANT_FOUND, "acme", "subject");
    read_case("data/t", EVENT(""), NULL, NULL, SC_TENANT_FOUND, "globex", "data pointer, string");
    read_case("data/n", EVENT(""), NULL, NULL, SC_TENANT_FOUND, "12", "data pointer, number");
    read_case("data/x", EVENT(""), NULL, NULL, SC_TENANT_REFUSED, NULL, "data pointer to nothing");
    read_case("extension:tenant", EVENT("\"tenant\":\"initech\","), NULL, NULL, SC_TENANT_FOUND,
              "initech", "structured extension");
    read_case("extension:tenant", EVENT(""), "cloudEvents:tenant", "hooli", SC_TENANT_FOUND, "hooli",
              "extension from a cloudEvents: header");
    read_case("extension:tenant", EVENT(""), NULL, NULL, SC_TENANT_REFUSED, NULL, "no extension");
    read_case("header:x-tenant", EVENT(""), "x-tenant", "umbrella", SC_TENANT_FOUND, "umbrella",
              "AMQP header");
    read_case("header:x-tenant", EVENT(""), NULL, NULL, SC_TENANT_REFUSED, NULL, "header missing");
    read_case("header:x-tenant", EVENT(""), "x-tenant", "Bad-Name", SC_TENANT_REFUSED, NULL,
              "a name the pattern refuses");
    read_case("subject", "not json", NULL, NULL, SC_TENANT_OPEN, "",
              "a malformed message is left to the batch, no tenant read from it");
    /* A malformed message's tenant, read for its dead letter only. */
#define NO_SOURCE(extra) "{\"specversion\":\"1.0\",\"id\":\"x\",\"type\":\"T\"," \
                         "\"subject\":\"acme\"," extra "\"data\":{\"t\":\"globex\"}}"
    read_case("subject", NO_SOURCE(""), NULL, NULL, SC_TENANT_OPEN, "acme",
              "malformed: its subject still read for the dead letter");
    read_case("data/t", NO_SOURCE(""), NULL, NULL, SC_TENANT_OPEN, "globex",
              "malformed: its data pointer still read");
    read_case("extension:tenant", NO_SOURCE("\"tenant\":\"initech\","), NULL, NULL,
              SC_TENANT_OPEN, "initech", "malformed: its structured extension still read");
    read_case("extension:tenant", "not json", "cloudEvents:tenant", "hooli", SC_TENANT_OPEN,
              "hooli", "not JSON: the binary mode header still read");
    read_case("extension:tenant", NO_SOURCE("\"tenant\":\"Bad-Name\","), NULL, NULL,
              SC_TENANT_OPEN, "", "malformed with a name the pattern refuses: none");
    read_case("data/x", NO_SOURCE(""), NULL, NULL, SC_TENANT_OPEN, "",
              "malformed, the pointer naming nothing: none");
    return done();
}
