/* Fuzz target: sql.so's handler_config loader. */
#include <stdint.h>
#include <string.h>

#include "handlers/sql/sql_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sc_sql_config c;
    char err[512] = "";
    if (sc_sql_config_parse((const char *)data, size, &c, err, sizeof err) != 0) {
        if (strncmp(err, "handler_config", 14) != 0 && strcmp(err, "out of memory") != 0)
            __builtin_trap(); /* every refusal names its key */
        return 0;
    }
    size_t n = 0;
    for (size_t r = 0; r < c.n_routes; r++)
        for (size_t i = 0; i < c.routes[r].n_stmts; i++, n++) {
            const struct sc_sql_stmt *s = &c.routes[r].stmts[i];
            if (c.all[s->index] != s || sc_sql_count_placeholders(s->sql) != s->n_params ||
                s->n_params > SC_SQL_MAX_PARAMS)
                __builtin_trap();
        }
    if (n != c.n_all)
        __builtin_trap();
    sc_sql_config_free(&c);
    return 0;
}
