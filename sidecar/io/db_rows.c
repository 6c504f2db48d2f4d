#include "db_rows.h"

#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CELL_BUF 512 /* first read of each cell; longer ones are fetched again whole */

static void stmt_fail(MYSQL_STMT *st, struct sc_db *db, struct sc_db_err *e)
{
    if (st && mysql_stmt_errno(st))
        sc_db_stmt_error(st, e);
    else
        sc_db_last_error(db, e);
}

/* Appends one row of cells (copied from the bound buffers, fetched whole
 * when cut) to out. Returns 0 or -1 (out of memory). */
static int keep_row(MYSQL_STMT *st, char (*bufs)[CELL_BUF], unsigned long *lens,
                    my_bool *nulls, size_t max_cell, struct sc_rows *out)
{
    size_t nc = out->n_cols, r = out->n_rows;
    char **cells = realloc(out->cells, (r + 1) * nc * sizeof *cells);
    if (!cells)
        return -1;
    out->cells = cells;
    unsigned long *cl = realloc(out->lens, (r + 1) * nc * sizeof *cl);
    if (!cl)
        return -1;
    out->lens = cl;
    for (size_t c = 0; c < nc; c++) {
        cells[r * nc + c] = NULL;
        cl[r * nc + c] = nulls[c] ? 0 : lens[c];
    }
    out->n_rows++;
    for (size_t c = 0; c < nc; c++) {
        if (nulls[c])
            continue;
        size_t want = lens[c];
        if (max_cell && want > max_cell)
            want = max_cell;
        char *cell = malloc(want + 1);
        if (!cell)
            return -1;
        if (want <= CELL_BUF) {
            memcpy(cell, bufs[c], want);
        } else {
            MYSQL_BIND whole;
            unsigned long got = 0;
            memset(&whole, 0, sizeof whole);
            whole.buffer_type = MYSQL_TYPE_STRING;
            whole.buffer = cell;
            whole.buffer_length = want;
            whole.length = &got;
            if (mysql_stmt_fetch_column(st, &whole, (unsigned)c, 0)) {
                free(cell);
                return -1;
            }
        }
        cell[want] = 0;
        cells[r * nc + c] = cell;
    }
    return 0;
}

int sc_db_select_params(struct sc_db *db, const char *sql, const char *const *params, int n,
                        size_t max_rows, size_t max_cell, struct sc_rows *out,
                        struct sc_db_err *e)
{
    memset(out, 0, sizeof *out);
    /* The text only: parameters are bound, never part of it (tests read
     * these lines to check each statement's plan). */
    sc_debug("sql: %s", sql);
    if (!db->conn) {
        sc_db_last_error(db, e);
        return -1;
    }
    MYSQL_STMT *st = mysql_stmt_init(db->conn);
    MYSQL_BIND *pb = NULL, *res = NULL;
    unsigned long *plens = NULL, *lens = NULL;
    my_bool *nulls = NULL;
    char (*bufs)[CELL_BUF] = NULL;
    MYSQL_RES *meta = NULL;
    int rc = -1;
    if (!st || mysql_stmt_prepare(st, sql, strlen(sql))) {
        stmt_fail(st, db, e);
        goto out;
    }
    if ((int)mysql_stmt_param_count(st) != n) {
        e->code = 2034;
        snprintf(e->sqlstate, sizeof e->sqlstate, "HY000");
        snprintf(e->msg, sizeof e->msg, "statement takes %lu parameters, %d given",
                 mysql_stmt_param_count(st), n);
        e->cls = SC_DBERR_FAILURE;
        goto out;
    }
    if (n > 0) {
        pb = calloc((size_t)n, sizeof *pb);
        plens = calloc((size_t)n, sizeof *plens);
        if (!pb || !plens)
            goto oom;
        for (int i = 0; i < n; i++) {
            if (!params[i]) {
                pb[i].buffer_type = MYSQL_TYPE_NULL;
                continue;
            }
            plens[i] = strlen(params[i]);
            pb[i].buffer_type = MYSQL_TYPE_STRING;
            pb[i].buffer = (void *)params[i];
            pb[i].buffer_length = plens[i];
            pb[i].length = &plens[i];
        }
        if (mysql_stmt_bind_param(st, pb)) {
            stmt_fail(st, db, e);
            goto out;
        }
    }
    if (mysql_stmt_execute(st)) {
        stmt_fail(st, db, e);
        goto out;
    }
    meta = mysql_stmt_result_metadata(st);
    size_t nc = meta ? mysql_num_fields(meta) : 0;
    out->n_cols = nc;
    if (nc) {
        res = calloc(nc, sizeof *res);
        lens = calloc(nc, sizeof *lens);
        nulls = calloc(nc, sizeof *nulls);
        bufs = calloc(nc, sizeof *bufs);
        out->names = calloc(nc, sizeof *out->names);
        out->types = calloc(nc, sizeof *out->types);
        if (!res || !lens || !nulls || !bufs || !out->names || !out->types)
            goto oom;
        MYSQL_FIELD *f = mysql_fetch_fields(meta);
        for (size_t c = 0; c < nc; c++) {
            if (!(out->names[c] = strdup(f[c].name)))
                goto oom;
            out->types[c] = (int)f[c].type;
            res[c].buffer_type = MYSQL_TYPE_STRING;
            res[c].buffer = bufs[c];
            res[c].buffer_length = CELL_BUF;
            res[c].length = &lens[c];
            res[c].is_null = &nulls[c];
        }
        if (mysql_stmt_bind_result(st, res) || mysql_stmt_store_result(st)) {
            stmt_fail(st, db, e);
            goto out;
        }
        for (;;) {
            int f_rc = mysql_stmt_fetch(st);
            if (f_rc == MYSQL_NO_DATA)
                break;
            if (f_rc == 1) {
                stmt_fail(st, db, e);
                goto out;
            }
            if (out->n_rows < max_rows && keep_row(st, bufs, lens, nulls, max_cell, out))
                goto oom;
        }
    }
    rc = 0;
    goto out;
oom:
    e->code = 2008;
    snprintf(e->sqlstate, sizeof e->sqlstate, "HY000");
    snprintf(e->msg, sizeof e->msg, "out of memory");
    e->cls = SC_DBERR_FAILURE;
out:
    if (meta)
        mysql_free_result(meta);
    if (st)
        mysql_stmt_close(st);
    free(pb);
    free(plens);
    free(res);
    free(lens);
    free(nulls);
    free(bufs);
    if (rc)
        sc_rows_free(out);
    return rc;
}

const char *sc_rows_get(const struct sc_rows *rows, size_t r, size_t c)
{
    if (r >= rows->n_rows || c >= rows->n_cols)
        return NULL;
    return rows->cells[r * rows->n_cols + c];
}

int sc_rows_col(const struct sc_rows *rows, const char *name)
{
    for (size_t c = 0; c < rows->n_cols; c++)
        if (rows->names[c] && strcmp(rows->names[c], name) == 0)
            return (int)c;
    return -1;
}

void sc_rows_free(struct sc_rows *rows)
{
    if (!rows)
        return;
    for (size_t i = 0; rows->cells && i < rows->n_rows * rows->n_cols; i++)
        free(rows->cells[i]);
    for (size_t c = 0; rows->names && c < rows->n_cols; c++)
        free(rows->names[c]);
    free(rows->cells);
    free(rows->lens);
    free(rows->names);
    free(rows->types);
    memset(rows, 0, sizeof *rows);
}
