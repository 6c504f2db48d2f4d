/* What the operator views (inspect --aggregate, the console) share when
 * they read rows: timestamps as RFC 3339 UTC text, a cell as JSON, the
 * cursor of a page. */
#ifndef SC_ADMIN_ROWS_H
#define SC_ADMIN_ROWS_H

#include <jansson.h>
#include <stddef.h>

#include "io/db_rows.h"

/* A DATETIME/TIMESTAMP column as 2026-12-01T13:20:48.848089Z (the session
 * is UTC); the F form inside a printf format. */
#define SC_SQL_TS(col) "DATE_FORMAT(" col ", '%Y-%m-%dT%H:%i:%s.%fZ')"
#define SC_SQL_TSF(col) "DATE_FORMAT(" col ", '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ')"

/* Row r's cell of column col: a JSON string, or null (SQL NULL, no such
 * column). */
json_t *sc_cell_text(const struct sc_rows *rows, size_t r, const char *col);

/* The same as an integer (atoll of the text), or null. */
json_t *sc_cell_int(const struct sc_rows *rows, size_t r, const char *col);

/* A page cursor "KEY,EVENT_ID" (the last row's sort key and id) into key
 * and eid; 1 when both are there and fit, else 0 with both empty (the first
 * page). */
int sc_cursor_parse(const char *after, char *key, size_t key_len, char *eid, size_t eid_len);

#endif
