/* Reads with bound parameters: a prepared statement whose parameters are
 * strings and whose result comes back as text cells, for the operator
 * commands and the console, which take ids and business keys from people. */
#ifndef SC_DB_ROWS_H
#define SC_DB_ROWS_H

#include <stddef.h>

#include "db.h"

struct sc_rows {
    size_t n_rows, n_cols;
    char **cells;          /* n_rows * n_cols; NULL for SQL NULL */
    unsigned long *lens;   /* byte length of each cell */
    char **names;          /* n_cols column names */
    int *types;            /* n_cols enum_field_types, as the server describes each column */
};

/* Prepares sql, binds n string parameters (NULL binds SQL NULL), runs it and
 * keeps at most max_rows rows (the rest are read and dropped). Each cell is
 * cut at max_cell bytes (0: no cut); a cut cell's length is its full length.
 * Returns 0, or -1 with e filled. The statement is closed before return. */
int sc_db_select_params(struct sc_db *db, const char *sql, const char *const *params, int n,
                        size_t max_rows, size_t max_cell, struct sc_rows *out,
                        struct sc_db_err *e);

/* The cell of row r, column c (NULL for SQL NULL or out of range). */
const char *sc_rows_get(const struct sc_rows *rows, size_t r, size_t c);

/* The index of the column named name, or -1. */
int sc_rows_col(const struct sc_rows *rows, const char *name);

void sc_rows_free(struct sc_rows *rows);

#endif
