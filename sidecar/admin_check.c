/* `sidecar check`: validates what start-up would, then loads every handler,
 * connects to both servers and declares the topology, printing what it
 * found. */
#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>

#include "admin.h"
#include "amqp_conn.h"
#include "db.h"
#include "plugin.h"
#include "try.h"

int sc_check_run(const struct sc_config *cfg)
{
    struct sc_plugin *ps = calloc(cfg->n_consumers ? cfg->n_consumers : 1, sizeof *ps);
    if (!ps)
        return 1;
    for (size_t i = 0; i < cfg->n_consumers; i++) {
        char err[1024];
        if (sc_plugin_load(&ps[i], cfg->consumers[i].handler, cfg->consumers[i].handler_config,
                           err, sizeof err)) {
            fprintf(stderr, "sidecar: consumers[%zu].handler: %s\n", i, err);
            for (size_t j = 0; j < i; j++)
                sc_plugin_unload(&ps[j]);
            free(ps);
            return 2;
        }
    }
    int rc = 0;
    struct sc_db db;
    struct sc_db_err e = {0};
    if (sc_db_connect(&db, cfg, &e)) {
        fprintf(stderr, "sidecar: mysql: error %u: %s\n", e.code, e.msg);
        rc = 1;
    } else {
        printf("mysql: connected (server %s)\n", mysql_get_server_info(db.conn));
        /* Handlers that can check themselves against the schema (sql.so:
         * every statement prepares) do it now. */
        for (size_t i = 0; i < cfg->n_consumers; i++) {
            char err[1024];
            int had;
            if (sc_try_check_handler(&ps[i], db.conn, &had, err, sizeof err)) {
                fprintf(stderr, "sidecar: consumers[%zu].handler_config: %s\n", i, err);
                rc = 2;
            } else if (had) {
                printf("handler: consumer %s: checked against the database\n",
                       cfg->consumers[i].name);
            }
        }
        sc_db_close(&db);
    }
    for (size_t i = 0; i < cfg->n_consumers; i++) {
        struct sc_amqp a;
        char err[512];
        if (sc_amqp_connect(&a, cfg, "sidecar check", err, sizeof err) ||
            sc_amqp_declare_consumer(&a, &cfg->consumers[i], err, sizeof err)) {
            fprintf(stderr, "sidecar: consumers[%zu]: %s\n", i, err);
            rc = 1;
        } else {
            printf("amqp: consumer %s: queue %s and dead-letter queue %s declared\n",
                   cfg->consumers[i].name, cfg->consumers[i].queue,
                   cfg->consumers[i].dead_letter_queue);
        }
        sc_amqp_close(&a);
        printf("handler: consumer %s: %s loaded\n", cfg->consumers[i].name,
               ps[i].h->name);
    }
    if (cfg->n_consumers == 0) {
        struct sc_amqp a;
        char err[512];
        if (sc_amqp_connect(&a, cfg, "sidecar check", err, sizeof err)) {
            fprintf(stderr, "sidecar: %s\n", err);
            rc = 1;
        } else {
            printf("amqp: connected\n");
        }
        sc_amqp_close(&a);
    }
    for (size_t i = 0; i < cfg->n_consumers; i++)
        sc_plugin_unload(&ps[i]);
    free(ps);
    return rc;
}
