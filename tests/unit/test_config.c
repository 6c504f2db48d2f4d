/* Configuration: defaults, every error names its key by path, env overrides. */
#include <stdlib.h>
#include <string.h>

#include "sidecar/config.h"
#include "sidecar/url.h"
#include "tap.h"

#define BASE_AMQP "\"amqp\":{\"url\":\"amqp://guest:guest@127.0.0.1:5672/%2f\"}"
#define BASE_MYSQL "\"mysql\":{\"url\":\"mysql://u:p@127.0.0.1:3306/app\"}"
#define CONSUMER "{\"name\":\"np\",\"handler\":\"x.so\"}"

static int parse(const char *text, struct sc_config *c, char *err, int use_env)
{
    return sc_config_parse(text, strlen(text), use_env, c, err, 512);
}

static void refused(const char *text, const char *want, const char *label)
{
    struct sc_config c;
    char err[512] = "";
    int rc = parse(text, &c, err, 0);
    ok(rc != 0 && strstr(err, want) != NULL, "%s (error: %s)", label, err);
    if (rc == 0)
        sc_config_free(&c);
}

int main(void)
{
    struct sc_config c;
    char err[512] = "";
    const char *full = "{" BASE_AMQP "," BASE_MYSQL ",\"http\":{\"listen\":\"127.0.0.1:9000\"},"
        "\"consumers\":[{\"name\":\"notification-planner\",\"queue\":\"q1\","
        "\"bindings\":[{\"exchange\":\"orders\",\"routing_key\":\"ORDER_ACCEPTED\"}],"
        "\"handler\":\"h.so\",\"handler_config\":{\"k\":[1]},\"prefetch\":10,\"batch_max\":4,"
        "\"workers\":2,\"max_attempts\":7,\"retry_delays_ms\":[10,20],\"dead_letter_queue\":\"dlq\"}],"
        "\"relay\":{\"worker_id\":\"relay-1\",\"exchange\":\"orders\",\"batch\":50}}";
    ok(parse(full, &c, err, 0) == 0, "full config parses (%s)", err);
    is_str(c.http_listen, "127.0.0.1:9000", "http.listen");
    is_int(c.n_consumers, 1, "one consumer");
    is_str(c.consumers[0].queue, "q1", "queue");
    is_int(c.consumers[0].n_bindings, 1, "one binding");
    is_str(c.consumers[0].bindings[0].routing_key, "ORDER_ACCEPTED", "binding routing key");
    is_str(c.consumers[0].handler_config, "{\"k\":[1]}", "handler_config kept as JSON text");
    is_int(c.consumers[0].prefetch, 10, "prefetch");
    is_int(c.consumers[0].workers, 2, "workers");
    is_int(c.consumers[0].n_retry_delays, 2, "two retry delays");
    is_int(c.consumers[0].retry_delays_ms[1], 20, "second retry delay");
    is_str(c.consumers[0].dead_letter_queue, "dlq", "dead_letter_queue");
    ok(c.relay.present, "relay present");
    is_int(c.relay.batch, 50, "relay.batch");
    is_int(c.relay.lease_ms, 30000, "relay.lease_ms default");
    sc_config_free(&c);

    ok(parse("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[" CONSUMER "]}", &c, err, 0) == 0, "minimal config parses");
    is_str(c.consumers[0].queue, "np", "queue defaults to the name");
    is_str(c.consumers[0].dead_letter_queue, "np.dlq", "dead_letter_queue defaults to queue.dlq");
    is_int(c.consumers[0].prefetch, 256, "prefetch default");
    is_int(c.consumers[0].max_attempts, 5, "max_attempts default");
    is_int(c.consumers[0].n_retry_delays, 3, "retry_delays_ms default has three steps");
    is_str(c.consumers[0].queue_type, "classic", "queue_type default");
    is_int(c.amqp_heartbeat_s, 30, "heartbeat default");
    is_str(c.http_listen, "127.0.0.1:9464", "http.listen default");
    ok(!c.relay.present, "relay absent");
    sc_config_free(&c);

    refused("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"name\":\"np\",\"handler\":\"x.so\",\"prefetchh\":1}]}",
            "consumers[0].prefetchh: unknown key", "unknown key named by path");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"name\":\"np\",\"handler\":\"x.so\",\"prefetch\":\"10\"}]}",
            "consumers[0].prefetch: expected integer, got string", "mistyped key named by path");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"name\":\"np\",\"handler\":\"x.so\",\"prefetch\":0}]}",
            "consumers[0].prefetch: expected an integer from 1", "out of range value");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"handler\":\"x.so\"}]}",
            "consumers[0].name: required key is missing", "missing required key");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[" CONSUMER "," CONSUMER "]}",
            "consumers[1].name", "duplicate consumer name");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"name\":\"np\",\"handler\":\"x.so\",\"bindings\":[{\"exchange\":\"e\"}]}]}",
            "consumers[0].bindings[0].routing_key: required key is missing", "nested array element key");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"name\":\"np\",\"handler\":\"x.so\",\"retry_delays_ms\":[10,\"x\"]}]}",
            "consumers[0].retry_delays_ms[1]: expected integer", "bad array element");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"name\":\"np\",\"handler\":\"x.so\",\"retry_delays_ms\":[]}]}",
            "consumers[0].retry_delays_ms: expected at least one", "empty retry delays");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"name\":\"np\",\"handler\":\"x.so\",\"queue_type\":\"stream\"}]}",
            "consumers[0].queue_type: unsupported value", "unsupported queue type");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"relay\":{\"exchange\":\"o\",\"lease_ms\":1}}",
            "relay.lease_ms", "relay key named");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"amqpp\":{}}", "amqpp: unknown key", "unknown top-level key");
    refused("{\"amqp\":{\"url\":\"amqp://x\",\"heartbeat\":5}," BASE_MYSQL "}", "amqp.heartbeat: unknown key", "unknown nested key");
    refused("{" BASE_MYSQL "}", "amqp: required key is missing", "missing amqp section");
    refused("{\"amqp\":{}," BASE_MYSQL "}", "amqp.url", "missing amqp.url");
    refused("{\"amqp\":{\"url\":\"http://x\"}," BASE_MYSQL "}", "amqp.url: expected an amqp://", "wrong URL scheme");
    refused("{" BASE_AMQP "," BASE_MYSQL ",}", "not valid JSON", "invalid JSON");
    refused("[]", "expected a JSON object", "not an object");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":{}}", "consumers: expected array, got object", "consumers not an array");

    /* Environment overrides. */
    setenv("SIDECAR_MYSQL_URL", "mysql://env:pw@db:3307/x", 1);
    ok(parse("{\"amqp\":{\"url\":\"amqp://a\"},\"mysql\":{}}", &c, err, 1) == 0, "mysql.url from the environment (%s)", err);
    is_str(c.mysql_url, "mysql://env:pw@db:3307/x", "SIDECAR_MYSQL_URL wins");
    sc_config_free(&c);
    unsetenv("SIDECAR_MYSQL_URL");
    FILE *fp = fopen("sc_test_secret_url", "w");
    fputs("amqp://secret:pw@broker:5672/%2f\n", fp);
    fclose(fp);
    setenv("SIDECAR_AMQP_URL_FILE", "sc_test_secret_url", 1);
    ok(parse("{\"amqp\":{\"url\":\"amqp://file\"}," BASE_MYSQL "}", &c, err, 1) == 0, "amqp.url from a _FILE (%s)", err);
    is_str(c.amqp_url, "amqp://secret:pw@broker:5672/%2f", "_FILE content without the newline");
    sc_config_free(&c);
    setenv("SIDECAR_AMQP_URL_FILE", "/nonexistent/file", 1);
    ok(parse("{" BASE_AMQP "," BASE_MYSQL "}", &c, err, 1) != 0 && strstr(err, "SIDECAR_AMQP_URL_FILE"),
       "an unreadable _FILE is named (%s)", err);
    unsetenv("SIDECAR_AMQP_URL_FILE");
    remove("sc_test_secret_url");

    /* mysql:// URLs and redaction. */
    struct sc_mysql_url u;
    ok(sc_mysql_url_parse("mysql://us%40er:p%3Ass@db.local:3307/app", &u, err, sizeof err) == 0, "mysql url parses");
    is_str(u.user, "us@er", "user decoded");
    is_str(u.password, "p:ss", "password decoded");
    is_str(u.host, "db.local", "host");
    is_int(u.port, 3307, "port");
    is_str(u.database, "app", "database");
    sc_mysql_url_free(&u);
    ok(sc_mysql_url_parse("mysql://u@h/app?socket=/run/my.sock", &u, err, sizeof err) == 0, "socket parameter");
    is_str(u.socket, "/run/my.sock", "socket path");
    ok(u.password == NULL && u.port == 3306, "no password, default port");
    sc_mysql_url_free(&u);
    ok(sc_mysql_url_parse("mysql://u:p@h:99999/app", &u, err, sizeof err) != 0, "bad port refused");
    ok(sc_mysql_url_parse("mysql://u:p@h/app?sslmode=x", &u, err, sizeof err) != 0 && strstr(err, "sslmode"), "unknown parameter named");
    char red[256];
    sc_url_redact("amqp://guest:s3cret@127.0.0.1:5672/%2f", red, sizeof red);
    is_str(red, "amqp://guest:***@127.0.0.1:5672/%2f", "password redacted");
    sc_url_redact("mysql://u@h/app", red, sizeof red);
    is_str(red, "mysql://u@h/app", "URL without password unchanged");
    return done();
}
