#include "admin_effects.h"

#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/db_rows.h"

#define CELL_SHOWN 256

/* SELECT `c1`, `c2` FROM `t` WHERE `id` = ? into buf: the names were
 * checked as plain identifiers when the config was loaded (config.c), so
 * backticks quote them and nothing in them can end the quoting. Returns 0,
 * or -1 when buf is too small. */
static int effect_sql(const struct sc_inspect_effect *x, char *buf, size_t len)
{
    size_t o = (size_t)snprintf(buf, len, "SELECT ");
    for (size_t c = 0; c < x->n_columns && o < len; c++)
        o += (size_t)snprintf(buf + o, len - o, "%s`%s`", c ? ", " : "", x->columns[c]);
    if (o < len)
        o += (size_t)snprintf(buf + o, len - o, " FROM `%s` WHERE `%s` = ?", x->table,
                              x->event_id_column);
    return o < len ? 0 : -1;
}

static int integer_type(int t)
{
    return t == MYSQL_TYPE_TINY || t == MYSQL_TYPE_SHORT || t == MYSQL_TYPE_LONG ||
           t == MYSQL_TYPE_INT24 || t == MYSQL_TYPE_LONGLONG || t == MYSQL_TYPE_YEAR;
}

static json_t *cell_json(const struct sc_rows *rows, size_t r, size_t c)
{
    const char *v = sc_rows_get(rows, r, c);
    if (!v)
        return json_null();
    if (integer_type(rows->types[c])) {
        char *end;
        long long n = strtoll(v, &end, 10);
        if (*v && !*end)
            return json_integer((json_int_t)n);
    }
    return json_string(v);
}

json_t *sc_inspect_effects_json(struct sc_db *db, const struct sc_config *cfg,
                                const char *event_id, int *gone)
{
    json_t *out = json_array();
    if (!out)
        return NULL;
    const char *params[1] = {event_id};
    for (size_t i = 0; i < cfg->n_consumers && !*gone; i++) {
        const struct sc_consumer_config *k = &cfg->consumers[i];
        for (size_t j = 0; j < k->n_inspect_effects && !*gone; j++) {
            const struct sc_inspect_effect *x = &k->inspect_effects[j];
            /* 32 columns of 64 characters, quoted, and the rest. */
            char sql[SC_INSPECT_COLUMNS_MAX * 70 + 256];
            struct sc_rows rows;
            struct sc_db_err e = {0};
            json_t *one = json_pack("{s:s, s:s}", "consumer", k->name, "table", x->table);
            if (!one || json_array_append_new(out, one) || effect_sql(x, sql, sizeof sql))
                goto oom;
            if (sc_db_select_params(db, sql, params, 1, SC_EFFECT_ROWS_SHOWN + 1, CELL_SHOWN,
                                    &rows, &e)) {
                json_object_set_new(one, "error", json_pack("{s:I, s:s, s:s}", "code",
                                    (json_int_t)e.code, "sqlstate", e.sqlstate, "message", e.msg));
                *gone = e.cls == SC_DBERR_CONNECTION;
                continue;
            }
            json_t *list = json_array();
            size_t shown = rows.n_rows < SC_EFFECT_ROWS_SHOWN ? rows.n_rows : SC_EFFECT_ROWS_SHOWN;
            for (size_t r = 0; list && r < shown; r++) {
                json_t *row = json_object();
                for (size_t c = 0; row && c < rows.n_cols; c++)
                    json_object_set_new(row, x->columns[c], cell_json(&rows, r, c));
                json_array_append_new(list, row);
            }
            json_object_set_new(one, "rows", list);
            json_object_set_new(one, "more", json_boolean(rows.n_rows > shown));
            sc_rows_free(&rows);
        }
    }
    return out;
oom:
    json_decref(out);
    return NULL;
}
