/* One scanned JSON value (sql_json.h) converted to a parameter's type:
 * what sql.so binds to a statement's '?'. */
#ifndef SC_SQL_CONVERT_H
#define SC_SQL_CONVERT_H

#include "sql_config.h"
#include "sql_json.h"

/* Converts v to p's type into out (a text value may point into v's text).
 * Returns 0, or -1 with what is wrong with the value in *why ("is not an
 * integer"). */
SC_SQL_INTERNAL int sc_sql_convert(const struct sc_sql_param *p, const struct jval *v,
                                   struct sc_sql_value *out, const char **why);

/* What v is, for a reason ("an integer", "a string"). */
SC_SQL_INTERNAL const char *sc_sql_jval_kind_name(const struct jval *v);

#endif
