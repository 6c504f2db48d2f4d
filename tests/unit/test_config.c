/* Configuration: defaults, every error names its key by path, env overrides. */
#include <stdlib.h>
#include <string.h>

#include "sidecar/config.h"
#include "sidecar/io/db_settings.h"
#include "sidecar/io/url.h"
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
    is_int(c.relay.max_message_bytes, 15 * 1024 * 1024, "relay.max_message_bytes default: under RabbitMQ 4's 16 MiB");
    sc_config_free(&c);

    ok(parse("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[" CONSUMER "]}", &c, err, 0) == 0, "minimal config parses");
    is_str(c.consumers[0].queue, "np", "queue defaults to the name");
    is_str(c.consumers[0].dead_letter_queue, "np.dlq", "dead_letter_queue defaults to queue.dlq");
    is_int(c.consumers[0].prefetch, 256, "prefetch default");
    is_int(c.consumers[0].max_attempts, 5, "max_attempts default");
    is_int(c.consumers[0].n_retry_delays, 3, "retry_delays_ms default has three steps");
    is_str(c.consumers[0].queue_type, "classic", "queue_type default");
    is_int(c.amqp_heartbeat_s, 30, "heartbeat default");
    ok(c.http_listen == NULL, "http.listen left out: NULL, each command picks its own default");
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
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"relay\":{\"exchange\":\"o\",\"max_message_bytes\":1023}}",
            "relay.max_message_bytes: expected an integer from 1024 to 536870912",
            "relay.max_message_bytes below 1 KiB refused");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"relay\":{\"exchange\":\"o\",\"max_message_bytes\":536870913}}",
            "relay.max_message_bytes", "relay.max_message_bytes above 512 MiB refused");
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

    /* Several endpoints: one URL or an array; the env takes a comma list. */
    ok(parse("{\"amqp\":{\"url\":[\"amqp://a:1/%2f\",\"amqp://b:2/%2f\",\"amqp://c:3/%2f\"]},"
             "\"mysql\":{\"url\":[\"mysql://u:p@m1:1/app\",\"mysql://u:p@m2:2/app\"]}}", &c, err, 0) == 0,
       "URL arrays parse (%s)", err);
    is_int(c.n_amqp_urls, 3, "three amqp nodes");
    is_str(c.amqp_urls[2], "amqp://c:3/%2f", "third amqp node");
    is_str(c.amqp_url, "amqp://a:1/%2f", "amqp_url is the first node");
    is_int(c.n_mysql_urls, 2, "two mysql nodes");
    is_str(c.mysql_urls[1], "mysql://u:p@m2:2/app", "second mysql node");
    sc_config_free(&c);
    ok(parse("{" BASE_AMQP "," BASE_MYSQL "}", &c, err, 0) == 0 && c.n_amqp_urls == 1 &&
       c.n_mysql_urls == 1 && strcmp(c.mysql_urls[0], c.mysql_url) == 0, "a single URL is a list of one");
    sc_config_free(&c);
    refused("{\"amqp\":{\"url\":[\"amqp://a\",\"http://b\"]}," BASE_MYSQL "}", "amqp.url[1]: expected an amqp://",
            "the bad node of a list is named by index");
    refused("{\"amqp\":{\"url\":[]}," BASE_MYSQL "}", "amqp.url: expected at least one", "empty URL list");
    refused("{\"amqp\":{\"url\":[\"amqp://a\",3]}," BASE_MYSQL "}", "amqp.url[1]: expected a non-empty string",
            "a non-string node");
    refused("{" BASE_AMQP ",\"mysql\":{\"url\":[\"mysql://a/x\",\"mysql://a/x\"]}}", "mysql.url[1]: the same URL as mysql.url[0]",
            "a node listed twice");
    refused("{\"amqp\":{\"url\":[\"amqp://a\",\"amqps://b\"]}," BASE_MYSQL "}", "amqp.tls_ca: required for amqps://",
            "TLS per URL: one amqps:// node needs tls_ca");
    ok(parse("{\"amqp\":{\"url\":[\"amqp://a\",\"amqps://b\"],\"tls_ca\":\"ca.pem\"}," BASE_MYSQL "}", &c, err, 0) == 0,
       "amqp:// and amqps:// nodes mixed, with tls_ca (%s)", err);
    sc_config_free(&c);
    setenv("SIDECAR_MYSQL_URL", " mysql://e:p@n1:1/x, mysql://e:p@n2:2/x,mysql://e:p@n3:3/x ", 1);
    setenv("SIDECAR_AMQP_URL", "amqp://g:g@r1:1/%2f,amqp://g:g@r2:2/%2f", 1);
    ok(parse("{" BASE_AMQP "," BASE_MYSQL "}", &c, err, 1) == 0, "comma lists from the environment (%s)", err);
    is_int(c.n_mysql_urls, 3, "SIDECAR_MYSQL_URL: three nodes");
    is_str(c.mysql_urls[0], "mysql://e:p@n1:1/x", "blanks around a node dropped");
    is_str(c.mysql_urls[2], "mysql://e:p@n3:3/x", "last node");
    is_int(c.n_amqp_urls, 2, "SIDECAR_AMQP_URL: two nodes");
    is_str(c.amqp_url, "amqp://g:g@r1:1/%2f", "amqp_url follows the env list");
    sc_config_free(&c);
    setenv("SIDECAR_AMQP_URL", "amqp://g:g@r1:1/%2f,ftp://x", 1);
    ok(parse("{" BASE_AMQP "," BASE_MYSQL "}", &c, err, 1) != 0 && strstr(err, "amqp.url[1]"),
       "a bad node from the env is named (%s)", err);
    unsetenv("SIDECAR_AMQP_URL");
    unsetenv("SIDECAR_MYSQL_URL");
    fp = fopen("sc_test_node_a", "w");
    fputs("mysql://a:secret-a@n1:1/x\n", fp);
    fclose(fp);
    fp = fopen("sc_test_node_b", "w");
    fputs("mysql://b:secret-b@n2:2/x\nmysql://b:secret-b@n3:3/x\n", fp);
    fclose(fp);
    setenv("SIDECAR_MYSQL_URL_FILE", "sc_test_node_a,sc_test_node_b", 1);
    ok(parse("{" BASE_AMQP "," BASE_MYSQL "}", &c, err, 1) == 0, "one secret file per node (%s)", err);
    is_int(c.n_mysql_urls, 3, "three nodes from two files");
    is_str(c.mysql_urls[0], "mysql://a:secret-a@n1:1/x", "first file's node");
    is_str(c.mysql_urls[2], "mysql://b:secret-b@n3:3/x", "second file's second line");
    sc_config_free(&c);
    setenv("SIDECAR_MYSQL_URL_FILE", "sc_test_node_a,/nonexistent/node", 1);
    ok(parse("{" BASE_AMQP "," BASE_MYSQL "}", &c, err, 1) != 0 && strstr(err, "/nonexistent/node"),
       "the unreadable one of several files is named (%s)", err);
    unsetenv("SIDECAR_MYSQL_URL_FILE");
    remove("sc_test_node_a");
    remove("sc_test_node_b");

    /* Relay settings that cannot work (issue 10 item 10). */
    char longid[200];
    memset(longid, 'w', 129);
    longid[129] = 0;
    char text[600];
    snprintf(text, sizeof text, "{%s,%s,\"relay\":{\"exchange\":\"o\",\"worker_id\":\"%s\"}}", BASE_AMQP, BASE_MYSQL, longid);
    refused(text, "relay.worker_id: longer than 128", "worker_id longer than lease_owner is refused");
    longid[128] = 0;
    snprintf(text, sizeof text, "{%s,%s,\"relay\":{\"exchange\":\"o\",\"worker_id\":\"%s\"}}", BASE_AMQP, BASE_MYSQL, longid);
    ok(parse(text, &c, err, 0) == 0, "worker_id of exactly 128 accepted (%s)", err);
    sc_config_free(&c);
    /* A batch's lease spans the previous batch's confirm wait and its own. */
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"relay\":{\"exchange\":\"o\",\"lease_ms\":5000,\"confirm_timeout_ms\":5000}}",
            "relay.lease_ms: 5000 must be greater than twice relay.confirm_timeout_ms", "lease_ms equal to confirm_timeout_ms refused");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"relay\":{\"exchange\":\"o\",\"lease_ms\":1000,\"confirm_timeout_ms\":4000}}",
            "relay.lease_ms", "lease_ms below confirm_timeout_ms refused");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"relay\":{\"exchange\":\"o\",\"lease_ms\":9000,\"confirm_timeout_ms\":5000}}",
            "relay.lease_ms: 9000 must be greater than twice relay.confirm_timeout_ms (2 x 5000)",
            "a lease longer than one confirm wait but not two is refused");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"relay\":{\"exchange\":\"o\",\"lease_ms\":10000,\"confirm_timeout_ms\":5000}}",
            "relay.lease_ms", "a lease of exactly two confirm waits is refused");
    ok(parse("{" BASE_AMQP "," BASE_MYSQL ",\"relay\":{\"exchange\":\"o\",\"lease_ms\":10001,\"confirm_timeout_ms\":5000}}", &c, err, 0) == 0,
       "a lease just over two confirm waits is accepted (%s)", err);
    sc_config_free(&c);
    ok(parse("{" BASE_AMQP "," BASE_MYSQL ",\"relay\":{\"exchange\":\"o\",\"lease_ms\":1000}}", &c, err, 0) == 0,
       "a short lease alone is accepted (%s)", err);
    is_int(c.relay.confirm_timeout_ms, 333, "confirm_timeout_ms left out: a third of the short lease");
    sc_config_free(&c);
    ok(parse("{" BASE_AMQP "," BASE_MYSQL ",\"relay\":{\"exchange\":\"o\",\"lease_ms\":100}}", &c, err, 0) == 0 &&
       c.relay.confirm_timeout_ms == 33, "the shortest lease gets a 33 ms confirm timeout (%s)", err);
    sc_config_free(&c);
    ok(parse("{" BASE_AMQP "," BASE_MYSQL ",\"relay\":{\"exchange\":\"o\"}}", &c, err, 0) == 0 &&
       c.relay.confirm_timeout_ms == 5000, "default lease keeps the 5 s confirm timeout");
    sc_config_free(&c);

    /* One statement may not hold the broker connection past its heartbeat. */
