/* sidecar: command line parsing and dispatch only. */
#include <jansson.h>
#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/admin.h"
#include "config.h"
#include "console/console.h"
#include "consume/consumer.h"
#include "io/sc_rabbitmq.h"
#include "lifecycle.h"
#include "log.h"
#include "relay/relay.h"
#include "tenant.h"
#include "admin/try.h"
#include "sc_build_config.h"

/* One row per command: its name, how it is called, what it does, whether
 * it takes arguments after -c FILE, whether it talks to the broker, where
 * its HTTP endpoints listen when http.listen is not set, and what runs it. */
struct command {
    const char *name;
    const char *synopsis;
    const char *help;
    int takes_args;
    int daemon; /* logs its start */
    int broker; /* 0: amqp.url may be left out (the command never connects) */
    const char *http_default;
    int (*run)(const struct sc_config *cfg, int argc, char **argv);
};

/* The default http.listen of the two long-running commands: one consume and
 * one relay on the same host each get their own port (9465 is kept for the
 * console). Several of one kind on a host need http.listen each. */
#define HTTP_DEFAULT_CONSUME "127.0.0.1:9464"
#define HTTP_DEFAULT_RELAY "127.0.0.1:9466"

static void warn_silence(const struct sc_config *cfg)
{
    char advice[512];
    if (sc_tenant_silence_advice(cfg, advice, sizeof advice))
        sc_warn("%s", advice);
}

static int run_consume(const struct sc_config *cfg, int argc, char **argv)
{
    (void)argc, (void)argv;
    warn_silence(cfg);
    return sc_consume_run(cfg);
}

static int run_relay(const struct sc_config *cfg, int argc, char **argv)
{
    (void)argc, (void)argv;
    warn_silence(cfg);
    return sc_relay_run(cfg);
}

static int run_check(const struct sc_config *cfg, int argc, char **argv)
{
    const char *tenant = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--tenant") == 0 && i + 1 < argc)
            tenant = argv[++i];
        else {
            fprintf(stderr, "sidecar: check: unexpected argument %s (usage: check -c FILE "
                    "[--tenant NAME])\n", argv[i]);
            return 2;
        }
    }
    if (tenant && sc_admin_tenant_ok(cfg, "check", tenant))
        return 2;
    int rc = sc_check_run(cfg);
    int t = sc_check_tenants(cfg, tenant);
    return rc == 2 || t == 2 ? 2 : rc | t;
}

static const struct command commands[] = {
    {"consume", "consume -c FILE", "run every consumer in the config until SIGTERM/SIGINT", 0, 1,
     1, HTTP_DEFAULT_CONSUME, run_consume},
    {"relay", "relay   -c FILE", "run the outbox relay until SIGTERM/SIGINT", 0, 1, 1,
     HTTP_DEFAULT_RELAY, run_relay},
    {"check", "check   -c FILE [--tenant NAME]", "validate the config, load handlers, connect to "
     "both servers (with tenants: to each tenant's database, listed or discovered, or NAME's)", 1,
     0, 1, NULL, run_check},
    {"migrate", "migrate -c FILE [--tenant NAME | --all] [--schema DIR]",
     "apply every schema file (DIR, default " SC_SCHEMA_DIR ") to mysql.url's database, NAME's, "
     "or each tenant's (listed or discovered); creates no database (database only)", 1, 0, 0, NULL,
     sc_migrate_run},
    {"inspect", "inspect -c FILE EVENT_ID [--source SOURCE] [--json] | --aggregate TYPE ID [--json]"
     " [--tenant NAME]",
     "the event's state everywhere, or every event of an aggregate in order (in NAME's "
     "database); exit 1 when nothing is known", 1, 0, 1, NULL, sc_inspect_run},
    {"purge", "purge   -c FILE --older-than DURATION [--dry-run] [--force] [--tenant NAME]",
     "delete consumed_event and PUBLISHED outbox_event rows past retention, in mysql.url's "
     "database and each tenant's (listed or discovered), or only NAME's (database only)", 1,
     0, 0, NULL, sc_purge_run},
    {"dlq", "dlq     -c FILE list|show|replay|release CONSUMER [--id EVENT_ID | --all | --key KEY [--tenant NAME]]",
     "list, show or replay dead-lettered messages; release a held key", 1, 0, 1, NULL, sc_dlq_run},
    {"try", "try     -c FILE --consumer NAME EVENT.json...",
     "parse, claim and handle each event in a transaction that is always rolled back; exit 0 "
     "when every event would apply (database only)", 1, 0, 0, NULL, sc_try_run},
    {"console", "console -c FILE", "the operator console (page and JSON API) on console.listen "
     "until SIGTERM/SIGINT", 0, 1, 1, NULL, sc_console_run},
};
#define N_COMMANDS (sizeof commands / sizeof *commands)

