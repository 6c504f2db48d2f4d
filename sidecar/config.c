#include "config.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/url.h"
#include "tenant.h"

#include "envelope/json_span.h"

/* The configuration is described by tables of fields (key, type, where it
 * goes, default, bounds, help). The tables are the one source of truth: one
 * walker parses and applies defaults (for absent sections too), every error
 * names the key by its full path, another walker frees, and `sidecar help
 * config` prints the reference (docs/configuration.md) from them. */

enum field_type {
    F_STR,      /* string */
    F_INT,      /* integer within [min, max] */
    F_JSON,     /* any JSON value, kept as compact text */
    F_OBJ,      /* nested object, described by sub */
    F_INT_ARR,  /* array of integers within [min, max] */
    F_OBJ_ARR,  /* array of objects, each described by sub */
    F_STR_LIST, /* one string or an array of strings, kept as char ** at off */
};

struct table;

struct field {
    const char *key;
    enum field_type type;
    size_t off;          /* member offset in the struct being filled */
    int required;
    long long min, max;  /* F_INT, F_INT_ARR */
    const char *def_str; /* F_STR, F_JSON default */
    long long def_int;   /* F_INT default */
    const char *const *choices; /* F_STR: allowed values, NULL-terminated */
    const struct table *sub;    /* F_OBJ, F_OBJ_ARR */
    size_t count_off;    /* F_INT_ARR, F_OBJ_ARR: offset of the size_t count */
    const int *def_ints; /* F_INT_ARR default, def_n elements */
    size_t def_n;
    const char *def_doc; /* the default as the reference shows it, when not def_str/def_int */
    const char *help;    /* one line for the reference */
};

struct table {
    const struct field *fields;
    size_t n;
    size_t elem_size;    /* for F_OBJ_ARR elements */
};

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define CFG(m) offsetof(struct sc_config, m)
#define CON(m) offsetof(struct sc_consumer_config, m)
#define REL(m) offsetof(struct sc_relay_config, m)
#define BND(m) offsetof(struct sc_binding, m)
#define TEN(m) offsetof(struct sc_tenants_config, m)
#define EFF(m) offsetof(struct sc_inspect_effect, m)
#define ORD(m) offsetof(struct sc_ordering_config, m)

/* tenants.read_timeout_s left out: mysql.lock_wait_timeout_s plus this. */
#define TENANT_READ_MARGIN_S 5

static const char *const queue_types[] = {"classic", "quorum", NULL};
static const char *const envelopes[] = {"cloudevents", "plain", NULL};
static const char *const content_modes[] = {"structured", "binary", NULL};
static const char *const orderings[] = {"none", "per_aggregate", NULL};
static const char *const relay_sources[] = {"poll", "binlog", NULL};
static const char *const log_levels[] = {"debug", "info", "warn", "error", NULL};
static const int default_retry_delays[] = {1000, 5000, 30000};
static const char *const on_dead_letters[] = {"hold", "skip", NULL};

static const struct field amqp_fields[] = {
    {.key = "url", .type = F_STR_LIST, .off = CFG(amqp_urls), .count_off = CFG(n_amqp_urls), .def_doc = "required",
     .help = "`amqp://user:pass@host:port/vhost` (vhost `/` is `%2f`), or an array of them: cluster nodes, tried in turn ([scale.md](scale.md))"},
    {.key = "heartbeat_s", .type = F_INT, .off = CFG(amqp_heartbeat_s), .min = 0, .max = 3600, .def_int = 30,
     .help = "AMQP heartbeat (0 disables); sent during long batches too"},
    {.key = "connect_timeout_ms", .type = F_INT, .off = CFG(amqp_connect_timeout_ms), .min = 100,
     .max = 600000, .def_int = 5000,
     .help = "TCP connect and handshake bound"},
    {.key = "tls_ca", .type = F_STR, .off = CFG(amqp_tls_ca),
     .help = "CA file for `amqps://` (required there)"},
    {.key = "tls_cert", .type = F_STR, .off = CFG(amqp_tls_cert),
     .help = "client certificate (with `tls_key`)"},
    {.key = "tls_key", .type = F_STR, .off = CFG(amqp_tls_key),
     .help = "client key (with `tls_cert`)"},
    {.key = "tls_verify_hostname", .type = F_INT, .off = CFG(amqp_tls_verify_hostname), .min = 0,
     .max = 1, .def_int = 1,
     .help = "check the broker certificate names the URL's host"},
};
static const struct field mysql_fields[] = {
    {.key = "url", .type = F_STR_LIST, .off = CFG(mysql_urls), .count_off = CFG(n_mysql_urls), .def_doc = "required",
     .help = "`mysql://user:pass@host:port/database[?socket=/path]` (user and password percent-encoded), or an array of them (cluster nodes, tried in turn)"},
    {.key = "lock_wait_timeout_s", .type = F_INT, .off = CFG(mysql_lock_wait_timeout_s), .min = 1,
     .max = 3600, .def_int = 5,
     .help = "session `innodb_lock_wait_timeout` and `lock_wait_timeout` (metadata locks), at most `amqp.heartbeat_s`; reads time out at this + 30 s (a tenant's session: `tenants.read_timeout_s`)"},
    {.key = "connect_timeout_s", .type = F_INT, .off = CFG(mysql_connect_timeout_s), .min = 1,
     .max = 600, .def_int = 5,
     .help = "connect bound"},
    {.key = "tls_ca", .type = F_STR, .off = CFG(mysql_tls_ca),
     .help = "turns TLS on; the server certificate is verified against it"},
    {.key = "tls_cert", .type = F_STR, .off = CFG(mysql_tls_cert),
     .help = "client certificate (with `tls_key`)"},
    {.key = "tls_key", .type = F_STR, .off = CFG(mysql_tls_key),
     .help = "client key (with `tls_cert`)"},
    {.key = "allow_unsafe_durability", .type = F_INT, .off = CFG(mysql_allow_unsafe_durability),
     .min = 0, .max = 1, .def_doc = "`false`",
     .help = "`true`: `consume` and `relay` start and run on a database node whose settings can lose "
             "a committed transaction in a crash (`innodb_flush_log_at_trx_commit` not 1, "
             "`sync_binlog` not 1 with the binary log on, Galera's `pc.ignore_sb` or "
             "`pc.ignore_quorum`), logging each such setting at every start and exporting "
             "`sidecar_unsafe_durability`; `false` refuses them "
             "([operations.md](operations.md#durability-of-a-commit))"},
};
static const struct field http_fields[] = {
    /* No def_str: left out, each command picks its own (main.c), so a consume
     * and a relay on one host do not compete for one port. */
    {.key = "listen", .type = F_STR, .off = CFG(http_listen),
     .def_doc = "`127.0.0.1:9464` (consume), `127.0.0.1:9466` (relay)",
     .help = "address of `/metrics`, `/healthz`, `/readyz`; port 0 picks one; `off` disables"},
};
static const struct field log_fields[] = {
    {.key = "level", .type = F_STR, .off = CFG(log_level), .def_str = "info", .choices = log_levels,
     .help = "`debug`, `info`, `warn` or `error`"},
};
static const struct field binding_fields[] = {
    {.key = "exchange", .type = F_STR, .off = BND(exchange), .required = 1, .def_doc = "required",
     .help = "exchange to bind the queue to (declared durable `topic`)"},
    {.key = "routing_key", .type = F_STR, .off = BND(routing_key), .required = 1, .def_doc = "required",
     .help = "binding key"},
};
static const struct table binding_table = {binding_fields, N(binding_fields), sizeof(struct sc_binding)};