#define HB(hb, lw) "{\"amqp\":{\"url\":\"amqp://g:g@h:5672/%2f\"" hb "},\"mysql\":{\"url\":\"mysql://u:p@h:3306/app\"" lw "}}"
    refused(HB(",\"heartbeat_s\":5", ",\"lock_wait_timeout_s\":6"),
            "mysql.lock_wait_timeout_s: 6 must not exceed amqp.heartbeat_s (5)",
            "a lock wait longer than the heartbeat is refused, naming both keys");
    refused(HB("", ",\"lock_wait_timeout_s\":3600"), "mysql.lock_wait_timeout_s: 3600",
            "the longest lock wait against the default 30 s heartbeat is refused");
    refused(HB(",\"heartbeat_s\":2", ""), "mysql.lock_wait_timeout_s: 5 must not exceed amqp.heartbeat_s (2)",
            "the default 5 s lock wait against a 2 s heartbeat is refused");
    ok(parse(HB(",\"heartbeat_s\":5", ",\"lock_wait_timeout_s\":5"), &c, err, 0) == 0,
       "a lock wait of one heartbeat interval is accepted (%s)", err);
    sc_config_free(&c);
    ok(parse(HB(",\"heartbeat_s\":0", ",\"lock_wait_timeout_s\":3600"), &c, err, 0) == 0,
       "heartbeats off: any lock wait (%s)", err);
    sc_config_free(&c);
    ok(parse(HB("", ""), &c, err, 0) == 0, "the defaults (30 s heartbeat, 5 s lock wait) are accepted (%s)", err);
    sc_config_free(&c);
