/* The durability check: which settings make a COMMIT losable in a crash
 * (innodb_flush_log_at_trx_commit, sync_binlog with the binary log, Galera's
 * quorum overrides), read from the rows the servers return, described with
 * their value, recorded in the gauge; and mysql.allow_unsafe_durability. */
#include <stdlib.h>
#include <string.h>

#include "sidecar/config.h"
#include "sidecar/io/db_durability.h"
#include "sidecar/io/db_settings.h"
#include "sidecar/metrics.h"
#include "tap.h"

#define CFG(mysql_extra) "{\"amqp\":{\"url\":\"amqp://g:g@127.0.0.1:5672/%2f\"},\"mysql\":{\"url\":" \
                         "\"mysql://u:p@127.0.0.1:3306/app\"" mysql_extra "}}"

static int parse(const char *text, struct sc_config *c, char *err)
{
    return sc_config_parse(text, strlen(text), 0, c, err, 512);
}

static void config(void)
{
    struct sc_config c;
    char err[512] = "";
    ok(parse(CFG(""), &c, err) == 0 && c.mysql_allow_unsafe_durability == 0,
       "mysql.allow_unsafe_durability defaults to false (%s)", err);
    sc_config_free(&c);
    ok(parse(CFG(",\"allow_unsafe_durability\":true"), &c, err) == 0 &&
           c.mysql_allow_unsafe_durability == 1, "true sets it (%s)", err);
    sc_config_free(&c);
    ok(parse(CFG(",\"allow_unsafe_durability\":false"), &c, err) == 0 &&
           c.mysql_allow_unsafe_durability == 0, "false clears it (%s)", err);
    sc_config_free(&c);
    ok(parse(CFG(",\"allow_unsafe_durability\":1"), &c, err) == 0 &&
           c.mysql_allow_unsafe_durability == 1, "1 is true too (%s)", err);
    sc_config_free(&c);
    ok(parse(CFG(",\"allow_unsafe_durability\":\"yes\""), &c, err) != 0 &&
           strstr(err, "mysql.allow_unsafe_durability"), "a string is refused, naming the key (%s)", err);
    ok(parse(CFG(",\"allow_unsafe_durability\":2"), &c, err) != 0 &&
           strstr(err, "mysql.allow_unsafe_durability"), "2 is refused (%s)", err);
}

/* MariaDB 10.11's rows for the settings statement, as the test server
 * returns them (tx_isolation only, no binary log). */
static void mariadb(struct sc_db_settings *s, const char *flush, const char *log_bin,
                    const char *sync)
{
    sc_db_settings_init(s);
    sc_db_settings_take(s, "binlog_format", "MIXED");
    sc_db_settings_take(s, "innodb_flush_log_at_trx_commit", flush);
    sc_db_settings_take(s, "log_bin", log_bin);
    sc_db_settings_take(s, "sync_binlog", sync);
    sc_db_settings_take(s, "tx_isolation", "REPEATABLE-READ");
    sc_db_settings_take(s, "wsrep_on", "OFF");
    sc_db_settings_take(s, "wsrep_provider_options", "");
    sc_db_settings_take(s, "wsrep_sync_wait", "0");
}