static const struct field inspect_effect_fields[] = {
    {.key = "table", .type = F_STR, .off = EFF(table), .required = 1, .def_doc = "required",
     .help = "where `sidecar inspect` finds this consumer's effect of an event (at most 8 "
             "entries; none: no effect shown): it reads `SELECT columns FROM table WHERE "
             "event_id_column = ?`. A table of the configured database, named by a plain "
             "identifier (letters, digits, `_`, at most 64); the user of `mysql.url` needs SELECT "
             "on it"},
    {.key = "event_id_column", .type = F_STR, .off = EFF(event_id_column), .def_str = "event_id",
     .help = "the column of that table holding the event id (an identifier)"},
    {.key = "columns", .type = F_STR_LIST, .off = EFF(columns), .count_off = EFF(n_columns),
     .required = 1, .def_doc = "required",
     .help = "the columns `sidecar inspect` shows of each row found (identifiers, at most 32)"},
};
static const struct table inspect_effect_table = {inspect_effect_fields, N(inspect_effect_fields),
                                                  sizeof(struct sc_inspect_effect)};
static const struct field ordering_fields[] = {
    {.key = "key", .type = F_STR, .off = ORD(key), .required = 1, .def_doc = "required",
     .help = "what orders: `subject`, or `data/<JSON Pointer>` (`data/order/id`: RFC 6901 into "
             "`data`); events of one key take effect in arrival order, other keys in parallel "
             "([contract.md](contract.md#per-key-order))"},
    {.key = "partitions", .type = F_INT, .off = ORD(partitions), .min = 1, .max = SC_PARTITIONS_MAX,
     .def_int = 1,
     .help = "1: the queue itself, single active consumer; N: queues `<queue>.p0` … spread by "
             "header `x-ordering-key` through the consistent-hash exchange `<queue>.ordering`, "
             "whose ring holds the exchanges `<queue>.ordering.p<i>` (across a broker restart a "
             "key keeps its partition only as the broker rebuilds the ring: drain first)"},
    {.key = "on_dead_letter", .type = F_STR, .off = ORD(on_dead_letter), .def_str = "hold",
     .choices = on_dead_letters,
     .help = "`hold`: a dead-lettered event holds its key (later events dead-lettered `held "
             "behind <event_id>` until `sidecar dlq replay --key`; table `consumer_held_key`); "
             "`skip`: only the failing event"},
};
static const struct table ordering_table = {ordering_fields, N(ordering_fields),
                                            sizeof(struct sc_ordering_config)};

static const struct field consumer_fields[] = {
    {.key = "name", .type = F_STR, .off = CON(name), .required = 1, .def_doc = "required",
     .help = "the `consumer_name` in `consumed_event` (≤ 128 characters, unique)"},
    {.key = "queue", .type = F_STR, .off = CON(queue), .def_doc = "the name",
     .help = "durable queue, declared at start"},
    {.key = "bindings", .type = F_OBJ_ARR, .off = CON(bindings), .count_off = CON(n_bindings),
     .sub = &binding_table, .def_doc = "`[]`",
     .help = "`{exchange, routing_key}` objects"},
    {.key = "handler", .type = F_STR, .off = CON(handler), .required = 1, .def_doc = "required",
     .help = "path of the handler `.so`"},
    {.key = "handler_config", .type = F_JSON, .off = CON(handler_config), .def_str = "{}",
     .help = "any JSON, passed to the handler's `init` as text"},
    {.key = "prefetch", .type = F_INT, .off = CON(prefetch), .min = 1, .max = 65535, .def_int = 256,
     .help = "basic.qos prefetch per worker"},
    {.key = "batch_max", .type = F_INT, .off = CON(batch_max), .min = 1, .max = SC_BATCH_LIMIT, .def_int = 64,
     .help = "most deliveries per transaction"},
    {.key = "workers", .type = F_INT, .off = CON(workers), .min = 1, .max = 64, .def_int = 1,
     .help = "worker threads, each with its own connections"},
    {.key = "max_attempts", .type = F_INT, .off = CON(max_attempts), .min = 1, .max = 1000, .def_int = 5,
     .help = "attempts before a failing message is dead-lettered; a quorum queue that exists "
             "with an `x-delivery-limit` below max_attempts + 10 (none counts as 20) is refused "
             "at start ([contract.md](contract.md#quorum-queues-the-brokers-delivery-limit))"},
    {.key = "retry_delays_ms", .type = F_INT_ARR, .off = CON(retry_delays_ms),
     .count_off = CON(n_retry_delays), .min = 1, .max = 86400000, .def_ints = default_retry_delays,
     .def_n = N(default_retry_delays),
     .help = "delay before attempt n+1 is entry n (the last repeats)"},
    {.key = "dead_letter_queue", .type = F_STR, .off = CON(dead_letter_queue), .def_doc = "`<queue>.dlq`",
     .help = "durable dead-letter queue"},
    {.key = "queue_type", .type = F_STR, .off = CON(queue_type), .def_str = "classic",
     .choices = queue_types,
     .help = "`classic` or `quorum` (each quorum queue declared with `x-delivery-limit` "
             "2147483647)"},
    {.key = "db_outage_hold_ms", .type = F_INT, .off = CON(db_outage_hold_ms), .min = 0,
     .max = 600000, .def_int = 30000,
     .help = "how long a worker whose database is lost or read-only holds its batch and its "
             "prefetched deliveries while it makes a new session (then runs the same batch on "
             "it); after that they go back to the queue"},
    {.key = "max_message_bytes", .type = F_INT, .off = CON(max_message_bytes), .min = 1024,
     .max = 536870912, .def_int = 16777216,
     .help = "the largest body handled; a larger message is dead-lettered with that reason. A "
             "batch also stops gathering once its bodies reach this many bytes"},
    {.key = "envelope", .type = F_STR, .off = CON(envelope), .def_str = "cloudevents",
     .choices = envelopes,
     .help = "`cloudevents`: every CloudEvents mode, told apart per message (structured: "
             "`content_type` `application/cloudevents+json`; batch: "
             "`application/cloudevents-batch+json`, each member its own event; binary, as the "
             "AMQP binding says: any other `content_type` or none, the attributes headers under "
             "one prefix `cloudEvents:`, `cloudEvents_`, `ce-` or `ce_` (a message without a "
             "`specversion` header is malformed), the body `data`: JSON for a JSON type, bytes "
             "for any other). `plain`: the "
             "body is `data` (JSON), the id the `message_id` (a non-UUID maps to its UUIDv5), "
             "`type` the `type` property or the routing key, `source` `plain_source` or the "
             "exchange, `subject` from `plain_subject`, `eventversion` an integer header, `time` "
             "the `timestamp` ([contract.md](contract.md#message-envelope-contract))"},
    {.key = "plain_source", .type = F_STR, .off = CON(plain_source), .def_doc = "the exchange",
     .help = "`envelope` `plain` only: the events' `source`"},
    {.key = "plain_subject", .type = F_STR, .off = CON(plain_subject), .def_doc = "none",
     .help = "`envelope` `plain` only: an RFC 6901 JSON Pointer into the body (`/order/id`) "
             "whose string or number is the `subject`"},
    {.key = "inspect_effects", .type = F_OBJ_ARR, .off = CON(inspect_effects),
     .count_off = CON(n_inspect_effects), .sub = &inspect_effect_table},
    {.key = "ordering", .type = F_OBJ, .off = CON(ordering), .sub = &ordering_table,
     .def_doc = "none (no order kept)",
     .help = "`{key, partitions, on_dead_letter}`: per-key order, retries in place "
             "([contract.md](contract.md#per-key-order))"},
};
static const struct table consumer_table = {consumer_fields, N(consumer_fields),
                                            sizeof(struct sc_consumer_config)};