#undef HB

    /* Server settings the relay depends on. */
    struct sc_db_settings st;
    char why[400];
    memset(&st, 0, sizeof st);
    strcpy(st.binlog_format, "STATEMENT");
    st.log_bin = 1;
    strcpy(st.isolation, "REPEATABLE-READ");
    ok(sc_db_settings_unsafe(&st, why, sizeof why) != 0 && strstr(why, "binlog_format=STATEMENT"),
       "statement-based binlog refused (%s)", why);
    st.log_bin = 0;
    ok(sc_db_settings_unsafe(&st, why, sizeof why) == 0, "STATEMENT without a binary log is harmless");
    strcpy(st.binlog_format, "MIXED");
    st.wsrep_on = 1;
    strcpy(st.cluster_status, "Primary");
    st.cluster_size = 3;
    ok(sc_db_settings_unsafe(&st, why, sizeof why) != 0 && strstr(why, "binlog_format=MIXED with wsrep_on=ON"),
       "Galera without ROW refused (%s)", why);
    strcpy(st.binlog_format, "ROW");
    ok(sc_db_settings_unsafe(&st, why, sizeof why) == 0, "Galera with ROW in the primary component is safe");
    strcpy(st.cluster_status, "non-Primary");
    ok(sc_db_settings_unsafe(&st, why, sizeof why) != 0 && strstr(why, "non-Primary"), "a non-primary node refused");
    st.cluster_size = 1;
    strcpy(st.cluster_status, "Primary");
    sc_db_settings_caution(&st, why, sizeof why);
    ok(strstr(why, "wsrep_cluster_size=1") != NULL, "one-node cluster cautioned (%s)", why);
    sc_db_settings_describe(&st, why, sizeof why);
    ok(strstr(why, "binlog_format=ROW") && strstr(why, "wsrep_cluster_size=1"), "settings described (%s)", why);

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
    sc_url_endpoint("mysql://u:p%40x@db.local:3307/app?socket=/s", red, sizeof red);
    is_str(red, "db.local:3307", "endpoint without credentials");
    sc_url_endpoint("amqps://g:g@127.0.0.1:5671/%2f", red, sizeof red);
    is_str(red, "127.0.0.1:5671", "amqp endpoint");
    sc_url_endpoint("mysql://u@/app?socket=/run/my.sock", red, sizeof red);
    is_str(red, "/run/my.sock", "socket endpoint");
    /* Envelope modes. */
    ok(parse("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[" CONSUMER "]}", &c, err, 0) == 0 &&
           strcmp(c.consumers[0].envelope, "cloudevents") == 0 && !c.consumers[0].plain_source &&
           !c.consumers[0].plain_subject,
       "envelope defaults to cloudevents, no plain_source or plain_subject");
    sc_config_free(&c);
    ok(parse("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"name\":\"p\",\"handler\":\"x.so\","
             "\"envelope\":\"plain\",\"plain_source\":\"shop\",\"plain_subject\":\"/order/id~1x\"}]}",
             &c, err, 0) == 0 &&
           strcmp(c.consumers[0].envelope, "plain") == 0 &&
           strcmp(c.consumers[0].plain_source, "shop") == 0 &&
           strcmp(c.consumers[0].plain_subject, "/order/id~1x") == 0,
       "envelope plain with plain_source and plain_subject (%s)", err);
    sc_config_free(&c);
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"name\":\"p\",\"handler\":\"x.so\","
            "\"envelope\":\"binary\"}]}", "consumers[0].envelope", "envelope binary is no choice");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"name\":\"p\",\"handler\":\"x.so\","
            "\"plain_subject\":\"/a\"}]}", "consumers[0].plain_subject: only with",
            "plain_subject without envelope plain");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"name\":\"p\",\"handler\":\"x.so\","
            "\"envelope\":\"plain\",\"plain_subject\":\"order/id\"}]}",
            "consumers[0].plain_subject: \"order/id\" is not an RFC 6901",
            "plain_subject without its leading /");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"name\":\"p\",\"handler\":\"x.so\","
            "\"envelope\":\"plain\",\"plain_subject\":\"/a~2\"}]}", "consumers[0].plain_subject",
            "plain_subject with a bad ~ escape");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"name\":\"p\",\"handler\":\"x.so\","
            "\"envelope\":\"plain\",\"plain_source\":\"\"}]}", "consumers[0].plain_source: expected a non-empty string",
            "an empty plain_source");
    /* inspect_effects: every name a plain identifier, refused by its key. */
