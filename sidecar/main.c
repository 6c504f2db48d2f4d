/* sidecar: command line parsing and dispatch only. */
#include <amqp.h>
#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "config.h"
#include "consumer.h"
#include "lifecycle.h"
#include "log.h"
#include "relay.h"
#include "sc_build_config.h"

static void usage(FILE *out)
{
    fputs("usage: sidecar COMMAND [-c FILE]\n"
          "\n"
          "  consume -c FILE   run every consumer in the config until SIGTERM/SIGINT\n"
          "  relay   -c FILE   run the outbox relay until SIGTERM/SIGINT\n"
          "  check   -c FILE   validate the config, load handlers, connect to both servers\n"
          "  inspect -c FILE EVENT_ID [--json]\n"
          "                    the event's state everywhere; exit 1 when nothing is known\n"
          "  purge   -c FILE --older-than DURATION [--dry-run] [--force]\n"
          "                    delete consumed_event and PUBLISHED outbox_event rows past retention\n"
          "  dlq     -c FILE list|show|replay CONSUMER [--id EVENT_ID | --all]\n"
          "  version           print the version\n"
          "\n"
          "Environment: SIDECAR_AMQP_URL, SIDECAR_MYSQL_URL (or *_FILE), SIDECAR_LOG_LEVEL.\n"
          "Exit status: 0 clean stop, 1 runtime failure, 2 bad usage or bad config.\n",
          out);
}

/* Splits the arguments after the command into -c FILE and the rest. */
static int load_config(int argc, char **argv, struct sc_config *cfg, char **rest, int *n_rest)
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
    if (sc_config_load(path, cfg, err, sizeof err)) {
        fprintf(stderr, "sidecar: bad config: %s\n", err);
        return 2;
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
        usage(stdout);
        return 0;
    }
    static const char *const commands[] = {"consume", "relay", "check", "inspect", "purge", "dlq"};
    int known = 0;
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        known |= strcmp(cmd, commands[i]) == 0;
    if (!known) {
        fprintf(stderr, "sidecar: unknown command '%s'\n", cmd);
        usage(stderr);
        return 2;
    }
    struct sc_config cfg;
    char **rest = calloc((size_t)argc, sizeof *rest);
    int n_rest = 0;
    int rc = rest ? load_config(argc, argv, &cfg, rest, &n_rest) : 1;
    if (rc) {
        free(rest);
        return rc;
    }
    int takes_args = strcmp(cmd, "inspect") == 0 || strcmp(cmd, "purge") == 0 ||
                     strcmp(cmd, "dlq") == 0;
    if (!takes_args && n_rest > 0) {
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
    if (strcmp(cmd, "consume") == 0) {
        sc_info("sidecar %s starting", SC_VERSION);
        rc = sc_consume_run(&cfg);
    } else if (strcmp(cmd, "relay") == 0) {
        sc_info("sidecar %s starting", SC_VERSION);
        rc = sc_relay_run(&cfg);
    } else if (strcmp(cmd, "inspect") == 0) {
        rc = sc_inspect_run(&cfg, n_rest, rest);
    } else if (strcmp(cmd, "purge") == 0) {
        rc = sc_purge_run(&cfg, n_rest, rest);
    } else if (strcmp(cmd, "dlq") == 0) {
        rc = sc_dlq_run(&cfg, n_rest, rest);
    } else {
        rc = sc_consume_check(&cfg);
    }
    free(rest);
    sc_config_free(&cfg);
    mysql_library_end();
    return rc;
}