static const struct field relay_fields[] = {
    {.key = "worker_id", .type = F_STR, .off = REL(worker_id), .def_doc = "`<host>-<pid>`",
     .help = "lease owner name (≤ 128 characters)"},
    {.key = "exchange", .type = F_STR, .off = REL(exchange), .required = 1, .def_doc = "required",
     .help = "exchange to publish to"},
    {.key = "batch", .type = F_INT, .off = REL(batch), .min = 1, .max = SC_BATCH_LIMIT, .def_int = 100,
     .help = "rows per claim"},
    {.key = "lease_ms", .type = F_INT, .off = REL(lease_ms), .min = 100, .max = 86400000, .def_int = 30000,
     .help = "lease; must exceed twice `confirm_timeout_ms`"},
    {.key = "poll_ms", .type = F_INT, .off = REL(poll_ms), .min = 1, .max = 600000, .def_int = 200,
     .help = "longest idle poll interval"},
    {.key = "confirm_timeout_ms", .type = F_INT, .off = REL(confirm_timeout_ms), .min = 10,
     .max = 600000, .def_int = 5000, .def_doc = "5000 (a third of a shorter lease)",
     .help = "wait for a batch's confirms"},
    {.key = "content_mode", .type = F_STR, .off = REL(content_mode), .def_str = "structured",
     .choices = content_modes,
     .help = "`structured`: the CloudEvent is the body (`application/cloudevents+json`). `binary`: "
             "the body is the payload exactly as stored (`content_type` `application/json`), every "
             "other attribute a `cloudEvents:` header, `message_id` the id "
             "([contract.md](contract.md#the-outbox-relay-contract))"},
    {.key = "max_message_bytes", .type = F_INT, .off = REL(max_message_bytes), .min = 1024,
     .max = 536870912, .def_int = 15728640,
     .help = "the largest message body the relay sends (RabbitMQ refuses one above its "
             "`max_message_size`: 16 MiB by default on 4.x, 128 MiB on 3.x; the default leaves "
             "room under 16 MiB). A larger one is marked FAILED with its size in the reason, never "
             "sent ([contract.md](contract.md#the-outbox-relay-contract))"},
    {.key = "ordering", .type = F_STR, .off = REL(ordering), .def_str = "none", .choices = orderings,
     .help = "`none`, or `per_aggregate`: an event is published only once every earlier event of "
             "its `(aggregate_type, aggregate_id)` (by `event_version, created_at, event_id`) is "
             "PUBLISHED; a "
             "FAILED row holds the rest of its aggregate "
             "([contract.md](contract.md#the-outbox-relay-contract))"},
    {.key = "source", .type = F_STR, .off = REL(source), .def_str = "poll", .choices = relay_sources,
     .help = "`poll`: claim and mark rows (SELECT ... FOR UPDATE SKIP LOCKED). `binlog`: read the "
             "inserts of `outbox_event` from the binary log as a replication client, write one "
             "checkpoint per batch and no outbox row per event (needs the grants of "
             "`sql/grants/relay_binlog.sql`; [operations.md](operations.md#binlog-relay)); not "
             "with a `tenants` section (refused at start), nor with more than one `mysql.url` node "
             "(refused at load, naming `mysql.url`: [scale.md](scale.md#the-binlog-relay-on-other-servers))"},
};
static const struct table relay_table = {relay_fields, N(relay_fields), sizeof(struct sc_relay_config)};

/* amqp, mysql, http and log fill members of struct sc_config directly, so
 * their tables write relative to the config itself (nested "flat" objects). */
static const struct table amqp_table = {amqp_fields, N(amqp_fields), 0};
static const struct table mysql_table = {mysql_fields, N(mysql_fields), 0};
static const struct table http_table = {http_fields, N(http_fields), 0};
static const struct table log_table = {log_fields, N(log_fields), 0};
static const struct field purge_fields[] = {
    {.key = "redelivery_horizon_s", .type = F_INT, .off = CFG(purge_horizon_s), .min = 0,
     .max = 366 * 86400, .def_int = 7 * 86400,
     .help = "shortest retention `purge` accepts without `--force`"},
    {.key = "batch", .type = F_INT, .off = CFG(purge_batch), .min = 1, .max = 10000, .def_int = 1000,
     .help = "rows per purge transaction"},
};
static const struct table purge_table = {purge_fields, N(purge_fields), 0};
static const struct field console_fields[] = {
    {.key = "listen", .type = F_STR, .off = CFG(console_listen), .def_str = "127.0.0.1:9465",
     .help = "address of `sidecar console` (page, `/api/`, `/metrics`); port 0 picks one"},
    {.key = "token_file", .type = F_STR, .off = CFG(console_token_file), .def_doc = "— (read-only)",
     .help = "file of bearer tokens (one per line, `name:token` names its holder) that allow the console's actions; absent: read-only"},
    {.key = "sample_ms", .type = F_INT, .off = CFG(console_sample_ms), .min = 1000, .max = 60000,
     .def_int = 10000,
     .help = "how often the console samples the outbox, consumption and queue depths (an hour of samples is kept)"},
};
static const struct table console_table = {console_fields, N(console_fields), 0};
static const struct field otel_fields[] = {
    {.key = "endpoint", .type = F_STR, .off = CFG(otel_endpoint), .def_doc = "— (no export)",
     .help = "`http://host:4318/v1/traces`: spans of each relay publish and consumer transaction of "
             "an event with trace context, sent as OTLP/HTTP JSON in batches; a collector that is "
             "down costs only `sidecar_otel_spans_dropped_total` "
             "([operations.md](operations.md#span-export-otel))"},
};
static const struct table otel_table = {otel_fields, N(otel_fields), 0};