#define EFFECT(x) "{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"name\":\"p\",\"handler\":\"x.so\"," \
                  "\"inspect_effects\":[" x "]}]}"
    ok(parse(EFFECT("{\"table\":\"notification_job\",\"columns\":[\"order_id\",\"status\"]},"
                    "{\"table\":\"T_2\",\"event_id_column\":\"ev\",\"columns\":\"n\"}"), &c, err, 0) == 0 &&
           c.consumers[0].n_inspect_effects == 2 &&
           strcmp(c.consumers[0].inspect_effects[0].event_id_column, "event_id") == 0 &&
           c.consumers[0].inspect_effects[0].n_columns == 2 &&
           strcmp(c.consumers[0].inspect_effects[1].event_id_column, "ev") == 0 &&
           strcmp(c.consumers[0].inspect_effects[1].columns[0], "n") == 0,
       "inspect_effects: event_id_column defaults to event_id, columns one or many (%s)", err);
    sc_config_free(&c);
    ok(parse("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[" CONSUMER "]}", &c, err, 0) == 0 &&
           c.consumers[0].n_inspect_effects == 0, "no inspect_effects: none");
    sc_config_free(&c);
    refused(EFFECT("{\"table\":\"a`b\",\"columns\":[\"x\"]}"),
            "consumers[0].inspect_effects[0].table: \"a`b\" is not a plain SQL identifier", "a backtick in a table");
    refused(EFFECT("{\"table\":\"t\",\"columns\":[\"x\",\"y) FROM mysql.user -- \"]}"),
            "consumers[0].inspect_effects[0].columns[1]: ", "SQL in a column name");
    refused(EFFECT("{\"table\":\"t\",\"event_id_column\":\"a b\",\"columns\":[\"x\"]}"),
            "consumers[0].inspect_effects[0].event_id_column: ", "a space in event_id_column");
    refused(EFFECT("{\"table\":\"app.t\",\"columns\":[\"x\"]}"),
            "consumers[0].inspect_effects[0].table: ", "a qualified table name");
    refused(EFFECT("{\"table\":\"123\",\"columns\":[\"x\"]}"),
            "consumers[0].inspect_effects[0].table: ", "a table name of digits only");
    refused(EFFECT("{\"table\":\"t\\u00e9\",\"columns\":[\"x\"]}"),
            "consumers[0].inspect_effects[0].table: ", "a non-ASCII letter");
    refused(EFFECT("{\"table\":\"t1234567890123456789012345678901234567890123456789012345678901234\",\"columns\":[\"x\"]}"),
            "consumers[0].inspect_effects[0].table: ", "a 65-character table name");
    refused(EFFECT("{\"table\":\"t\"}"), "consumers[0].inspect_effects[0].columns: required",
            "columns is required");
    refused(EFFECT("{\"table\":\"t\",\"columns\":[],\"x\":1}"), "consumers[0].inspect_effects[0].x: unknown key",
            "an unknown key in an effect");
