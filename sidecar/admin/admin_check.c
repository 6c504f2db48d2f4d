/* `sidecar check`: validates what start-up would, then loads every handler,
 * connects to every configured node of both servers (printing the database
 * settings the guarantees depend on, and refusing those under which the
 * relay is unsafe) and declares the topology, printing what it found. */
#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>

#include "admin.h"
#include "consume/held.h"
#include "io/amqp_conn.h"
#include "io/db.h"
#include "io/db_durability.h"
#include "io/db_settings.h"
#include "io/schema.h"
#include "log.h"
#include "plugin.h"
#include "try.h"
#include "io/url.h"

/* Checks one database node: connects, prints what it runs with. Returns 0,
 * or 1 when it cannot connect, its settings make the relay unsafe, or a
 * COMMIT on it is not durable while the config consumes or relays (and
 * mysql.allow_unsafe_durability does not allow it). */
static int check_mysql_node(const struct sc_config *cfg, size_t i)
{
    struct sc_config one = *cfg; /* the same settings, this node only */
    char *url = cfg->n_mysql_urls ? cfg->mysql_urls[i] : cfg->mysql_url;
    one.mysql_url = url;
    one.mysql_urls = &url;
    one.n_mysql_urls = 1;
    char where[300], found[600], why[900];
    sc_url_endpoint(url, where, sizeof where);
    struct sc_db db;
    struct sc_db_err e = {0};
    if (sc_db_connect(&db, &one, &e)) {
        fprintf(stderr, "sidecar: mysql: error %u: %s (node %zu, %s)\n", e.code, e.msg, i, where);
        return 1;
    }
    struct sc_db_settings s;
    int rc = 0;
    if (sc_db_settings_read(&db, &s, &e)) {
        fprintf(stderr, "sidecar: mysql node %zu (%s): cannot read its settings: error %u: %s\n", i,
                where, e.code, e.msg);
        rc = 1;
    } else {
        sc_db_settings_describe(&s, found, sizeof found);
        printf("mysql: connected to node %zu (%s), server %s: %s\n", i, where,
               mysql_get_server_info(db.conn), found);
        sc_db_settings_caution(&s, why, sizeof why);
        if (why[0])
            printf("mysql: node %zu: caution: %s\n", i, why);
        struct sc_durability d;
        sc_durability_eval(&s, &d);
        sc_durability_describe(&d, why, sizeof why);
        if (!d.unsafe)
            ;
        else if (!cfg->n_consumers && !cfg->relay.present)
            printf("mysql: node %zu: not durable (no consumer or relay configured here): %s\n", i,
                   why);
        else if (cfg->mysql_allow_unsafe_durability)
            printf("mysql: node %zu: not durable, allowed by mysql.allow_unsafe_durability: %s\n",
                   i, why);
        else {
            fprintf(stderr, "sidecar: mysql node %zu (%s): not durable: %s (or set "
                    "mysql.allow_unsafe_durability to run on it anyway)\n", i, where, why);
            rc = 1;
        }
        if (sc_db_settings_unsafe(&s, why, sizeof why)) {
            if (cfg->relay.present) {
                fprintf(stderr, "sidecar: mysql node %zu (%s): unsafe for the relay: %s\n", i, where,
                        why);
                rc = 1;
            } else {
                printf("mysql: node %zu: unsafe for a relay (none configured here): %s\n", i, why);
            }
        }
    }
    sc_db_close(&db);
    return rc;
}

