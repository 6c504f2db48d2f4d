#include "db_durability.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "url.h"

const char *const sc_dur_setting_names[SC_DUR_COUNT] = {
    "innodb_flush_log_at_trx_commit", "sync_binlog", "pc.ignore_sb", "pc.ignore_quorum"};

static void mark(struct sc_durability *d, enum sc_dur_setting k, const char *value)
{
    d->unsafe |= 1u << k;
    snprintf(d->value[k], sizeof d->value[k], "%s", value);
}

void sc_durability_eval(const struct sc_db_settings *s, struct sc_durability *d)
{
    char v[24];
    memset(d, 0, sizeof *d);
    /* 1 flushes the redo log at every COMMIT; MariaDB's 3 does too (and at
     * prepare). MySQL has no 3. */
    if (s->flush_log_at_trx_commit != 1 && s->flush_log_at_trx_commit != 3) {
        if (s->flush_log_at_trx_commit < 0)
            snprintf(v, sizeof v, "(unknown)");
        else
            snprintf(v, sizeof v, "%d", s->flush_log_at_trx_commit);
        mark(d, SC_DUR_FLUSH_LOG, v);
    }
    /* With the binary log on, crash recovery keeps only the transactions the
     * binary log has (and MariaDB then leaves InnoDB's own flush to it):
     * the binary log must be synced at every COMMIT too. */
    if (s->log_bin && s->sync_binlog != 1) {
        if (s->sync_binlog < 0)
            snprintf(v, sizeof v, "(unknown)");
        else
            snprintf(v, sizeof v, "%lld", s->sync_binlog);
        mark(d, SC_DUR_SYNC_BINLOG, v);
    }
    /* Galera's durability is replication to a quorum: a component that
     * commits without one loses its commits when the partition heals. */
    if (s->wsrep_on && sc_db_pc_ignore_sb(s))
        mark(d, SC_DUR_PC_IGNORE_SB, "true");
    if (s->wsrep_on && sc_db_pc_ignore_quorum(s))
        mark(d, SC_DUR_PC_IGNORE_QUORUM, "true");
}

/* What the value costs and what to set: short, as a refusal carries every
 * setting in one error message. */
static const char *why(enum sc_dur_setting k, const char *value)
{
    switch (k) {
    case SC_DUR_FLUSH_LOG:
        if (strcmp(value, "0") == 0)
            return "the redo log is flushed about once a second, not at COMMIT: a server or host "
                   "crash loses up to a second of commits; set 1";
        if (strcmp(value, "2") == 0)
            return "the redo log is written at COMMIT but flushed about once a second: a host "
                   "crash loses up to a second of commits; set 1";
        return "not known to flush the redo log at COMMIT; set 1";
    case SC_DUR_SYNC_BINLOG:
        return "with log_bin=ON crash recovery keeps only what the binary log has, and it is not "
               "synced at COMMIT: a host crash loses commits; set 1";
    case SC_DUR_PC_IGNORE_SB:
    case SC_DUR_PC_IGNORE_QUORUM:
        return "a Galera component without quorum goes on committing and loses it when the "
               "partition heals; set false";
    case SC_DUR_COUNT:
        break;
    }
    return "";
}

void sc_durability_describe(const struct sc_durability *d, char *out, size_t len)
{
    size_t off = 0;
    out[0] = 0;
    for (int k = 0; k < SC_DUR_COUNT && off < len; k++) {
        if (!(d->unsafe & (1u << k)))
            continue;
        int n = snprintf(out + off, len - off, "%s%s=%s (%s)", off ? "; " : "",
                         sc_dur_setting_names[k], d->value[k], why((enum sc_dur_setting)k, d->value[k]));
        if (n < 0)
            break;
        off += (size_t)n;
    }
}

int sc_db_durability_check(struct sc_db *db, const struct sc_db_settings *s, int at_start,
                           struct sc_db_err *e)
{
    struct sc_durability d;
    char found[900];
    sc_durability_eval(s, &d);
    long previous = sc_metrics_durability(db->node, db->endpoint, d.unsafe);
    if (!d.unsafe) {
        if (previous > 0)
            sc_info("mysql node %d (%s): durable again (innodb_flush_log_at_trx_commit=%d)",
                    db->node, db->endpoint, s->flush_log_at_trx_commit);
        return 0;
    }
    sc_durability_describe(&d, found, sizeof found);
    if (db->cfg && db->cfg->mysql_allow_unsafe_durability) {
        if (at_start || previous != (long)d.unsafe)
            sc_warn("mysql node %d (%s): not durable: %s; running anyway because "
                    "mysql.allow_unsafe_durability is true: a message acked after such a COMMIT "
                    "is lost for good when the COMMIT is", db->node, db->endpoint, found);
        return 0;
    }
    sc_metrics_durability_refused(d.unsafe);
    memset(e, 0, sizeof *e);
    snprintf(e->sqlstate, sizeof e->sqlstate, "HY000");
    int n = snprintf(e->msg, sizeof e->msg, "refused: mysql node %d (%s) is not durable: %s (or "
                     "set mysql.allow_unsafe_durability to run on it anyway)", db->node,
                     db->endpoint, found);
    if (n >= (int)sizeof e->msg) /* cut: say so */
        memcpy(e->msg + sizeof e->msg - 4, "...", 4);
    e->cls = SC_DBERR_NOT_DURABLE;
    return -1;
}

int sc_db_durability_session(struct sc_db *db, struct sc_db_err *e)
{
    struct sc_db_settings s;
    if (sc_db_settings_read(db, &s, e))
        return -1;
    return sc_db_durability_check(db, &s, 0, e);
}

int sc_db_durability_startup(const struct sc_config *cfg, size_t *reached)
{
    *reached = 0;
    size_t n = cfg->n_mysql_urls ? cfg->n_mysql_urls : 1;
    size_t rotation = sc_db_rotation(); /* the workers' first connect must not move */
    int refused = 0;
    for (size_t i = 0; i < n; i++) {
        struct sc_config one = *cfg; /* the same settings, this node only */
        char *url = cfg->n_mysql_urls ? cfg->mysql_urls[i] : cfg->mysql_url;
        one.mysql_url = url;
        one.mysql_urls = &url;
        one.n_mysql_urls = 1;
        struct sc_db db;
        struct sc_db_err e = {0};
        struct sc_db_settings s;
        if (sc_db_connect(&db, &one, &e)) {
            char where[300];
            sc_url_endpoint(url, where, sizeof where);
            sc_warn("mysql node %zu (%s): durability not checked at start: not reachable (error "
                    "%u: %s); it is checked when a session reaches it", i, where, e.code, e.msg);
            continue;
        }
        db.node = (int)i;
        (*reached)++;
        if (sc_db_settings_read(&db, &s, &e))
            sc_warn("mysql node %zu (%s): durability not checked at start: error %u: %s; it is "
                    "checked at every session", i, db.endpoint, e.code, e.msg);
        else if (sc_db_durability_check(&db, &s, 1, &e)) {
            sc_error("%s", e.msg);
            refused = 1;
        }
        sc_db_close(&db);
    }
    sc_db_set_rotation(rotation);
    return refused ? 2 : 0;
}