#undef EFFECT
    /* Per-key order. */
    ok(parse("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[" CONSUMER "]}", &c, err, 0) == 0 &&
           !c.consumers[0].ordering.present,
       "no ordering section: no order kept");
    sc_config_free(&c);
    ok(parse("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"name\":\"o\",\"handler\":\"x.so\","
             "\"ordering\":{\"key\":\"subject\",\"on_dead_letter\":\"skip\"}}]}", &c, err, 0) == 0 &&
           c.consumers[0].ordering.present && strcmp(c.consumers[0].ordering.key, "subject") == 0 &&
           c.consumers[0].ordering.partitions == 1,
       "ordering by subject: one partition (%s)", err);
    sc_config_free(&c);
    ok(parse("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"name\":\"o\",\"handler\":\"x.so\","
             "\"workers\":2,\"ordering\":{\"key\":\"data/order/id\",\"partitions\":4,"
             "\"on_dead_letter\":\"skip\"}}]}", &c, err, 0) == 0 &&
           c.consumers[0].ordering.partitions == 4 &&
           strcmp(c.consumers[0].ordering.on_dead_letter, "skip") == 0,
       "ordering by a data pointer, 4 partitions, skip (%s)", err);
    sc_config_free(&c);
    ok(parse("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"name\":\"o\",\"handler\":\"x.so\","
             "\"ordering\":{\"key\":\"subject\"}}]}", &c, err, 0) == 0 &&
           strcmp(c.consumers[0].ordering.on_dead_letter, "hold") == 0,
       "on_dead_letter is hold by default (%s)", err);
    sc_config_free(&c);
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"name\":\"o\",\"handler\":\"x.so\","
            "\"ordering\":{\"key\":\"aggregate\"}}]}",
            "consumers[0].ordering.key: \"aggregate\" is neither", "an ordering key of no kind");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"name\":\"o\",\"handler\":\"x.so\","
            "\"ordering\":{\"key\":\"data/a~2\"}}]}", "consumers[0].ordering.key",
            "an ordering pointer with a bad ~ escape");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"name\":\"o\",\"handler\":\"x.so\","
            "\"ordering\":{}}]}", "consumers[0].ordering.key: required", "an ordering without key");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"name\":\"o\",\"handler\":\"x.so\","
            "\"ordering\":{\"key\":\"subject\",\"on_dead_letter\":\"drop\"}}]}",
            "consumers[0].ordering.on_dead_letter", "on_dead_letter neither hold nor skip");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"name\":\"o\",\"handler\":\"x.so\","
            "\"ordering\":{\"key\":\"subject\",\"partitions\":0}}]}",
            "consumers[0].ordering.partitions", "zero partitions");
    refused("{" BASE_AMQP "," BASE_MYSQL ",\"consumers\":[{\"name\":\"o\",\"handler\":\"x.so\","
            "\"workers\":3,\"ordering\":{\"key\":\"subject\",\"partitions\":2,"
            "\"on_dead_letter\":\"skip\"}}]}",
            "consumers[0].workers: 3 is more than ordering.partitions (2)",
            "more workers than partition queues");
    /* the binlog source reads one server's binary log: one node only */
    refused("{" BASE_AMQP ",\"mysql\":{\"url\":[\"mysql://u:p@db1:3306/app\",\"mysql://u:p@db2:3306/app\"]},"
            "\"relay\":{\"exchange\":\"o\",\"source\":\"binlog\"}}",
            "mysql.url: 2 nodes with relay.source \"binlog\"", "a multi-node mysql.url in binlog mode, named");
    {
        struct sc_config bc;
        char berr[512] = "";
        int rc = parse("{" BASE_AMQP ",\"mysql\":{\"url\":[\"mysql://u:p@db1:3306/app\",\"mysql://u:p@db2:3306/app\"]},"
                       "\"relay\":{\"exchange\":\"o\"}}", &bc, berr, 0);
        ok(rc == 0, "two nodes with the poll source are accepted (%s)", berr);
        if (rc == 0)
            sc_config_free(&bc);
        berr[0] = 0;
        setenv("SIDECAR_MYSQL_URL", "mysql://u:p@db1:3306/app,mysql://u:p@db2:3306/app", 1);
        rc = parse("{" BASE_AMQP "," BASE_MYSQL ",\"relay\":{\"exchange\":\"o\",\"source\":\"binlog\"}}", &bc, berr, 1);
        ok(rc != 0 && strstr(berr, "mysql.url: 2 nodes"), "and SIDECAR_MYSQL_URL with two nodes too (%s)", berr);
        if (rc == 0)
            sc_config_free(&bc);
        unsetenv("SIDECAR_MYSQL_URL");
        berr[0] = 0;
        rc = parse("{" BASE_AMQP "," BASE_MYSQL ",\"relay\":{\"exchange\":\"o\",\"source\":\"binlog\"}}", &bc, berr, 0);
        ok(rc == 0, "one node in binlog mode is accepted (%s)", berr);
        if (rc == 0)
            sc_config_free(&bc);
    }
    return done();
}
