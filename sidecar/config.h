/* Configuration: one JSON file, validated against a table of known keys,
 * with the URLs overridable from the environment. */
#ifndef SC_CONFIG_H
#define SC_CONFIG_H

#include <stddef.h>
#include <stdio.h>

/* The most deliveries in one consumer transaction and rows in one relay
 * claim (the bound of consumers[].batch_max and relay.batch). */
#define SC_BATCH_LIMIT 1000
/* The most partition queues of an ordered consumer. */
#define SC_PARTITIONS_MAX 64

struct sc_binding {
    char *exchange;
    char *routing_key;
};

/* consumers[].inspect_effects[]: where `sidecar inspect` finds the
 * consumer's effect of an event. Every name is a checked SQL identifier. */
struct sc_inspect_effect {
    char *table;
    char *event_id_column;     /* holds the event id (default event_id) */
    char **columns;            /* the columns shown */
    size_t n_columns;
};

/* The most entries of inspect_effects, and of its columns. */
#define SC_INSPECT_EFFECTS_MAX 8
#define SC_INSPECT_COLUMNS_MAX 32

/* consumers[].ordering: present = per-key order (consume/order.c). */
struct sc_ordering_config {
    int present;
    char *key;                 /* "subject" or "data/<RFC 6901 pointer>" */
    int partitions;            /* queues spread by the consistent-hash exchange */
    char *on_dead_letter;      /* "hold" or "skip" */
    int tenant_returns;        /* with tenants: a down tenant's deliveries go round through
                                  one delay queue (set by the config check) */
};

struct sc_consumer_config {
    char *name;
    char *queue;
    struct sc_binding *bindings;
    size_t n_bindings;
    char *handler;             /* path of the .so */
    char *handler_config;      /* handler_config as compact JSON text */
    int prefetch;
    int batch_max;
    int workers;
    int max_attempts;
    int *retry_delays_ms;
    size_t n_retry_delays;
    char *dead_letter_queue;
    char *queue_type;          /* "classic" or "quorum" */
    int db_outage_hold_ms;     /* deliveries kept while the database session is remade */
    int max_message_bytes;     /* larger bodies are dead-lettered; also a batch's byte budget */
    char *envelope;            /* "cloudevents" (structured, binary, batch) or "plain" */
    char *plain_source;        /* plain: the source attribute (NULL: the exchange) */
    char *plain_subject;       /* plain: RFC 6901 pointer into the body for subject, or NULL */
    struct sc_inspect_effect *inspect_effects;
    size_t n_inspect_effects;
    struct sc_ordering_config ordering;
};

struct sc_relay_config {
    int present;
    char *worker_id;
    char *exchange;
    int batch;
    int lease_ms;
    int poll_ms;
    int confirm_timeout_ms;
    char *content_mode;        /* "structured" or "binary" */
    int max_message_bytes;     /* a larger body is FAILED, never sent */
    char *ordering; /* "none", or "per_aggregate": an aggregate's events in order */
    char *source;   /* "poll" (claim and mark rows) or "binlog" (read the binary log) */
};

/* 1 when relay.source is "binlog". */
int sc_relay_binlog(const struct sc_relay_config *r);

/* 1 when relay.ordering is "per_aggregate". */
int sc_relay_per_aggregate(const struct sc_relay_config *r);

/* tenants: one database per tenant (consume/tenant.h). present = on. */
struct sc_tenants_config {
    int present;
    char *key;                 /* where a message's tenant is read: the ordering.key syntax,
                                  "extension:<name>" or "header:<name>" */
    char **database_urls;      /* mysql:// URLs with {tenant} in the database name (nodes) */
    size_t n_database_urls;
    char *names;               /* POSIX extended regex a tenant name must match */
    int max_connections;       /* tenant sessions open at once, per process */
    int idle_close_ms;         /* a tenant session unused this long is closed */
    int read_timeout_s;        /* a tenant session's reads and writes time out after this
                                  (0 in the file: mysql.lock_wait_timeout_s + 5) */
    char **list;               /* the tenants known up front (may be empty) */
    size_t n_list;
    int discover;              /* the tenants are the databases database_url's name matches */
    int discover_ms;           /* how often the relay lists them again */
    int metrics_top;           /* per-tenant series for this many tenants, the largest */
};

/* The longest tenant name: what a database name leaves beside a prefix. */
#define SC_TENANT_MAX 48

/* The longest relay.worker_id: outbox_event.lease_owner is VARCHAR(128). */
#define SC_WORKER_ID_MAX 128

struct sc_config {
    /* amqp.url and mysql.url take one URL or an array (cluster nodes, tried
     * in turn); *_urls hold every node, *_url is the first (for messages). */
    char *amqp_url;
    char **amqp_urls;
    size_t n_amqp_urls;
    int amqp_heartbeat_s;
    int amqp_connect_timeout_ms;
    char *amqp_tls_ca, *amqp_tls_cert, *amqp_tls_key;
    int amqp_tls_verify_hostname;
    char *mysql_url;
    char **mysql_urls;
    size_t n_mysql_urls;
    char *mysql_tls_ca, *mysql_tls_cert, *mysql_tls_key;
    int mysql_lock_wait_timeout_s;
    int mysql_connect_timeout_s;
    int mysql_allow_unsafe_durability; /* start and run on settings that can lose a COMMIT */
    char *http_listen;         /* NULL when not set: the command's own default */
    char *log_level;
    struct sc_consumer_config *consumers;
    size_t n_consumers;
    struct sc_relay_config relay;
    int purge_horizon_s;   /* purge.redelivery_horizon_s */
    int purge_batch;       /* purge.batch */
    char *console_listen;      /* console.listen */
    char *console_token_file;  /* console.token_file; NULL: the console is read-only */
    int console_sample_ms;     /* console.sample_ms */
    char *otel_endpoint;       /* otel.endpoint: OTLP/HTTP JSON traces, NULL: no export */
    struct sc_tenants_config tenants;
};

/* The longest a message of consumer k can keep coming back through its
 * delay queues, in ms: the delays of attempts 1..max_attempts-1. */
long long sc_config_retry_horizon_ms(const struct sc_consumer_config *k);

/* Loads and validates FILE, then applies SIDECAR_AMQP_URL(_FILE),
 * SIDECAR_MYSQL_URL(_FILE) and SIDECAR_LOG_LEVEL. The URL variables take a
 * comma-separated list of URLs; a _FILE variable takes a comma-separated
 * list of files, each holding one URL or several (separated by commas or
 * newlines). Returns 0, or -1 with a
 * message naming the offending key (e.g. "consumers[0].prefetchh: unknown
 * key") in err. */
int sc_config_load(const char *path, struct sc_config *out, char *err, size_t err_len);

/* The same from JSON text; env overrides are applied only when use_env. */
int sc_config_parse(const char *text, size_t len, int use_env, struct sc_config *out,
                    char *err, size_t err_len);

void sc_config_free(struct sc_config *cfg);

/* The consumer named name, or NULL. */
const struct sc_consumer_config *sc_config_consumer(const struct sc_config *cfg, const char *name);

/* Prints the reference of every key (Markdown table: key, default,
 * meaning with bounds) from the config tables. */
void sc_config_print_reference(FILE *out);

#endif