static void judge(void)
{
    struct sc_db_settings s;
    struct sc_durability d;
    char out[900];
    mariadb(&s, "1", "OFF", "0");
    sc_durability_eval(&s, &d);
    is_int(d.unsafe, 0, "flush 1 without a binary log is durable (sync_binlog does not matter)");
    is_str(s.isolation, "REPEATABLE-READ", "tx_isolation read on MariaDB 10");
    for (const char *const *v = (const char *const[]){"0", "2", NULL}; *v; v++) {
        mariadb(&s, *v, "OFF", "1");
        sc_durability_eval(&s, &d);
        sc_durability_describe(&d, out, sizeof out);
        char want[64];
        snprintf(want, sizeof want, "innodb_flush_log_at_trx_commit=%s (", *v);
        ok(d.unsafe == 1u << SC_DUR_FLUSH_LOG && strstr(out, want) && strstr(out, "set 1"),
           "innodb_flush_log_at_trx_commit=%s is not durable: %s", *v, out);
    }
    mariadb(&s, "3", "OFF", "1");
    sc_durability_eval(&s, &d);
    is_int(d.unsafe, 0, "MariaDB's 3 (flush at prepare and at COMMIT) is durable");
    sc_db_settings_init(&s);
    sc_durability_eval(&s, &d);
    sc_durability_describe(&d, out, sizeof out);
    ok(d.unsafe == 1u << SC_DUR_FLUSH_LOG && strstr(out, "innodb_flush_log_at_trx_commit=(unknown)"),
       "a flush setting that could not be read is not assumed durable: %s", out);

    mariadb(&s, "1", "ON", "0");
    sc_durability_eval(&s, &d);
    sc_durability_describe(&d, out, sizeof out);
    ok(d.unsafe == 1u << SC_DUR_SYNC_BINLOG && strstr(out, "sync_binlog=0 (with log_bin=ON"),
       "sync_binlog=0 with the binary log is not durable: %s", out);
    mariadb(&s, "1", "ON", "100");
    sc_durability_eval(&s, &d);
    ok(d.unsafe == 1u << SC_DUR_SYNC_BINLOG && strcmp(d.value[SC_DUR_SYNC_BINLOG], "100") == 0,
       "sync_binlog=100 neither");
    mariadb(&s, "1", "ON", "1");
    sc_durability_eval(&s, &d);
    is_int(d.unsafe, 0, "sync_binlog=1 with the binary log is durable");
    mariadb(&s, "2", "ON", "0");
    sc_durability_eval(&s, &d);
    sc_durability_describe(&d, out, sizeof out);
    ok(d.unsafe == ((1u << SC_DUR_FLUSH_LOG) | (1u << SC_DUR_SYNC_BINLOG)) &&
           strstr(out, "innodb_flush_log_at_trx_commit=2") && strstr(out, "; sync_binlog=0"),
       "both named, each with its value: %s", out);
    ok(strlen(out) < 420, "both fit one error message with the node and the advice (%zu)",
       strlen(out));
}

/* A Galera node: wsrep_provider_options is one long "k = v; ..." list. */
static void galera(void)
{
    struct sc_db_settings s;
    struct sc_durability d;
    char out[900];
    const char *opts = "base_dir = /var/lib/mysql/; base_host = 127.0.0.1; base_port = 4567; "
                       "evs.suspect_timeout = PT5S; gcache.size = 128M; pc.checksum = false; "
                       "pc.ignore_quorum = false; pc.ignore_sb = false; pc.recovery = true; "
                       "pc.weight = 1; repl.commit_order = 3";
    mariadb(&s, "1", "OFF", "0");
    sc_db_settings_take(&s, "binlog_format", "ROW");
    sc_db_settings_take(&s, "wsrep_on", "ON");
    sc_db_settings_take(&s, "wsrep_provider_options", opts);
    sc_db_settings_take(&s, "wsrep_sync_wait", "1");
    sc_db_settings_take(&s, "wsrep_cluster_size", "3");
    sc_db_settings_take(&s, "wsrep_cluster_status", "Primary");
    sc_durability_eval(&s, &d);
    is_int(d.unsafe, 0, "a Galera node flushing at COMMIT, quorum kept, is durable");
    sc_db_settings_describe(&s, out, sizeof out);
    ok(strstr(out, "innodb_flush_log_at_trx_commit=1") && strstr(out, "wsrep_sync_wait=1") &&
           strstr(out, "pc.ignore_sb=false") && strstr(out, "pc.ignore_quorum=false"),
       "its settings described: %s", out);

    char bad[600];
    snprintf(bad, sizeof bad, "%s", opts);
    memcpy(strstr(bad, "pc.ignore_sb = false"), "pc.ignore_sb = true; ", 21);
    sc_db_settings_take(&s, "wsrep_provider_options", bad);
    sc_durability_eval(&s, &d);
    sc_durability_describe(&d, out, sizeof out);
    ok(d.unsafe == 1u << SC_DUR_PC_IGNORE_SB && strstr(out, "pc.ignore_sb=true (a Galera component "),
       "pc.ignore_sb=true: a minority commits: %s", out);
    sc_db_settings_take(&s, "wsrep_provider_options", "pc.ignore_quorum = TRUE");
    sc_durability_eval(&s, &d);
    is_int(d.unsafe, 1u << SC_DUR_PC_IGNORE_QUORUM, "pc.ignore_quorum=true likewise");
    /* MariaDB 11.1+ with the provider plugin: SET changes the plugin's own
     * variables, which may be read before or after the options string */
    sc_db_settings_take(&s, "wsrep_provider_pc_ignore_sb", "ON");
    sc_db_settings_take(&s, "wsrep_provider_options", opts);
    sc_durability_eval(&s, &d);
    is_int(d.unsafe, 1u << SC_DUR_PC_IGNORE_SB,
           "wsrep_provider_pc_ignore_sb=ON with options saying false: not durable");
    sc_db_settings_take(&s, "wsrep_provider_pc_ignore_sb", "OFF");
    sc_db_settings_take(&s, "wsrep_provider_pc_ignore_quorum", "ON");
    sc_durability_eval(&s, &d);
    is_int(d.unsafe, 1u << SC_DUR_PC_IGNORE_QUORUM, "wsrep_provider_pc_ignore_quorum=ON likewise");
    sc_db_settings_take(&s, "wsrep_provider_pc_ignore_quorum", "OFF");
    sc_db_settings_take(&s, "innodb_flush_log_at_trx_commit", "2");
    sc_db_settings_take(&s, "wsrep_provider_options", opts);
    sc_durability_eval(&s, &d);
    is_int(d.unsafe, 1u << SC_DUR_FLUSH_LOG,
           "Galera's own recommendation (flush 2 or 0) is not durable on the node");
    sc_db_settings_take(&s, "wsrep_on", "OFF");
    sc_db_settings_take(&s, "innodb_flush_log_at_trx_commit", "1");
    sc_db_settings_take(&s, "wsrep_provider_options", "pc.ignore_sb = true");
    sc_durability_eval(&s, &d);
    is_int(d.unsafe, 0, "provider options of a node with wsrep off do not count");
}