static void usage(FILE *out)
{
    fputs("usage: sidecar COMMAND [-c FILE]\n\n", out);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %s\n      %s\n", commands[i].synopsis, commands[i].help);
    fputs("  version\n      print the version\n"
          "  help config\n      every config key, its default and bounds (Markdown)\n"
          "\n"
          "Environment: SIDECAR_AMQP_URL, SIDECAR_MYSQL_URL (or *_FILE), SIDECAR_LOG_LEVEL.\n"
          "migrate, purge and try never connect to the broker: their config needs no amqp section.\n"
          "http.listen defaults: consume " HTTP_DEFAULT_CONSUME ", relay " HTTP_DEFAULT_RELAY ".\n"
          "Exit status: 0 clean stop, 1 runtime failure, 2 bad usage or bad config.\n",
          out);
}

/* Stands in for amqp.url while a command that never connects to the broker
 * loads its config; taken out again after loading. */
#define NO_BROKER_URL "amqp://no-broker.invalid/"

/* Loads path for a command that never talks to the broker: when neither the
 * file nor the environment gives amqp.url, the loader (which requires it for
 * everything else) is handed the file with a stand-in URL, and the loaded
 * config then has no broker at all (amqp_url NULL, no amqp_urls). Any other
 * amqp key is still checked. Returns what sc_config_load returns. */
static int load_without_broker(const char *path, struct sc_config *cfg, char *err, size_t len)
{
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    json_t *amqp = json_is_object(root) ? json_object_get(root, "amqp") : NULL;
    if (!json_is_object(root) || (amqp && (!json_is_object(amqp) || json_object_get(amqp, "url")))) {
        json_decref(root); /* nothing to stand in for: the loader says what is wrong, if anything */
        return sc_config_load(path, cfg, err, len);
    }
    if (!amqp && json_object_set_new(root, "amqp", amqp = json_object()))
        amqp = NULL;
    char *text = NULL;
    if (amqp && json_object_set_new(amqp, "url", json_string(NO_BROKER_URL)) == 0)
        text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!text) {
        snprintf(err, len, "config %s: out of memory", path);
        return -1;
    }
    int rc = sc_config_parse(text, strlen(text), 1, cfg, err, len);
    free(text);
    if (rc == 0 && cfg->n_amqp_urls == 1 && strcmp(cfg->amqp_urls[0], NO_BROKER_URL) == 0) {
        free(cfg->amqp_urls[0]);
        free(cfg->amqp_urls);
        free(cfg->amqp_url);
        cfg->amqp_urls = NULL;
        cfg->n_amqp_urls = 0;
        cfg->amqp_url = NULL;
    }
    return rc;
}

/* Splits the arguments after the command into -c FILE and the rest, and
 * loads the config as command c needs it. */
static int load_config(const struct command *c, int argc, char **argv, struct sc_config *cfg,
                       char **rest, int *n_rest)
{
    const char *path = NULL;
    *n_rest = 0;
    for (int i = 2; i < argc; i++) {
        if ((strcmp(argv[i], "-c") == 0 || strcmp(argv[i], "--config") == 0) && i + 1 < argc)
            path = argv[++i];
        else
            rest[(*n_rest)++] = argv[i];
    }
    if (!path) {
        fprintf(stderr, "sidecar %s: -c FILE is required\n", argv[1]);
        usage(stderr);
        return 2;
    }
    char err[512];
    if (c->broker ? sc_config_load(path, cfg, err, sizeof err)
                  : load_without_broker(path, cfg, err, sizeof err)) {
        fprintf(stderr, "sidecar: bad config: %s\n", err);
        return 2;
    }
    if (!cfg->http_listen && c->http_default && !(cfg->http_listen = strdup(c->http_default))) {
        sc_config_free(cfg);
        return 1;
    }
    sc_log_set_level(cfg->log_level);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("sidecar %s (rabbitmq-c %s, mysql client %s%s)\n", SC_VERSION, amqp_version(),
               mysql_get_client_info(), SC_FAULT_POINTS ? ", FAULT POINTS COMPILED IN" : "");
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        if (argc > 2 && strcmp(argv[2], "config") == 0)
            sc_config_print_reference(stdout); /* docs/configuration.md's table */
        else
            usage(stdout);
        return 0;
    }
    const struct command *c = NULL;
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(cmd, commands[i].name) == 0)
            c = &commands[i];
    if (!c) {
        fprintf(stderr, "sidecar: unknown command '%s'\n", cmd);
        usage(stderr);
        return 2;
    }
    struct sc_config cfg;
    char **rest = calloc((size_t)argc, sizeof *rest);
    int n_rest = 0;
    int rc = rest ? load_config(c, argc, argv, &cfg, rest, &n_rest) : 1;
    if (rc) {
        free(rest);
        return rc;
    }
    if (!c->takes_args && n_rest > 0) {
        fprintf(stderr, "sidecar %s: unexpected argument '%s'\n", cmd, rest[0]);
        usage(stderr);
        sc_config_free(&cfg);
        free(rest);
        return 2;
    }
    if (mysql_library_init(0, NULL, NULL)) {
        fprintf(stderr, "sidecar: cannot initialise the MySQL client library\n");
        sc_config_free(&cfg);
        return 1;
    }
    sc_lifecycle_init();
    if (c->daemon)
        sc_info("sidecar %s starting", SC_VERSION);
    rc = c->run(&cfg, n_rest, rest);
    free(rest);
    sc_config_free(&cfg);
    mysql_library_end();
    return rc;
}