/* Connects to one broker node. Returns 0, or 1 when it cannot. */
static int check_amqp_node(const struct sc_config *cfg, size_t i)
{
    struct sc_config one = *cfg;
    char *url = cfg->n_amqp_urls ? cfg->amqp_urls[i] : cfg->amqp_url;
    one.amqp_url = url;
    one.amqp_urls = &url;
    one.n_amqp_urls = 1;
    char where[300], err[512];
    sc_url_endpoint(url, where, sizeof where);
    struct sc_amqp a;
    if (sc_amqp_connect(&a, &one, "sidecar check", err, sizeof err)) {
        fprintf(stderr, "sidecar: amqp node %zu (%s): %s\n", i, where, err);
        return 1;
    }
    printf("amqp: connected to node %zu (%s)\n", i, where);
    sc_amqp_close(&a);
    return 0;
}

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
    int rc = 0, bad_config = 0;
    size_t n_mysql = cfg->n_mysql_urls ? cfg->n_mysql_urls : 1;
    size_t n_amqp = cfg->n_amqp_urls ? cfg->n_amqp_urls : 1;
    for (size_t i = 0; i < n_mysql; i++)
        rc |= check_mysql_node(cfg, i);
    for (size_t i = 0; n_amqp > 1 && i < n_amqp; i++)
        rc |= check_amqp_node(cfg, i);
    /* Every node has been checked and reported above. The connects below
     * fail over between the nodes, and their own lines ("node N: ...;
     * trying the next node", "connected to node N of M") would report the
     * same nodes again, as JSON among check's plain lines. */
    sc_log_min_level = SC_LOG_ERROR;
    /* Handlers that can check themselves against the schema (sql.so: every
     * statement prepares) do it now, on the first node. */
    struct sc_db db;
    struct sc_db_err e = {0};
    if (sc_db_connect(&db, cfg, &e) == 0) {
        int parts = (cfg->n_consumers ? SC_SCHEMA_CONSUMER : 0) |
                    (cfg->relay.present ? sc_schema_relay_parts(cfg) : 0);
        for (size_t i = 0; i < cfg->n_consumers; i++) {
            if (sc_held_mode(&cfg->consumers[i]))
                parts |= SC_SCHEMA_HOLD;
            if (cfg->consumers[i].ordering.present && cfg->tenants.present)
                parts |= SC_SCHEMA_TENANT_COPY;
        }
        char why[512];
        int schema = parts ? sc_schema_check(&db, parts, why, sizeof why, &e) : 0;
        if (schema == 1) {
            fprintf(stderr, "sidecar: mysql: %s\n", why);
            bad_config = 1;
        } else if (schema < 0) {
            fprintf(stderr, "sidecar: mysql: the schema could not be checked: error %u: %s\n",
                    e.code, e.msg);
            rc = 1;
        } else if (parts) {
            int p = parts & ~(SC_SCHEMA_HOLD | SC_SCHEMA_TENANT_COPY);
            const char *who = (p & SC_SCHEMA_CONSUMER) && (p & SC_SCHEMA_RELAY)
                                  ? "the consumers and the relay need"
                              : p == SC_SCHEMA_CONSUMER ? "the consumers need"
                                                        : "the relay needs";
            printf("mysql: schema has what %s\n", who);
        }
        if (cfg->relay.present && sc_relay_binlog(&cfg->relay))
            rc |= sc_check_binlog(&db, cfg);
        for (size_t i = 0; i < cfg->n_consumers; i++) {
            char err[1024];
            int had;
            if (sc_try_check_handler(&ps[i], db.conn, &had, err, sizeof err)) {
                fprintf(stderr, "sidecar: consumers[%zu].handler_config: %s\n", i, err);
                bad_config = 1;
            } else if (had) {
                printf("handler: consumer %s: checked against the database\n",
                       cfg->consumers[i].name);
            }
        }
        sc_db_close(&db);
    }
    for (size_t i = 0; i < cfg->n_consumers; i++) {
        struct sc_amqp a;
        char err[1024];
        int declared = -1;
        if (sc_amqp_connect(&a, cfg, "sidecar check", err, sizeof err) ||
            (declared = sc_amqp_declare_consumer(&a, &cfg->consumers[i], err, sizeof err))) {
            fprintf(stderr, "sidecar: consumers[%zu]: %s\n", i, err);
            rc = 1;
            /* A queue the consumer would refuse at start: as bad as a bad key. */
            if (declared == SC_AMQP_REFUSED)
                bad_config = 1;
        } else {
            printf("amqp: consumer %s: queue %s and dead-letter queue %s declared\n",
                   cfg->consumers[i].name, cfg->consumers[i].queue,
                   cfg->consumers[i].dead_letter_queue);
        }
        sc_amqp_close(&a);
        printf("handler: consumer %s: %s loaded\n", cfg->consumers[i].name,
               ps[i].h->name);
    }
    if (cfg->n_consumers == 0 && n_amqp == 1) {
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
    return bad_config ? 2 : rc;
}
