/* A parameter's JSON Pointer walked through event data as written
 * (sql_json.h), member by member, without building a tree. */
#ifndef SC_SQL_POINTER_H
#define SC_SQL_POINTER_H

#include <stddef.h>

#include "sql_config.h"
#include "sql_json.h"

enum sc_sql_found {
    PTR_FOUND,
    PTR_MISSING,  /* no such member or index, or a scalar on the way */
    PTR_NOT_JSON, /* the text is not JSON where the walk went */
    PTR_TWICE,    /* a member twice in one object: ambiguous, refused */
};

/* Walks p's pointer through data[0..len): PTR_FOUND with v, or why not;
 * with PTR_TWICE, *twice names the token found twice. */
SC_SQL_INTERNAL enum sc_sql_found sc_sql_pointer_resolve(const struct sc_sql_param *p,
                                                         const char *data, size_t len,
                                                         struct jval *v, const char **twice);

#endif