static const struct field tenants_fields[] = {
    {.key = "key", .type = F_STR, .off = TEN(key), .required = 1, .def_doc = "required",
     .help = "where a message's tenant is read: `subject`, `data/<JSON Pointer>` (as "
             "`ordering.key`), `extension:<name>` (a CloudEvents extension attribute: the "
             "structured body's member, or in binary mode the `cloudEvents:<name>` header) or "
             "`header:<name>` (an AMQP header). A message without one, or with a name "
             "`names` refuses, is dead-lettered with the reason "
             "([contract.md](contract.md#tenants-a-database-per-tenant))"},
    {.key = "database_url", .type = F_STR_LIST, .off = TEN(database_urls),
     .count_off = TEN(n_database_urls), .def_doc = "required",
     .help = "`mysql://user:pass@host:port/app_{tenant}`: the tenant's database, `{tenant}` "
             "replaced by its name (or an array of such URLs: cluster nodes). "
             "`SIDECAR_TENANTS_DATABASE_URL(_FILE)` override it like `mysql.url`"},
    {.key = "names", .type = F_STR, .off = TEN(names), .def_str = "^[a-z0-9_]{1,48}$",
     .help = "POSIX extended regular expression every tenant name must match (names are also "
             "at most 48 letters, digits, `_` and `-`)"},
    {.key = "max_connections", .type = F_INT, .off = TEN(max_connections), .min = 1,
     .max = 10000, .def_int = 100,
     .help = "tenant database sessions open at once per process (a consumer shares them out "
             "evenly among its workers, at least one each; the relay has them all); the least "
             "recently used is closed first"},
    {.key = "idle_close_ms", .type = F_INT, .off = TEN(idle_close_ms), .min = 1000,
     .max = 86400000, .def_int = 60000,
     .help = "a tenant session unused this long is closed"},
    {.key = "read_timeout_s", .type = F_INT, .off = TEN(read_timeout_s), .min = 2, .max = 3630,
     .def_doc = "`mysql.lock_wait_timeout_s` + 5",
     .help = "a tenant session's reads and writes (the consumer's and the relay's) time out "
             "after this: a tenant whose server goes silent on an open session holds the "
             "others on its worker at most this long. Must be greater than "
             "`mysql.lock_wait_timeout_s` (a lock wait ends with the server's error). A "
             "statement that runs longer, a handler's too, loses its session: a COMMIT's "
             "outcome is unknown (not acked; held in hand, the repeat on a new session settles "
             "it), any other statement counts as the session lost under its delivery "
             "([contract.md](contract.md#tenants-a-database-per-tenant))"},
    {.key = "list", .type = F_STR_LIST, .off = TEN(list), .count_off = TEN(n_list),
     .def_doc = "none",
     .help = "the tenants by name (each must match `names`): the databases `check`, `migrate --all` "
             "and `purge` go over and the relay and the console read "
             "([contract.md](contract.md#the-relay-with-tenants))"},
    {.key = "discover", .type = F_INT, .off = TEN(discover), .min = 0, .max = 1,
     .def_doc = "`false`",
     .help = "`true`: the tenants are found on the server of the first `database_url` node: each "
             "database whose name matches the URL's (`app_{tenant}`), with an `outbox_event` table "
             "the user can see and a tenant part `names` accepts. The relay and the console list "
             "them again every `discover_ms`; `check`, `migrate --all` and `purge` go over them. "
             "Excludes `list` ([contract.md](contract.md#the-relay-with-tenants))"},
    {.key = "discover_ms", .type = F_INT, .off = TEN(discover_ms), .min = 1000, .max = 3600000,
     .def_int = 30000,
     .help = "with `discover`: how often the relay lists the tenant databases again, on a "
             "thread of its own beside the claims (a new one joins the round, one gone is dropped "
             "after its batch in hand), and the console, on its tenants sampler before a sample (a "
             "new one joins the selector and the backlog table, one gone leaves them)"},
    {.key = "metrics_top", .type = F_INT, .off = TEN(metrics_top), .min = 0, .max = 1000,
     .def_int = 10,
     .help = "per-tenant metric series only for this many tenants, those with the largest backlog "
             "(relay: rows not yet PUBLISHED; consumer: deliveries waiting); totals cover every "
             "tenant ([operations.md](operations.md#metrics-and-health))"},
};
static const struct table tenants_table = {tenants_fields, N(tenants_fields),
                                           sizeof(struct sc_tenants_config)};

static const struct field top_fields[] = {
    {.key = "amqp", .type = F_OBJ, .off = 0, .required = 1, .sub = &amqp_table,
     .help = "the broker"},
    {.key = "mysql", .type = F_OBJ, .off = 0, .required = 1, .sub = &mysql_table,
     .help = "the database"},
    {.key = "http", .type = F_OBJ, .off = 0, .sub = &http_table,
     .help = "metrics and health endpoints"},
    {.key = "log", .type = F_OBJ, .off = 0, .sub = &log_table,
     .help = "logging"},
    {.key = "consumers", .type = F_OBJ_ARR, .off = CFG(consumers), .count_off = CFG(n_consumers),
     .sub = &consumer_table,
     .help = "one entry per consumer (queue, consumer name, handler)"},
    {.key = "relay", .type = F_OBJ, .off = CFG(relay), .sub = &relay_table,
     .help = "the outbox relay (only `sidecar relay` needs it)"},
    {.key = "purge", .type = F_OBJ, .off = 0, .sub = &purge_table,
     .help = "`sidecar purge`"},
    {.key = "console", .type = F_OBJ, .off = 0, .sub = &console_table,
     .help = "`sidecar console`"},
    {.key = "otel", .type = F_OBJ, .off = 0, .sub = &otel_table,
     .help = "span export (OpenTelemetry)"},
    {.key = "tenants", .type = F_OBJ, .off = CFG(tenants), .sub = &tenants_table,
     .def_doc = "none (one database: `mysql.url`)",
     .help = "a database per tenant ([contract.md](contract.md#tenants-a-database-per-tenant))"},
};
static const struct table top_table = {top_fields, N(top_fields), 0};


static int fail(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -1;
}

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

static void join_path(char *out, size_t len, const char *path, const char *key)
{
    if (path[0])
        snprintf(out, len, "%s.%s", path, key);
    else
        snprintf(out, len, "%s", key);
}

static int set_default(const struct field *f, char *base)
{
    switch (f->type) {
    case F_STR:
    case F_JSON:
        if (f->def_str && !(*(char **)(base + f->off) = strdup(f->def_str)))
            return -1;
        break;
    case F_INT:
        *(int *)(base + f->off) = (int)f->def_int;
        break;
    case F_INT_ARR:
        if (f->def_ints) {
            int *arr = malloc(f->def_n * sizeof *arr);
            if (!arr)
                return -1;
            memcpy(arr, f->def_ints, f->def_n * sizeof *arr);
            *(int **)(base + f->off) = arr;
            *(size_t *)(base + f->count_off) = f->def_n;
        }
        break;
    default:
        break;
    }
    return 0;
}

static int parse_table(const json_t *obj, const struct table *t, char *base, const char *path,
                       char *err, size_t err_len);

static void free_list(char **list, size_t n)
{
    for (size_t i = 0; list && i < n; i++)
        free(list[i]);
    free(list);
}

/* Appends a copy of s[0..len) to *list; returns 0 or -1 (out of memory). */
static int list_add(char ***list, size_t *n, const char *s, size_t len)
{
    char **nl = realloc(*list, (*n + 1) * sizeof *nl);
    if (!nl)
        return -1;
    *list = nl;
    if (!(nl[*n] = strndup(s, len)))
        return -1;
    (*n)++;
    return 0;
}

static int parse_int(const json_t *v, const struct field *f, const char *p, int *out, char *err,
                     size_t err_len)
{
    /* A 0–1 key is a switch: true and false say so best. */
    if (json_is_boolean(v) && f->min == 0 && f->max == 1) {
        *out = json_is_true(v);
        return 0;
    }
    if (!json_is_integer(v))
        return fail(err, err_len, "%s: expected integer, got %s", p, json_type_name(v));
    json_int_t i = json_integer_value(v);
    if (i < f->min || i > f->max)
        return fail(err, err_len, "%s: expected an integer from %lld to %lld, got %lld", p, f->min,
                    f->max, (long long)i);
    *out = (int)i;
    return 0;
}

