#include "db_settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"

/* Copies the value of each named row of a two-column SHOW result. */
static int read_show(struct sc_db *db, const char *sql, struct sc_db_settings *s,
                     struct sc_db_err *e)
{
    MYSQL_RES *r = sc_db_select(db, sql, e);
    if (!r)
        return -1;
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(r))) {
        const char *k = row[0] ? row[0] : "", *v = row[1] ? row[1] : "";
        if (strcasecmp(k, "binlog_format") == 0)
            snprintf(s->binlog_format, sizeof s->binlog_format, "%s", v);
        else if (strcasecmp(k, "log_bin") == 0)
            s->log_bin = strcasecmp(v, "ON") == 0 || strcmp(v, "1") == 0;
        else if (strcasecmp(k, "transaction_isolation") == 0 || strcasecmp(k, "tx_isolation") == 0)
            snprintf(s->isolation, sizeof s->isolation, "%s", v);
        else if (strcasecmp(k, "wsrep_on") == 0)
            s->wsrep_on = strcasecmp(v, "ON") == 0 || strcmp(v, "1") == 0;
        else if (strcasecmp(k, "wsrep_cluster_size") == 0)
            s->cluster_size = atoi(v);
        else if (strcasecmp(k, "wsrep_cluster_status") == 0)
            snprintf(s->cluster_status, sizeof s->cluster_status, "%s", v);
    }
    mysql_free_result(r);
    return 0;
}

int sc_db_settings_read(struct sc_db *db, struct sc_db_settings *s, struct sc_db_err *e)
{
    memset(s, 0, sizeof *s);
    /* SHOW ... WHERE works on MariaDB and MySQL and leaves out what a server
     * does not have (tx_isolation is MariaDB 10's name, wsrep_* Galera's). */
    if (read_show(db, "SHOW SESSION VARIABLES WHERE Variable_name IN ('binlog_format', 'log_bin', "
                      "'transaction_isolation', 'tx_isolation', 'wsrep_on')", s, e))
        return -1;
    if (s->wsrep_on &&
        read_show(db, "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_cluster_size', "
                      "'wsrep_cluster_status')", s, e))
        return -1;
    return sc_db_rollback(db, e);
}

void sc_db_settings_describe(const struct sc_db_settings *s, char *out, size_t len)
{
    int n = snprintf(out, len, "binlog_format=%s log_bin=%s transaction_isolation=%s wsrep_on=%s",
                     s->binlog_format[0] ? s->binlog_format : "(none)", s->log_bin ? "ON" : "OFF",
                     s->isolation[0] ? s->isolation : "(unknown)", s->wsrep_on ? "ON" : "OFF");
    if (s->wsrep_on && n > 0 && (size_t)n < len)
        snprintf(out + n, len - (size_t)n, " wsrep_cluster_size=%d wsrep_cluster_status=%s",
                 s->cluster_size, s->cluster_status[0] ? s->cluster_status : "(unknown)");
}

int sc_db_settings_unsafe(const struct sc_db_settings *s, char *why, size_t len)
{
    int replicated = s->log_bin || s->wsrep_on;
    if (replicated && strcasecmp(s->binlog_format, "STATEMENT") == 0) {
        snprintf(why, len, "binlog_format=STATEMENT with %s: the relay's claim (SELECT ... FOR UPDATE "
                 "SKIP LOCKED LIMIT n, then UPDATE) is not safe for statement-based replication, "
                 "replicas could mark other rows; set binlog_format=ROW",
                 s->wsrep_on ? "wsrep_on=ON" : "log_bin=ON");
        return -1;
    }
    if (s->wsrep_on && strcasecmp(s->binlog_format, "ROW") != 0) {
        snprintf(why, len, "binlog_format=%s with wsrep_on=ON: Galera replicates only row events; "
                 "set binlog_format=ROW", s->binlog_format[0] ? s->binlog_format : "(none)");
        return -1;
    }
    if (s->wsrep_on && strcasecmp(s->cluster_status, "Primary") != 0) {
        snprintf(why, len, "wsrep_cluster_status=%s: this Galera node is not in the primary "
                 "component and cannot commit", s->cluster_status[0] ? s->cluster_status : "(unknown)");
        return -1;
    }
    return 0;
}

void sc_db_settings_caution(const struct sc_db_settings *s, char *out, size_t len)
{
    out[0] = 0;
    if (s->wsrep_on && s->cluster_size < 3)
        snprintf(out, len, "wsrep_cluster_size=%d: fewer than 3 Galera nodes cannot outlive the loss "
                 "of one", s->cluster_size);
    else if (strcasecmp(s->isolation, "READ-UNCOMMITTED") == 0)
        snprintf(out, len, "transaction_isolation=READ-UNCOMMITTED: handlers would read other "
                 "transactions' uncommitted rows");
}

int sc_db_settings_check(struct sc_db *db, struct sc_db_err *e)
{
    struct sc_db_settings s;
    char why[400];
    if (sc_db_settings_read(db, &s, e))
        return -1;
    char found[400];
    sc_db_settings_describe(&s, found, sizeof found);
    sc_info("mysql: server settings: %s", found);
    sc_db_settings_caution(&s, why, sizeof why);
    if (why[0])
        sc_warn("mysql: caution: %s", why);
    if (sc_db_settings_unsafe(&s, why, sizeof why) == 0)
        return 0;
    memset(e, 0, sizeof *e);
    snprintf(e->sqlstate, sizeof e->sqlstate, "HY000");
    snprintf(e->msg, sizeof e->msg, "refused: %s", why);
    e->cls = SC_DBERR_FAILURE;
    return -1;
}
