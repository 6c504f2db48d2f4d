/* sidecar migrate: applies every sql/schema file, in order, to mysql.url's
 * database, one tenant's, or each tenant's (listed or discovered). The files are
 * idempotent; whether one changed anything is seen by comparing the
 * database's definitions (columns, indexes, constraints) before and after. */
#include <dirent.h>
#include <errno.h>
#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "io/db.h"
#include "sc_build_config.h"
#include "tenant_discover.h"

/* Unknown database: the tenant's database was never created. */
#define ER_BAD_DB 1049

/* The definitions of the current database's tables, as one string. */
#define FINGERPRINT_SQL                                                                            \
    "SELECT CONCAT_WS('|', "                                                                       \
    "IFNULL((SELECT MD5(GROUP_CONCAT(CONCAT_WS(',', table_name, column_name, column_type, "       \
    "is_nullable, IFNULL(column_default, '~'), ordinal_position) ORDER BY table_name, "           \
    "ordinal_position SEPARATOR ';')) FROM information_schema.COLUMNS WHERE table_schema = "      \
    "DATABASE()), '-'), "                                                                          \
    "IFNULL((SELECT MD5(GROUP_CONCAT(CONCAT_WS(',', table_name, index_name, seq_in_index, "       \
    "column_name, non_unique) ORDER BY table_name, index_name, seq_in_index SEPARATOR ';')) "     \
    "FROM information_schema.STATISTICS WHERE table_schema = DATABASE()), '-'), "                 \
    "IFNULL((SELECT MD5(GROUP_CONCAT(CONCAT_WS(',', constraint_name, check_clause) ORDER BY "     \
    "constraint_name SEPARATOR ';')) FROM information_schema.CHECK_CONSTRAINTS WHERE "            \
    "constraint_schema = DATABASE()), '-'), "                                                      \
    "IFNULL((SELECT MD5(GROUP_CONCAT(CONCAT_WS(',', table_name, constraint_name, "                \
    "constraint_type) ORDER BY table_name, constraint_name SEPARATOR ';')) FROM "                 \
    "information_schema.TABLE_CONSTRAINTS WHERE table_schema = DATABASE()), '-'))"

struct schema_file {
    char *name; /* 001_outbox_event.sql */
    char *text;
};

/* 1 for NNN_*.sql. */
static int is_schema_file(const struct dirent *d)
{
    const char *n = d->d_name;
    size_t len = strlen(n);
    return len > 8 && n[0] >= '0' && n[0] <= '9' && n[1] >= '0' && n[1] <= '9' && n[2] >= '0' &&
           n[2] <= '9' && n[3] == '_' && strcmp(n + len - 4, ".sql") == 0;
}

static void free_files(struct schema_file *f, int n)
{
    for (int i = 0; i < n; i++) {
        free(f[i].name);
        free(f[i].text);
    }
    free(f);
}

/* Reads dir's NNN_*.sql in name order. Returns how many (at least 1), or
 * -1 after saying why. */
static int read_files(const char *dir, struct schema_file **out)
{
    struct dirent **ents;
    int n = scandir(dir, &ents, is_schema_file, alphasort);
    if (n < 0) {
        fprintf(stderr, "sidecar migrate: schema directory %s: %s (give the folder of the schema "
                "files with --schema DIR, e.g. sql/schema of the source tree)\n", dir,
                strerror(errno));
        return -1;
    }
    if (n == 0) {
        free(ents);
        fprintf(stderr, "sidecar migrate: schema directory %s has no NNN_*.sql file\n", dir);
        return -1;
    }
    struct schema_file *f = calloc((size_t)n, sizeof *f);
    int ok = f != NULL;
    for (int i = 0; i < n; i++) {
        if (ok) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, ents[i]->d_name);
            f[i].name = strdup(ents[i]->d_name);
            FILE *fp = fopen(path, "rb");
            if (!fp || !f[i].name) {
                fprintf(stderr, "sidecar migrate: %s: %s\n", path, strerror(errno));
                ok = 0;
            } else {
                fseek(fp, 0, SEEK_END);
                long len = ftell(fp);
                fseek(fp, 0, SEEK_SET);
                f[i].text = len >= 0 ? malloc((size_t)len + 1) : NULL;
                if (!f[i].text || fread(f[i].text, 1, (size_t)len, fp) != (size_t)len) {
                    fprintf(stderr, "sidecar migrate: %s: cannot be read\n", path);
                    ok = 0;
                } else {
                    f[i].text[len] = 0;
                }
            }
            if (fp)
                fclose(fp);
        }
        free(ents[i]);
    }
    free(ents);
    if (!ok) {
        if (f)
            free_files(f, n);
        return -1;
    }
    *out = f;
    return n;
}

/* The fingerprint into buf (size at least 160), or -1 with e. */
static int fingerprint(struct sc_db *db, char *buf, size_t len, struct sc_db_err *e)
{
    MYSQL_RES *r = sc_db_select(db, FINGERPRINT_SQL, e);
    if (!r)
        return -1;
    MYSQL_ROW row = mysql_fetch_row(r);
    snprintf(buf, len, "%s", row && row[0] ? row[0] : "");
    mysql_free_result(r);
    return 0;
}