static int parse_field(const json_t *v, const struct field *f, char *base, const char *p, char *err,
                       size_t err_len)
{
    switch (f->type) {
    case F_STR: {
        if (!json_is_string(v))
            return fail(err, err_len, "%s: expected string, got %s", p, json_type_name(v));
        const char *s = json_string_value(v);
        if (!s[0])
            return fail(err, err_len, "%s: expected a non-empty string", p);
        if (f->choices) {
            int ok = 0;
            for (const char *const *c = f->choices; *c; c++)
                ok |= strcmp(*c, s) == 0;
            if (!ok)
                return fail(err, err_len, "%s: unsupported value \"%s\"", p, s);
        }
        char **dst = (char **)(base + f->off);
        free(*dst);
        if (!(*dst = strdup(s)))
            return fail(err, err_len, "%s: out of memory", p);
        return 0;
    }
    case F_INT:
        return parse_int(v, f, p, (int *)(base + f->off), err, err_len);
    case F_JSON: {
        char **dst = (char **)(base + f->off);
        free(*dst);
        if (!(*dst = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY)))
            return fail(err, err_len, "%s: cannot encode", p);
        return 0;
    }
    case F_OBJ:
        if (!json_is_object(v))
            return fail(err, err_len, "%s: expected object, got %s", p, json_type_name(v));
        if (f->sub->elem_size)
            *(int *)(base + f->off) = 1; /* the "present" flag leads such structs */
        return parse_table(v, f->sub, base + f->off, p, err, err_len);
    case F_INT_ARR: {
        if (!json_is_array(v))
            return fail(err, err_len, "%s: expected array, got %s", p, json_type_name(v));
        size_t n = json_array_size(v);
        if (n == 0)
            return fail(err, err_len, "%s: expected at least one element", p);
        int *arr = calloc(n, sizeof *arr);
        if (!arr)
            return fail(err, err_len, "%s: out of memory", p);
        *(int **)(base + f->off) = arr;
        *(size_t *)(base + f->count_off) = n;
        for (size_t i = 0; i < n; i++) {
            char ep[300];
            snprintf(ep, sizeof ep, "%s[%zu]", p, i);
            if (parse_int(json_array_get(v, i), f, ep, &arr[i], err, err_len))
                return -1;
        }
        return 0;
    }
    case F_STR_LIST: {
        char ***dst = (char ***)(base + f->off);
        size_t *cnt = (size_t *)(base + f->count_off);
        free_list(*dst, *cnt);
        *dst = NULL;
        *cnt = 0;
        if (json_is_string(v)) {
            if (!json_string_value(v)[0])
                return fail(err, err_len, "%s: expected a non-empty string", p);
            if (list_add(dst, cnt, json_string_value(v), json_string_length(v)))
                return fail(err, err_len, "%s: out of memory", p);
            return 0;
        }
        if (!json_is_array(v))
            return fail(err, err_len, "%s: expected a string or an array of strings, got %s", p,
                        json_type_name(v));
        if (json_array_size(v) == 0)
            return fail(err, err_len, "%s: expected at least one element", p);
        for (size_t i = 0; i < json_array_size(v); i++) {
            const json_t *e = json_array_get(v, i);
            if (!json_is_string(e) || !json_string_value(e)[0])
                return fail(err, err_len, "%s[%zu]: expected a non-empty string, got %s", p, i,
                            json_type_name(e));
            if (list_add(dst, cnt, json_string_value(e), json_string_length(e)))
                return fail(err, err_len, "%s: out of memory", p);
        }
        return 0;
    }
    case F_OBJ_ARR: {
        if (!json_is_array(v))
            return fail(err, err_len, "%s: expected array, got %s", p, json_type_name(v));
        size_t n = json_array_size(v);
        char *arr = calloc(n ? n : 1, f->sub->elem_size);
        if (!arr)
            return fail(err, err_len, "%s: out of memory", p);
        *(char **)(base + f->off) = arr;
        *(size_t *)(base + f->count_off) = n;
        for (size_t i = 0; i < n; i++) {
            char ep[300];
            snprintf(ep, sizeof ep, "%s[%zu]", p, i);
            const json_t *e = json_array_get(v, i);
            if (!json_is_object(e))
                return fail(err, err_len, "%s: expected object, got %s", ep, json_type_name(e));
            if (parse_table(e, f->sub, arr + i * f->sub->elem_size, ep, err, err_len))
                return -1;
        }
        return 0;
    }
    }
    return fail(err, err_len, "%s: internal error", p);
}

static int parse_table(const json_t *obj, const struct table *t, char *base, const char *path,
                       char *err, size_t err_len)
{
    const char *key;
    json_t *v;
    char p[256];

    json_object_foreach((json_t *)obj, key, v) {
        size_t i;
        for (i = 0; i < t->n && strcmp(t->fields[i].key, key) != 0; i++)
            ;
        if (i == t->n) {
            join_path(p, sizeof p, path, key);
            return fail(err, err_len, "%s: unknown key", p);
        }
    }
    for (size_t i = 0; i < t->n; i++) {
        const struct field *f = &t->fields[i];
        join_path(p, sizeof p, path, f->key);
        v = json_object_get(obj, f->key);
        if (!v) {
            if (f->required)
                return fail(err, err_len, "%s: required key is missing", p);
            /* An absent section that writes into its parent still gets
             * its defaults; one with a presence flag (relay) stays absent. */
            if (f->type == F_OBJ && !f->sub->elem_size) {
                json_t *empty = json_object();
                int rc = empty ? parse_table(empty, f->sub, base + f->off, p, err, err_len)
                               : fail(err, err_len, "%s: out of memory", p);
                json_decref(empty);
                if (rc)
                    return -1;
                continue;
            }
            if (set_default(f, base))
                return fail(err, err_len, "%s: out of memory", p);
            continue;
        }
        if (parse_field(v, f, base, p, err, err_len))
            return -1;
    }
    return 0;
}

/* Reads a whole small file (a secret file) into a new string. */
static char *read_secret_file(const char *path, char *err, size_t err_len, const char *var)
{
    FILE *fp = fopen(path, "r");
    if (!fp) {
        fail(err, err_len, "%s: cannot open %s: %s", var, path, strerror(errno));
        return NULL;
    }
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = 0;
    char *s = strdup(buf);
    memset(buf, 0, n);
    if (!s)
        fail(err, err_len, "%s: out of memory", var);
    return s;
}

/* Splits text on commas and line breaks into *list (empty parts and
 * surrounding blanks dropped). Returns 0, or -1 with err set. */
static int split_urls(const char *text, char ***list, size_t *n, const char *var, char *err,
                      size_t err_len)
{
    const char *p = text;
    while (*p) {
        size_t len = strcspn(p, ",\r\n");
        const char *s = p, *e = p + len;
        while (s < e && (*s == ' ' || *s == '\t'))
            s++;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (e > s && list_add(list, n, s, (size_t)(e - s)))
            return fail(err, err_len, "%s: out of memory", var);
        p += len;
        if (*p)
            p++;
    }
    if (*n == 0)
        return fail(err, err_len, "%s: no URL in it", var);
    return 0;
}

/* The systemd credential for SIDECAR_X_URL, $CREDENTIALS_DIRECTORY/x_url
 * (LoadCredential=x_url:...), into buf. Returns buf when that file exists. */
static const char *credential_file(const char *var, char *buf, size_t len)
{
    const char *dir = getenv("CREDENTIALS_DIRECTORY");
    if (!dir || !dir[0] || strncmp(var, "SIDECAR_", 8) != 0)
        return NULL;
    size_t n = (size_t)snprintf(buf, len, "%s/", dir);
    for (const char *p = var + 8; *p && n + 1 < len; p++)
        buf[n++] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
    if (n >= len)
        return NULL;
    buf[n] = '\0';
    return access(buf, F_OK) == 0 ? buf : NULL;
}

/* SIDECAR_X (a comma-separated list of URLs) overrides the file;
 * SIDECAR_X_FILE names files (comma-separated) that hold them, one secret
 * file per node if wanted; with neither, the systemd credential x (read
 * like SIDECAR_X_FILE). */
