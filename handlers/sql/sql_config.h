/* sql.so, the part without a database: the handler_config loader, the
 * parameter grammar (envelope attribute or JSON Pointer into data, with an
 * optional type) and turning one event's values into typed parameters.
 * Pure functions (the config through jansson, the values straight from the
 * event's text): unit tested and fuzzed. */
#ifndef SC_SQL_CONFIG_H
#define SC_SQL_CONFIG_H

#include <stddef.h>

#include "sidecar/handler.h"

enum sc_sql_source {
    SC_SQL_SRC_ID,
    SC_SQL_SRC_TYPE,
    SC_SQL_SRC_SOURCE,
    SC_SQL_SRC_SUBJECT,
    SC_SQL_SRC_TIME,
    SC_SQL_SRC_EVENTVERSION,
    SC_SQL_SRC_TRACEPARENT, /* W3C trace context; NULL when the event has none */
    SC_SQL_SRC_TRACE_ID,
    SC_SQL_SRC_DATA, /* a JSON Pointer into data ("" is the whole value) */
};

enum sc_sql_type {
    SC_SQL_T_AUTO, /* no suffix: as the JSON value is */
    SC_SQL_T_INT,
    SC_SQL_T_DECIMAL,
    SC_SQL_T_BOOL,
    SC_SQL_T_STRING,
    SC_SQL_T_JSON,
    SC_SQL_T_DATETIME,
};

/* The most parameters one statement may have. */
#define SC_SQL_MAX_PARAMS 128

struct sc_sql_param {
    char *spec;               /* as written, for reasons */
    enum sc_sql_source src;
    enum sc_sql_type type;
    char **tokens;            /* the pointer's reference tokens, unescaped */
    size_t n_tokens;
};

struct sc_sql_stmt {
    char *key;                /* "events.ORDER_ACCEPTED[0]", for reasons */
    char *sql;
    struct sc_sql_param *params;
    size_t n_params;
    size_t index;             /* position among every statement of the config */
};

struct sc_sql_route {
    char *type;
    struct sc_sql_stmt *stmts;
    size_t n_stmts;
};

struct sc_sql_config {
    struct sc_sql_route *routes;
    size_t n_routes;
    int reject_others;        /* other_events: "reject" */
    struct sc_sql_stmt **all; /* every statement, by index */
    size_t n_all;
};

/* Parses one parameter ("subject:int", "data/customer/id", "data/a~1b:json").
 * The text after the last ':' is the type; a pointer token holding ':'
 * therefore needs an explicit type. Returns 0, or -1 with why in err. */
int sc_sql_param_parse(const char *spec, struct sc_sql_param *out, char *err, size_t err_len);
void sc_sql_param_free(struct sc_sql_param *p);

/* Counts the '?' placeholders of sql outside quotes, identifiers and
 * comments. */
size_t sc_sql_count_placeholders(const char *sql);

/* Loads handler_config text. Returns 0, or -1 with a message naming the key
 * ("handler_config.events.X[0].params[1]: unknown type 'intt' ...") in err. */
int sc_sql_config_parse(const char *json, size_t len, struct sc_sql_config *out, char *err,
                        size_t err_len);
void sc_sql_config_free(struct sc_sql_config *c);

/* The statements for an event type, or NULL when the config has none. */
const struct sc_sql_route *sc_sql_route_find(const struct sc_sql_config *c, const char *type);

/* ---- values ---- */

enum sc_sql_vkind {
    SC_SQL_V_NULL,
    SC_SQL_V_INT,      /* i */
    SC_SQL_V_DOUBLE,   /* d */
    SC_SQL_V_DECIMAL,  /* s, len: decimal digits text */
    SC_SQL_V_BOOL,     /* i: 0 or 1 */
    SC_SQL_V_TEXT,     /* s, len: bytes, may hold NUL */
    SC_SQL_V_DATETIME, /* dt, in UTC */
};

struct sc_sql_datetime {
    int year, month, day, hour, minute, second;
    unsigned long usec;
};

struct sc_sql_value {
    enum sc_sql_vkind kind;
    long long i;
    double d;
    const char *s;
    size_t len;
    char *owned;       /* what s points into when the value made its own text */
    struct sc_sql_datetime dt;
};

/* Fills out with parameter p's value from ev: an envelope attribute, or the
 * value p's JSON Pointer names in ev->data_json, read from the text as
 * written (sql_data.c): only that value is converted, so nothing elsewhere
 * in data (a number of any size) is a reason to refuse, and numbers keep
 * their digits. A text value may point into ev's strings (valid while the
 * event is). Returns 0, or -1 with a reason naming the parameter: missing,
 * ambiguous (a member twice), or not of its type. */
int sc_sql_param_value(const struct sc_sql_param *p, const struct sc_event *ev,
                       struct sc_sql_value *out, char *reason, size_t reason_len);
void sc_sql_value_free(struct sc_sql_value *v);

/* RFC 3339 date-time ("2026-11-29T10:00:00.123456Z", any offset) to UTC.
 * Returns 0, or -1 when s (len bytes) is not one. */
int sc_sql_parse_datetime(const char *s, size_t len, struct sc_sql_datetime *out);

#endif
