/* sql.so's JSON scanner: the tokens of event data as written, never a
 * tree. A value is its kind and its span of the text; only the one value a
 * parameter names is ever converted (sql_convert.c). */
#ifndef SC_SQL_JSON_H
#define SC_SQL_JSON_H

#include <stddef.h>

/* sql.so exports its handler's entry points; these stay inside it. */
#define SC_SQL_INTERNAL __attribute__((visibility("hidden")))

enum jkind { J_OBJECT, J_ARRAY, J_STRING, J_NUMBER, J_TRUE, J_FALSE, J_NULL };

/* One value: its kind and its text as written ([text, text + len)). */
struct jval {
    enum jkind kind;
    const char *text;
    size_t len;
};

/* The first position at or after p that is not JSON white space. */
static inline const char *sc_sql_json_skip_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* A string token starting at p ('"'): returns the position after its
 * closing quote, or NULL when it is not one. */
SC_SQL_INTERNAL const char *sc_sql_json_scan_string(const char *p, const char *end);

/* The value starting at p (no leading blanks): fills v and returns the
 * position after it, or NULL when the text is not JSON there. Containers
 * are skipped by counting brackets outside strings, without recursion (any
 * depth). */
SC_SQL_INTERNAL const char *sc_sql_json_scan_value(const char *p, const char *end,
                                                   struct jval *v);

/* Unescapes string token s (quotes included, already scanned) into out,
 * which holds at least its length. Returns the byte count, or -1 for a
 * \u escape that is half of a surrogate pair alone. */
SC_SQL_INTERNAL long sc_sql_json_unescape(const char *s, size_t len, char *out);

#endif