static int apply_env_urls(char ***dst, size_t *dst_n, const char *var, char *err, size_t err_len)
{
    char filevar[64], cred[4096];
    snprintf(filevar, sizeof filevar, "%s_FILE", var);
    const char *direct = getenv(var), *files = getenv(filevar);
    if (!(direct && direct[0]) && !(files && files[0]))
        files = credential_file(var, cred, sizeof cred);
    char **list = NULL;
    size_t n = 0;
    if (direct && direct[0]) {
        if (split_urls(direct, &list, &n, var, err, err_len))
            goto bad;
    } else if (files && files[0]) {
        char **paths = NULL;
        size_t n_paths = 0;
        if (split_urls(files, &paths, &n_paths, filevar, err, err_len)) {
            free_list(paths, n_paths);
            goto bad;
        }
        for (size_t i = 0; i < n_paths; i++) {
            char *text = read_secret_file(paths[i], err, err_len, filevar);
            int rc = text ? split_urls(text, &list, &n, filevar, err, err_len) : -1;
            if (text) {
                memset(text, 0, strlen(text));
                free(text);
            }
            if (rc) {
                free_list(paths, n_paths);
                goto bad;
            }
        }
        free_list(paths, n_paths);
    } else {
        return 0;
    }
    free_list(*dst, *dst_n);
    *dst = list;
    *dst_n = n;
    return 0;
bad:
    free_list(list, n);
    return -1;
}

/* Checks every URL of a list: key names the list, with [i] when it has
 * more than one. */
static int validate_urls(char **urls, size_t n, const char *key, const char *env,
                         const char *const *schemes, const char *want, char *err, size_t err_len)
{
    if (n == 0)
        return fail(err, err_len, "%s: required key is missing (or set %s)", key, env);
    for (size_t i = 0; i < n; i++) {
        char k[64];
        if (n > 1)
            snprintf(k, sizeof k, "%s[%zu]", key, i);
        else
            snprintf(k, sizeof k, "%s", key);
        int ok = 0;
        for (const char *const *s = schemes; *s; s++)
            ok |= strncmp(urls[i], *s, strlen(*s)) == 0;
        if (!ok)
            return fail(err, err_len, "%s: expected %s", k, want);
        /* Before anything connects or logs: a URL whose password ends the
         * authority early would put the rest of it where host and port are
         * printed. The reason never quotes the URL. */
        char why[256];
        if (sc_url_check(urls[i], why, sizeof why))
            return fail(err, err_len, "%s: %s", k, why);
        for (size_t j = 0; j < i; j++)
            if (strcmp(urls[i], urls[j]) == 0)
                return fail(err, err_len, "%s: the same URL as %s[%zu]", k, key, j);
    }
    return 0;
}

/* An SQL identifier inspect may put in a statement (backtick-quoted): 1 to
 * 64 of [A-Za-z0-9_], not all digits. Nothing else, so no quoting is ever
 * escaped and no name reads as something else. */
static int sql_identifier_ok(const char *s)
{
    size_t n = strlen(s), digits = 0;
    if (n == 0 || n > 64)
        return 0;
    for (const char *p = s; *p; p++) {
        int d = *p >= '0' && *p <= '9';
        digits += (size_t)d;
        if (!d && !(*p >= 'a' && *p <= 'z') && !(*p >= 'A' && *p <= 'Z') && *p != '_')
            return 0;
    }
    return digits < n;
}

static int validate_inspect_effects(const struct sc_consumer_config *k, size_t i, char *err,
                                    size_t err_len)
{
    if (k->n_inspect_effects > SC_INSPECT_EFFECTS_MAX)
        return fail(err, err_len, "consumers[%zu].inspect_effects: more than %d entries", i,
                    SC_INSPECT_EFFECTS_MAX);
    for (size_t j = 0; j < k->n_inspect_effects; j++) {
        const struct sc_inspect_effect *x = &k->inspect_effects[j];
        static const char want[] = "is not a plain SQL identifier (1 to 64 letters, digits and _, "
                                   "not only digits)";
        if (!sql_identifier_ok(x->table))
            return fail(err, err_len, "consumers[%zu].inspect_effects[%zu].table: \"%.80s\" %s", i,
                        j, x->table, want);
        if (!sql_identifier_ok(x->event_id_column))
            return fail(err, err_len, "consumers[%zu].inspect_effects[%zu].event_id_column: "
                        "\"%.80s\" %s", i, j, x->event_id_column, want);
        if (x->n_columns > SC_INSPECT_COLUMNS_MAX)
            return fail(err, err_len, "consumers[%zu].inspect_effects[%zu].columns: more than %d",
                        i, j, SC_INSPECT_COLUMNS_MAX);
        for (size_t c = 0; c < x->n_columns; c++)
            if (!sql_identifier_ok(x->columns[c]))
                return fail(err, err_len, "consumers[%zu].inspect_effects[%zu].columns[%zu]: "
                            "\"%.80s\" %s", i, j, c, x->columns[c], want);
    }
    return 0;
}

/* The tenants section: the key's syntax, the URLs, the pattern and the
 * listed names. */
