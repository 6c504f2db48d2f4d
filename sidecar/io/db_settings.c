#include "db_settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "db_durability.h"
#include "log.h"

const char sc_db_settings_sql[] =
    "SHOW SESSION VARIABLES WHERE Variable_name IN ('binlog_format', 'log_bin', "
    "'transaction_isolation', 'tx_isolation', 'wsrep_on', 'innodb_flush_log_at_trx_commit', "
    "'sync_binlog', 'wsrep_sync_wait', 'wsrep_provider_options', 'wsrep_provider_pc_ignore_sb', "
    "'wsrep_provider_pc_ignore_quorum')";

void sc_db_settings_init(struct sc_db_settings *s)
{
    memset(s, 0, sizeof *s);
    s->flush_log_at_trx_commit = -1;
    s->sync_binlog = -1;
}

static int on(const char *v)
{
    return strcasecmp(v, "ON") == 0 || strcasecmp(v, "YES") == 0 || strcasecmp(v, "TRUE") == 0 ||
           strcmp(v, "1") == 0;
}

/* A number, or -1 when v is not one (the check then reads it as unknown). */
static long long number(const char *v)
{
    char *end;
    long long n = strtoll(v, &end, 10);
    return *v && !*end && n >= 0 ? n : -1;
}

/* The value of key in wsrep_provider_options ("k1 = v1; k2 = v2; ..."),
 * into out ("" when absent). */
static void provider_option(const char *opts, const char *key, char *out, size_t len)
{
    out[0] = 0;
    size_t klen = strlen(key);
    for (const char *p = opts; *p;) {
        while (*p == ' ' || *p == ';')
            p++;
        const char *end = strchr(p, ';');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > klen && strncmp(p, key, klen) == 0 && (p[klen] == ' ' || p[klen] == '=')) {
            const char *v = p + klen;
            while (v < p + n && (*v == ' ' || *v == '='))
                v++;
            size_t vlen = (size_t)(p + n - v);
            while (vlen && v[vlen - 1] == ' ')
                vlen--;
            snprintf(out, len, "%.*s", (int)vlen, v);
            return;
        }
        p += n;
    }
}

void sc_db_settings_take(struct sc_db_settings *s, const char *k, const char *v)
{
    k = k ? k : "";
    v = v ? v : "";
    if (strcasecmp(k, "binlog_format") == 0)
        snprintf(s->binlog_format, sizeof s->binlog_format, "%s", v);
    else if (strcasecmp(k, "log_bin") == 0)
        s->log_bin = on(v);
    else if (strcasecmp(k, "transaction_isolation") == 0 || strcasecmp(k, "tx_isolation") == 0)
        snprintf(s->isolation, sizeof s->isolation, "%s", v);
    else if (strcasecmp(k, "wsrep_on") == 0)
        s->wsrep_on = on(v);
    else if (strcasecmp(k, "wsrep_cluster_size") == 0)
        s->cluster_size = atoi(v);
    else if (strcasecmp(k, "wsrep_cluster_status") == 0)
        snprintf(s->cluster_status, sizeof s->cluster_status, "%s", v);
    else if (strcasecmp(k, "innodb_flush_log_at_trx_commit") == 0)
        s->flush_log_at_trx_commit = (int)number(v);
    else if (strcasecmp(k, "sync_binlog") == 0)
        s->sync_binlog = number(v);
    else if (strcasecmp(k, "wsrep_sync_wait") == 0)
        s->wsrep_sync_wait = atoi(v);
    else if (strcasecmp(k, "wsrep_provider_options") == 0) {
        char opt[16];
        provider_option(v, "pc.ignore_sb", opt, sizeof opt);
        s->opt_ignore_sb = on(opt);
        provider_option(v, "pc.ignore_quorum", opt, sizeof opt);
        s->opt_ignore_quorum = on(opt);
    } else if (strcasecmp(k, "wsrep_provider_pc_ignore_sb") == 0)
        s->var_ignore_sb = on(v);
    else if (strcasecmp(k, "wsrep_provider_pc_ignore_quorum") == 0)
        s->var_ignore_quorum = on(v);
}

/* Takes every row of a two-column SHOW result. */
static int read_show(struct sc_db *db, const char *sql, struct sc_db_settings *s,
                     struct sc_db_err *e)
{
    MYSQL_RES *r = sc_db_select(db, sql, e);
    if (!r)
        return -1;
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(r)))
        sc_db_settings_take(s, row[0], row[1]);
    mysql_free_result(r);
    return 0;
}

int sc_db_settings_read(struct sc_db *db, struct sc_db_settings *s, struct sc_db_err *e)
{
    sc_db_settings_init(s);
    /* SHOW ... WHERE works on MariaDB and MySQL and leaves out what a server
     * does not have (wsrep_* are Galera's; a global-only variable such as
     * innodb_flush_log_at_trx_commit shows its global value). */
    if (read_show(db, sc_db_settings_sql, s, e))
        return -1;
    if (s->wsrep_on &&
        read_show(db, "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_cluster_size', "
                      "'wsrep_cluster_status')", s, e))
        return -1;
    return sc_db_rollback(db, e);
}

void sc_db_settings_describe(const struct sc_db_settings *s, char *out, size_t len)
{
    char flush[16] = "(unknown)", sync[24] = "(unknown)";
    if (s->flush_log_at_trx_commit >= 0)
        snprintf(flush, sizeof flush, "%d", s->flush_log_at_trx_commit);
    if (s->sync_binlog >= 0)
        snprintf(sync, sizeof sync, "%lld", s->sync_binlog);
    int n = snprintf(out, len, "binlog_format=%s log_bin=%s transaction_isolation=%s "
                     "innodb_flush_log_at_trx_commit=%s sync_binlog=%s wsrep_on=%s",
                     s->binlog_format[0] ? s->binlog_format : "(none)", s->log_bin ? "ON" : "OFF",
                     s->isolation[0] ? s->isolation : "(unknown)", flush, sync,
                     s->wsrep_on ? "ON" : "OFF");
    if (s->wsrep_on && n > 0 && (size_t)n < len)
        snprintf(out + n, len - (size_t)n, " wsrep_cluster_size=%d wsrep_cluster_status=%s "
                 "wsrep_sync_wait=%d pc.ignore_sb=%s pc.ignore_quorum=%s", s->cluster_size,
                 s->cluster_status[0] ? s->cluster_status : "(unknown)", s->wsrep_sync_wait,
                 sc_db_pc_ignore_sb(s) ? "true" : "false", sc_db_pc_ignore_quorum(s) ? "true" : "false");
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
    char found[600];
    sc_db_settings_describe(&s, found, sizeof found);
    sc_info("mysql: server settings: %s", found);
    sc_db_settings_caution(&s, why, sizeof why);
    if (why[0])
        sc_warn("mysql: caution: %s", why);
    if (sc_db_settings_unsafe(&s, why, sizeof why) == 0)
        return sc_db_durability_check(db, &s, 0, e);
    memset(e, 0, sizeof *e);
    snprintf(e->sqlstate, sizeof e->sqlstate, "HY000");
    snprintf(e->msg, sizeof e->msg, "refused: %s", why);
    e->cls = SC_DBERR_FAILURE;
    return -1;
}