static void gauge(void)
{
    sc_metrics_reset();
    is_int(sc_metrics_durability(0, "db-1:3306", 1u << SC_DUR_FLUSH_LOG), -1,
           "a node's first finding has no previous one");
    is_int(sc_metrics_durability(1, "db-2:3306", 0), -1, "another node's neither");
    is_int(sc_metrics_durability(0, "db-1:3306", 1u << SC_DUR_FLUSH_LOG), 1u << SC_DUR_FLUSH_LOG,
           "the same node's next finding returns the previous one");
    sc_metrics_durability_refused(1u << SC_DUR_SYNC_BINLOG);
    char *text = sc_metrics_render();
    ok(text && strstr(text, "sidecar_unsafe_durability{setting=\"innodb_flush_log_at_trx_commit\","
                            "node=\"0\",endpoint=\"db-1:3306\"} 1\n"),
       "the gauge names the setting and the node");
    ok(text && strstr(text, "sidecar_unsafe_durability{setting=\"innodb_flush_log_at_trx_commit\","
                            "node=\"1\",endpoint=\"db-2:3306\"} 0\n") &&
           strstr(text, "sidecar_unsafe_durability{setting=\"sync_binlog\",node=\"0\","
                        "endpoint=\"db-1:3306\"} 0\n"),
       "0 for every durable setting of every node checked");
    ok(text && strstr(text, "sidecar_durability_refused_total{setting=\"sync_binlog\"} 1\n") &&
           strstr(text, "sidecar_durability_refused_total{setting=\"pc.ignore_sb\"} 0\n"),
       "refused sessions counted per setting");
    free(text);
    sc_metrics_durability(0, "db-1:3306", 0);
    text = sc_metrics_render();
    ok(text && strstr(text, "sidecar_unsafe_durability{setting=\"innodb_flush_log_at_trx_commit\","
                            "node=\"0\",endpoint=\"db-1:3306\"} 0\n"),
       "back to 0 once the node is durable again");
    free(text);
    sc_metrics_reset();
    text = sc_metrics_render();
    ok(text && !strstr(text, "sidecar_unsafe_durability"), "nothing before any node is checked");
    free(text);
}

int main(void)
{
    is_str(sc_db_error_class_name(SC_DBERR_NOT_DURABLE), "not durable", "class name: not durable");
    ok(sc_db_error_is_transient(SC_DBERR_NOT_DURABLE),
       "a refused session is retried later, like a node that cannot take writes");
    config();
    judge();
    galera();
    gauge();
    return done();
}