static int validate_tenants(const struct sc_tenants_config *t, char *err, size_t err_len)
{
    const char *key = t->key;
    if (strncmp(key, "extension:", 10) == 0) {
        /* CloudEvents attribute names: lower-case letters and digits. */
        size_t n = strlen(key + 10);
        int ok = n > 0 && n <= 20;
        for (const char *p = key + 10; *p; p++)
            ok &= (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9');
        if (!ok)
            return fail(err, err_len, "tenants.key: \"%.80s\": a CloudEvents attribute name is "
                        "1 to 20 lower-case letters and digits", key);
    } else if (strncmp(key, "header:", 7) == 0) {
        if (!key[7] || strlen(key + 7) > 128)
            return fail(err, err_len, "tenants.key: \"%.80s\": a header name of 1 to 128 bytes "
                        "after header:", key);
    } else if (strcmp(key, "subject") != 0 &&
               (strncmp(key, "data/", 5) != 0 || !sc_json_pointer_valid(key + 4))) {
        return fail(err, err_len, "tenants.key: \"%.80s\" is none of \"subject\", "
                    "\"data/<JSON Pointer>\", \"extension:<name>\", \"header:<name>\"", key);
    }
    static const char *const mysql_schemes[] = {"mysql://", NULL};
    if (validate_urls(t->database_urls, t->n_database_urls, "tenants.database_url",
                      "SIDECAR_TENANTS_DATABASE_URL", mysql_schemes, "a mysql:// URL", err, err_len))
        return -1;
    for (size_t i = 0; i < t->n_database_urls; i++) {
        char k[64];
        snprintf(k, sizeof k, t->n_database_urls > 1 ? "tenants.database_url[%zu]"
                                                     : "tenants.database_url", i);
        if (sc_tenant_url_check(t->database_urls[i], k, err, err_len))
            return -1;
    }
    regex_t re;
    char why[256];
    if (sc_tenant_names_compile(t->names, &re, why, sizeof why))
        return fail(err, err_len, "tenants.names: %s", why);
    if (t->discover && t->n_list > 0) {
        regfree(&re);
        return fail(err, err_len, "tenants.discover and tenants.list exclude each other: the "
                    "tenants are either listed or discovered");
    }
    for (size_t i = 0; i < t->n_list; i++)
        if (!sc_tenant_name_ok(&re, t->list[i], why, sizeof why)) {
            regfree(&re);
            return fail(err, err_len, "tenants.list[%zu]: %s", i, why);
        }
    regfree(&re);
    return 0;
}

static int validate(struct sc_config *c, char *err, size_t err_len)
{
    static const char *const amqp_schemes[] = {"amqp://", "amqps://", NULL};
    static const char *const mysql_schemes[] = {"mysql://", NULL};
    if (validate_urls(c->amqp_urls, c->n_amqp_urls, "amqp.url", "SIDECAR_AMQP_URL", amqp_schemes,
                      "an amqp:// or amqps:// URL", err, err_len) ||
        validate_urls(c->mysql_urls, c->n_mysql_urls, "mysql.url", "SIDECAR_MYSQL_URL",
                      mysql_schemes, "a mysql:// URL", err, err_len))
        return -1;
    free(c->amqp_url);
    free(c->mysql_url);
    c->amqp_url = strdup(c->amqp_urls[0]);
    c->mysql_url = strdup(c->mysql_urls[0]);
    if (!c->amqp_url || !c->mysql_url)
        return fail(err, err_len, "out of memory");
    for (size_t i = 0; i < c->n_amqp_urls; i++)
        if (strncmp(c->amqp_urls[i], "amqps://", 8) == 0 && !c->amqp_tls_ca)
            return fail(err, err_len, "amqp.tls_ca: required for amqps:// (the CA that signed the broker's certificate)");
    if (!c->amqp_tls_cert != !c->amqp_tls_key)
        return fail(err, err_len, "amqp.%s: tls_cert and tls_key go together", c->amqp_tls_cert ? "tls_key" : "tls_cert");
    if (!c->mysql_tls_cert != !c->mysql_tls_key)
        return fail(err, err_len, "mysql.%s: tls_cert and tls_key go together", c->mysql_tls_cert ? "tls_key" : "tls_cert");
    if (c->mysql_tls_cert && !c->mysql_tls_ca)
        return fail(err, err_len, "mysql.tls_ca: required with a client certificate (the server's certificate is always verified)");
    if (c->otel_endpoint && strncmp(c->otel_endpoint, "http://", 7) != 0)
        return fail(err, err_len, "otel.endpoint: must be an http:// URL (http://host:4318/v1/traces)");
    if (c->relay.present) {
        /* lease_owner is VARCHAR(128): a longer id is truncated in
         * non-strict mode, the ownership check never matches, and every
         * event is republished after every lease. */
        if (c->relay.worker_id && strlen(c->relay.worker_id) > SC_WORKER_ID_MAX)
            return fail(err, err_len, "relay.worker_id: longer than %d characters (outbox_event.lease_owner is VARCHAR(%d))",
                        SC_WORKER_ID_MAX, SC_WORKER_ID_MAX);
        /* A batch is claimed while the previous one's confirms travel, so
         * its lease spans that wait and its own before the mark
         * (relay_core.c). A lease that can expire first hands the rows to
         * a second relay every time. */
        if (c->relay.lease_ms <= 2 * c->relay.confirm_timeout_ms)
            return fail(err, err_len, "relay.lease_ms: %d must be greater than twice relay.confirm_timeout_ms "
                        "(2 x %d): a batch's lease spans the previous batch's confirm wait and its own",
                        c->relay.lease_ms, c->relay.confirm_timeout_ms);
        /* The binlog source resumes at a file and offset of one server's
         * binary log: on another node (failover to the next URL) the same
         * names point at other transactions, and it would skip or repeat
         * at random. */
        if (sc_relay_binlog(&c->relay) && c->n_mysql_urls > 1)
            return fail(err, err_len, "mysql.url: %zu nodes with relay.source \"binlog\": its checkpoint "
                        "is a file and offset of one server's binary log, meaningless on another node; "
                        "give it the one node whose binary log it reads (docs/scale.md)", c->n_mysql_urls);
    }
    /* rabbitmq-c sends heartbeats only inside its own calls and the broker
     * drops a connection silent for about two intervals; the sidecar sends
     * one at least every half interval around statements, so one statement
     * may wait at most one interval for a lock. */
    if (c->amqp_heartbeat_s > 0 && c->mysql_lock_wait_timeout_s > c->amqp_heartbeat_s)
        return fail(err, err_len, "mysql.lock_wait_timeout_s: %d must not exceed amqp.heartbeat_s (%d): a "
                    "statement waiting that long holds the broker connection past its heartbeat",
                    c->mysql_lock_wait_timeout_s, c->amqp_heartbeat_s);
    if (c->tenants.present && validate_tenants(&c->tenants, err, err_len))
        return -1;
    /* A lock wait must end with the server's 1205 (retried, or the tenant
     * counted as locked), never the client's timeout, which loses the
     * session and leaves a COMMIT's outcome unknown. */
    if (c->tenants.present && c->tenants.read_timeout_s <= c->mysql_lock_wait_timeout_s)
        return fail(err, err_len, "tenants.read_timeout_s: %d must be greater than "
                    "mysql.lock_wait_timeout_s (%d): a lock wait must end with the server's error, "
                    "not the client's timeout", c->tenants.read_timeout_s,
                    c->mysql_lock_wait_timeout_s);
    for (size_t i = 0; i < c->n_consumers; i++) {
        struct sc_consumer_config *k = &c->consumers[i];
        /* Per key and tenant: the held keys live in each tenant's database,
         * and a down tenant's deliveries go round through a delay queue. */
        k->ordering.tenant_returns = c->tenants.present && k->ordering.present;
        for (size_t j = 0; j < i; j++)
            if (strcmp(c->consumers[j].name, k->name) == 0)
                return fail(err, err_len, "consumers[%zu].name: \"%s\" is used twice", i, k->name);
        if (strlen(k->name) > 128)
            return fail(err, err_len, "consumers[%zu].name: longer than 128 characters", i);
        if (!k->queue && !(k->queue = strdup(k->name)))
            return fail(err, err_len, "out of memory");
        if (!k->dead_letter_queue) {
            size_t n = strlen(k->queue) + 5;
            if (!(k->dead_letter_queue = malloc(n)))
                return fail(err, err_len, "out of memory");
            snprintf(k->dead_letter_queue, n, "%s.dlq", k->queue);
        }
        if (strcmp(k->dead_letter_queue, k->queue) == 0)
            return fail(err, err_len, "consumers[%zu].dead_letter_queue: must differ from the queue", i);
        int plain = strcmp(k->envelope, "plain") == 0;
        if (!plain && (k->plain_source || k->plain_subject))
            return fail(err, err_len, "consumers[%zu].%s: only with \"envelope\": \"plain\"", i,
                        k->plain_source ? "plain_source" : "plain_subject");
        if (k->plain_subject && !sc_json_pointer_valid(k->plain_subject))
            return fail(err, err_len, "consumers[%zu].plain_subject: \"%s\" is not an RFC 6901 "
                        "JSON Pointer (\"\" or \"/a/b\", with ~0 for ~ and ~1 for /)", i,
                        k->plain_subject);
        if (validate_inspect_effects(k, i, err, err_len))
            return -1;
        if (k->ordering.present) {
            const char *key = k->ordering.key;
            if (strcmp(key, "subject") != 0 &&
                (strncmp(key, "data/", 5) != 0 || !sc_json_pointer_valid(key + 4)))
                return fail(err, err_len, "consumers[%zu].ordering.key: \"%s\" is neither "
                            "\"subject\" nor \"data/<JSON Pointer>\" (\"data/order/id\", with ~0 "
                            "for ~ and ~1 for /)", i, key);
            /* A partition queue is consumed by one worker (single active
             * consumer per queue): more workers than queues would idle. */
            if (k->workers > k->ordering.partitions)
                return fail(err, err_len, "consumers[%zu].workers: %d is more than "
                            "ordering.partitions (%d): each partition queue has one active "
                            "consumer, the other workers would only wait", i, k->workers,
                            k->ordering.partitions);
        }
    }
    return 0;
}

int sc_config_parse(const char *text, size_t len, int use_env, struct sc_config *out, char *err,
                    size_t err_len)
{
    json_error_t je;
    memset(out, 0, sizeof *out);
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        /* jansson quotes the text where it stopped ("invalid escape near
         * '\"mysql://u:pa\\q'"): inside a URL that is a password prefix.
         * Line and column say where, without the text. */
        char *near = strstr(je.text, " near '");
        if (near)
            *near = 0;
        return fail(err, err_len, "config is not valid JSON: %s (line %d, column %d)", je.text,
                    je.line, je.column);
    }
    int rc = -1;
    if (!json_is_object(root)) {
        fail(err, err_len, "config: expected a JSON object, got %s", json_type_name(root));
        goto out;
    }
    if (parse_table(root, &top_table, (char *)out, "", err, err_len))
        goto out;
    if (use_env) {
        if (apply_env_urls(&out->amqp_urls, &out->n_amqp_urls, "SIDECAR_AMQP_URL", err, err_len) ||
            apply_env_urls(&out->mysql_urls, &out->n_mysql_urls, "SIDECAR_MYSQL_URL", err, err_len))
            goto out;
        if (out->tenants.present &&
            apply_env_urls(&out->tenants.database_urls, &out->tenants.n_database_urls,
                           "SIDECAR_TENANTS_DATABASE_URL", err, err_len))
            goto out;
        const char *lvl = getenv("SIDECAR_LOG_LEVEL");
        if (lvl && lvl[0]) {
            int ok = 0;
            for (const char *const *c = log_levels; *c; c++)
                ok |= strcmp(*c, lvl) == 0;
            if (!ok) {
                fail(err, err_len, "SIDECAR_LOG_LEVEL: unsupported value \"%s\"", lvl);
                goto out;
            }
            free(out->log_level);
            out->log_level = strdup(lvl);
        }
    }
    /* confirm_timeout_ms left out: 5 s, or a third of the lease when that
     * is shorter (the lease must outlast two confirm waits). */
    if (out->relay.present &&
        !json_object_get(json_object_get(root, "relay"), "confirm_timeout_ms") &&
        out->relay.lease_ms <= 2 * out->relay.confirm_timeout_ms)
        out->relay.confirm_timeout_ms = out->relay.lease_ms / 3;
    /* read_timeout_s left out: a few seconds past the lock wait. */
    if (out->tenants.present && !out->tenants.read_timeout_s)
        out->tenants.read_timeout_s = out->mysql_lock_wait_timeout_s + TENANT_READ_MARGIN_S;
    rc = validate(out, err, err_len);
out:
    json_decref(root);
    if (rc)
        sc_config_free(out);
    return rc;
}