/* Runs one file's statements; every result read. 0, or -1 with e. */
static int apply(struct sc_db *db, const char *text, struct sc_db_err *e)
{
    if (mysql_real_query(db->conn, text, (unsigned long)strlen(text))) {
        sc_db_last_error(db, e);
        return -1;
    }
    for (;;) {
        MYSQL_RES *r = mysql_store_result(db->conn);
        if (r)
            mysql_free_result(r);
        else if (mysql_field_count(db->conn) != 0) {
            sc_db_last_error(db, e);
            return -1;
        }
        int next = mysql_next_result(db->conn);
        if (next < 0)
            return 0;
        if (next > 0) {
            sc_db_last_error(db, e);
            return -1;
        }
    }
}

/* One database: label is "tenant NAME" or "mysql.url". 0 when brought
 * current, 1 when it failed (said on stderr). */
static int migrate_one(const struct sc_config *cfg, const char *tenant,
                       const struct schema_file *files, int n_files)
{
    char label[96];
    if (tenant)
        snprintf(label, sizeof label, "tenant %s", tenant);
    else
        snprintf(label, sizeof label, "mysql.url");
    struct sc_db db;
    struct sc_db_err e = {0};
    fflush(stdout);
    if (sc_admin_connect(&db, cfg, tenant, &e)) {
        if (e.code == ER_BAD_DB)
            fprintf(stderr, "sidecar migrate: %s: its database does not exist; migrate creates "
                    "no database: create it first (CREATE DATABASE ... CHARACTER SET utf8mb4 "
                    "COLLATE utf8mb4_bin) and grant the roles on it (mysql error %u: %s)\n",
                    label, e.code, e.msg);
        else
            fprintf(stderr, "sidecar migrate: %s: mysql: error %u: %s\n", label, e.code, e.msg);
        return 1;
    }
    int rc = 1;
    char db_name[200] = "";
    MYSQL_RES *r;
    /* DDL commits on its own; the files' other statements (SET, PREPARE)
     * need no transaction around them. */
    if (mysql_autocommit(db.conn, 1) ||
        mysql_set_server_option(db.conn, MYSQL_OPTION_MULTI_STATEMENTS_ON) ||
        mysql_query(db.conn, "SET SESSION group_concat_max_len = 16777216")) {
        sc_db_last_error(&db, &e);
        fprintf(stderr, "sidecar migrate: %s: mysql: error %u: %s\n", label, e.code, e.msg);
        goto out;
    }
    if ((r = sc_db_select(&db, "SELECT DATABASE()", &e))) {
        MYSQL_ROW row = mysql_fetch_row(r);
        snprintf(db_name, sizeof db_name, "%s", row && row[0] ? row[0] : "");
        mysql_free_result(r);
    }
    int changed = 0;
    for (int i = 0; i < n_files; i++) {
        char before[200], after[200];
        if (fingerprint(&db, before, sizeof before, &e) || apply(&db, files[i].text, &e) ||
            fingerprint(&db, after, sizeof after, &e)) {
            fprintf(stderr, "sidecar migrate: %s: %s failed after %d of %d files: mysql error %u "
                    "(%s): %s\n", label, files[i].name, i, n_files, e.code, e.sqlstate, e.msg);
            goto out;
        }
        changed += strcmp(before, after) != 0;
    }
    if (changed)
        printf("%s: database %s: %d files applied, %d changed the schema\n", label, db_name,
               n_files, changed);
    else
        printf("%s: database %s: already current (%d files applied, none changed anything)\n",
               label, db_name, n_files);
    rc = 0;
out:
    fflush(stdout); /* each database's line in order, beside stderr's */
    sc_db_close(&db);
    return rc;
}

int sc_migrate_run(const struct sc_config *cfg, int argc, char **argv)
{
    const char *tenant = NULL, *dir = SC_SCHEMA_DIR;
    int all = 0;
    if (sc_admin_take_tenant(cfg, "migrate", &argc, argv, &tenant))
        return 2;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--all") == 0)
            all = 1;
        else if (strcmp(argv[i], "--schema") == 0 && i + 1 < argc)
            dir = argv[++i];
        else {
            fprintf(stderr, "sidecar migrate: unexpected argument '%s' (usage: migrate -c FILE "
                    "[--tenant NAME | --all] [--schema DIR])\n", argv[i]);
            return 2;
        }
    }
    if (all && tenant) {
        fprintf(stderr, "sidecar migrate: --tenant and --all exclude each other\n");
        return 2;
    }
    if (all && !cfg->tenants.present) {
        fprintf(stderr, "sidecar: migrate: --all needs a tenants section in the config\n");
        return 2;
    }
    char **names = NULL;
    size_t n_names = 0;
    if (all && sc_tenant_names_all(cfg, &names, &n_names))
        return 2;
    if (all && n_names == 0) {
        fprintf(stderr, "sidecar migrate: --all: %s names no tenant; migrate one with "
                "--tenant NAME\n", cfg->tenants.discover ? "tenants.discover" : "tenants.list");
        return 2;
    }
    struct schema_file *files;
    int n_files = read_files(dir, &files);
    if (n_files < 0) {
        sc_tenant_names_free(names, n_names);
        return 2;
    }
    int rc = 0;
    if (!all) {
        rc = migrate_one(cfg, tenant, files, n_files);
    } else {
        size_t failed = 0;
        for (size_t i = 0; i < n_names; i++)
            failed += (size_t)migrate_one(cfg, names[i], files, n_files);
        fflush(stderr);
        printf("migrate: %zu tenants, %zu brought current, %zu failed\n", n_names,
               n_names - failed, failed);
        rc = failed ? 1 : 0;
    }
    free_files(files, n_files);
    sc_tenant_names_free(names, n_names);
    return rc;
}
