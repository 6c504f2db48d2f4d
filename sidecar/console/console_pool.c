/* The few database sessions the console's requests share (console.h says
 * why so few): a request takes an idle one, else a free slot to connect
 * in, else it is refused at once. The samplers' sessions are set up the
 * same way (sc_console_db_session). */
#include <stdio.h>
#include <string.h>

#include "console.h"
#include "tenant.h"

void sc_console_pool_init(struct sc_console_pool *p)
{
    pthread_mutex_init(&p->lock, NULL);
}

void sc_console_pool_close(struct sc_console_pool *p)
{
    for (int i = 0; i < SC_CONSOLE_DB_SLOTS; i++)
        if (sc_db_connected(&p->db[i]))
            sc_db_close(&p->db[i]);
    pthread_mutex_destroy(&p->lock);
}

void sc_console_db_session(struct sc_db *db)
{
    struct sc_db_err e = {0};
    /* Each read sees what is committed now (autocommit is off: under
     * REPEATABLE READ a session would keep reading its first snapshot). */
    sc_db_query(db, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", &e);
    /* A statement the server takes longer than 5 s over is stopped there:
     * MariaDB's name (seconds), then MySQL's (milliseconds, SELECT only). */
    if (sc_db_query(db, "SET SESSION max_statement_time = 5", &e))
        sc_db_query(db, "SET SESSION max_execution_time = 5000", &e);
}

int sc_console_db_broken(const struct sc_db_err *e)
{
    return e->cls == SC_DBERR_CONNECTION || e->code >= 2000;
}

json_t *sc_console_db_error(const char *what, const struct sc_db_err *e, unsigned *status)
{
    char msg[700];
    snprintf(msg, sizeof msg, "database: %s: error %u: %s", what, e->code, e->msg);
    *status = sc_console_db_broken(e) ? 503 : 500;
    return json_pack("{s:s}", "error", msg);
}

/* Connects slot i to tenant's database (NULL: mysql.url's). */
static int pool_connect(struct sc_console *con, struct sc_db *db, const char *tenant,
                        struct sc_db_err *e)
{
    if (!tenant)
        return sc_db_connect(db, &con->cfg_short, e);
    const struct sc_tenants_config *tc = &con->cfg->tenants;
    char **urls;
    if (sc_tenant_urls(tc, tenant, &urls)) {
        snprintf(e->msg, sizeof e->msg, "out of memory");
        e->cls = SC_DBERR_FAILURE;
        return -1;
    }
    int rc = sc_db_connect_urls(db, &con->cfg_short, urls, tc->n_database_urls, e);
    sc_tenant_urls_free(urls, tc->n_database_urls);
    return rc;
}

/* An idle session in that database (*ready set), else a free slot to
 * connect in, else an idle session elsewhere, to be closed and connected
 * again: its index, marked busy, or -1 when every slot is busy. */
static int take_slot(struct sc_console_pool *p, const char *in, int *ready)
{
    int found = -1;
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < SC_CONSOLE_DB_SLOTS && found < 0; i++)
        if (!p->busy[i] && sc_db_connected(&p->db[i]) && strcmp(p->tenant[i], in) == 0)
            found = i;
    *ready = found >= 0;
    for (int i = 0; i < SC_CONSOLE_DB_SLOTS && found < 0; i++)
        if (!p->busy[i] && !sc_db_connected(&p->db[i]))
            found = i;
    for (int i = 0; i < SC_CONSOLE_DB_SLOTS && found < 0; i++)
        if (!p->busy[i])
            found = i;
    if (found >= 0)
        p->busy[found] = 1;
    pthread_mutex_unlock(&p->lock);
    return found;
}

struct sc_db *sc_console_db_get(struct sc_console *con, const char *tenant, int *slot,
                                json_t **err, unsigned *status)
{
    struct sc_console_pool *p = &con->pool;
    const char *in = tenant ? tenant : ""; /* p->tenant's form */
    int ready;
    int i = take_slot(p, in, &ready);
    if (i < 0) {
        *status = 503;
        *err = json_pack("{s:s}", "error",
                         "database: " "4" " requests of this console are already waiting for it "
                         "(slow or not answering); try again");
        return NULL;
    }
    if (!ready)
        sc_db_close(&p->db[i]); /* another database's, or none */
    if (!sc_db_connected(&p->db[i])) {
        struct sc_db_err e = {0};
        if (pool_connect(con, &p->db[i], tenant, &e)) {
            *err = sc_console_db_error("connect", &e, status);
            *status = 503;
            pthread_mutex_lock(&p->lock);
            p->busy[i] = 0;
            pthread_mutex_unlock(&p->lock);
            return NULL;
        }
        snprintf(p->tenant[i], sizeof p->tenant[i], "%s", in);
        sc_console_db_session(&p->db[i]);
    }
    *slot = i;
    return &p->db[i];
}

void sc_console_db_put(struct sc_console *con, int slot, int broken)
{
    struct sc_console_pool *p = &con->pool;
    struct sc_db_err e = {0};
    if (broken || sc_db_rollback(&p->db[slot], &e))
        sc_db_close(&p->db[slot]);
    pthread_mutex_lock(&p->lock);
    p->busy[slot] = 0;
    pthread_mutex_unlock(&p->lock);
}