int sc_config_load(const char *path, struct sc_config *out, char *err, size_t err_len)
{
    memset(out, 0, sizeof *out);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return fail(err, err_len, "config %s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (len + 4096 > cap) {
            char *nb = realloc(buf, cap = cap * 2 + 8192);
            if (!nb) {
                free(buf);
                fclose(fp);
                return fail(err, err_len, "config %s: out of memory", path);
            }
            buf = nb;
        }
        size_t n = fread(buf + len, 1, cap - len, fp);
        len += n;
        if (n == 0)
            break;
    }
    int ioerr = ferror(fp);
    fclose(fp);
    if (ioerr) {
        free(buf);
        return fail(err, err_len, "config %s: read error", path);
    }
    int rc = sc_config_parse(buf, len, 1, out, err, err_len);
    free(buf);
    return rc;
}

long long sc_config_retry_horizon_ms(const struct sc_consumer_config *k)
{
    long long total = 0;
    for (int a = 1; a < k->max_attempts; a++) {
        size_t step = (size_t)(a - 1) < k->n_retry_delays ? (size_t)(a - 1) : k->n_retry_delays - 1;
        total += k->retry_delays_ms[step];
    }
    return total;
}

const struct sc_consumer_config *sc_config_consumer(const struct sc_config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->n_consumers; i++)
        if (strcmp(cfg->consumers[i].name, name) == 0)
            return &cfg->consumers[i];
    return NULL;
}

/* Frees what the fields of t own in base (strings, arrays, lists, nested
 * sections and their elements). */
static void free_table(const struct table *t, char *base)
{
    for (size_t i = 0; i < t->n; i++) {
        const struct field *f = &t->fields[i];
        switch (f->type) {
        case F_STR:
        case F_JSON:
            free(*(char **)(base + f->off));
            break;
        case F_INT:
            break;
        case F_INT_ARR:
            free(*(int **)(base + f->off));
            break;
        case F_STR_LIST:
            free_list(*(char ***)(base + f->off), *(size_t *)(base + f->count_off));
            break;
        case F_OBJ:
            free_table(f->sub, base + f->off);
            break;
        case F_OBJ_ARR: {
            char *arr = *(char **)(base + f->off);
            for (size_t j = 0; arr && j < *(size_t *)(base + f->count_off); j++)
                free_table(f->sub, arr + j * f->sub->elem_size);
            free(arr);
            break;
        }
        }
    }
}

void sc_config_free(struct sc_config *c)
{
    if (!c)
        return;
    free_table(&top_table, (char *)c);
    free(c->amqp_url); /* copies of the first nodes, not table fields */
    free(c->mysql_url);
    memset(c, 0, sizeof *c);
}

/* The reference of every key: one Markdown table row per key, from the
 * tables themselves. */
static void print_reference(FILE *out, const struct table *t, const char *path)
{
    for (size_t i = 0; i < t->n; i++) {
        const struct field *f = &t->fields[i];
        char p[256], def[128] = "—", range[96] = "";
        if (f->type == F_OBJ_ARR)
            snprintf(p, sizeof p, "%s%s%s[]", path, path[0] ? "." : "", f->key);
        else
            join_path(p, sizeof p, path, f->key);
        if (f->type == F_OBJ || f->type == F_OBJ_ARR) {
            print_reference(out, f->sub, p);
            continue;
        }
        if (f->def_doc)
            snprintf(def, sizeof def, "%s", f->def_doc);
        else if (f->required)
            snprintf(def, sizeof def, "required");
        else if ((f->type == F_STR || f->type == F_JSON) && f->def_str)
            snprintf(def, sizeof def, "`%s`", f->def_str);
        else if (f->type == F_INT)
            snprintf(def, sizeof def, "%lld", f->def_int);
        else if (f->type == F_INT_ARR && f->def_ints) {
            size_t o = (size_t)snprintf(def, sizeof def, "`[");
            for (size_t j = 0; j < f->def_n && o < sizeof def; j++)
                o += (size_t)snprintf(def + o, sizeof def - o, "%s%d", j ? ", " : "", f->def_ints[j]);
            if (o < sizeof def)
                snprintf(def + o, sizeof def - o, "]`");
        }
        if (f->type == F_INT || f->type == F_INT_ARR)
            snprintf(range, sizeof range, " (%lld–%lld)", f->min, f->max);
        fprintf(out, "| `%s` | %s | %s%s |\n", p, def, f->help ? f->help : "", range);
    }
}

void sc_config_print_reference(FILE *out)
{
    fputs("| key | default | meaning |\n| --- | --- | --- |\n", out);
    print_reference(out, &top_table, "");
}

int sc_relay_per_aggregate(const struct sc_relay_config *r)
{
    return r->ordering && strcmp(r->ordering, "per_aggregate") == 0;
}

int sc_relay_binlog(const struct sc_relay_config *r)
{
    return r->source && strcmp(r->source, "binlog") == 0;
}
