#include "sql_config.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the parameter grammar (one table each) ---- */

static const struct {
    const char *name;
    enum sc_sql_source src;
} sources[] = {
    {"id", SC_SQL_SRC_ID},           {"type", SC_SQL_SRC_TYPE},
    {"source", SC_SQL_SRC_SOURCE},   {"subject", SC_SQL_SRC_SUBJECT},
    {"time", SC_SQL_SRC_TIME},       {"eventversion", SC_SQL_SRC_EVENTVERSION},
    {"traceparent", SC_SQL_SRC_TRACEPARENT}, {"trace_id", SC_SQL_SRC_TRACE_ID},
};

static const struct {
    const char *name;
    enum sc_sql_type type;
} types[] = {
    {"int", SC_SQL_T_INT},       {"decimal", SC_SQL_T_DECIMAL}, {"bool", SC_SQL_T_BOOL},
    {"string", SC_SQL_T_STRING}, {"json", SC_SQL_T_JSON},       {"datetime", SC_SQL_T_DATETIME},
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

void sc_sql_param_free(struct sc_sql_param *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_tokens; i++)
        free(p->tokens[i]);
    free(p->tokens);
    free(p->spec);
    memset(p, 0, sizeof *p);
}

/* Splits "/a/b~1c" into unescaped tokens (RFC 6901). Returns 0 or -1. */
static int parse_pointer(const char *ptr, size_t len, struct sc_sql_param *out, char *err,
                         size_t err_len)
{
    if (len == 0)
        return 0;
    if (ptr[0] != '/') {
        snprintf(err, err_len, "a JSON Pointer starts with '/'");
        return -1;
    }
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += ptr[i] == '/';
    out->tokens = calloc(n, sizeof *out->tokens);
    if (!out->tokens) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    size_t i = 1;
    while (out->n_tokens < n) {
        size_t end = i;
        while (end < len && ptr[end] != '/')
            end++;
        char *tok = malloc(end - i + 1);
        if (!tok) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
        size_t k = 0;
        for (size_t j = i; j < end; j++) {
            if (ptr[j] != '~') {
                tok[k++] = ptr[j];
                continue;
            }
            if (j + 1 < end && (ptr[j + 1] == '0' || ptr[j + 1] == '1')) {
                tok[k++] = ptr[j + 1] == '0' ? '~' : '/';
                j++;
                continue;
            }
            free(tok);
            snprintf(err, err_len, "'~' must be followed by 0 or 1 in a JSON Pointer (~0 is '~', "
                     "~1 is '/')");
            return -1;
        }
        tok[k] = 0;
        out->tokens[out->n_tokens++] = tok;
        i = end + 1;
    }
    return 0;
}

int sc_sql_param_parse(const char *spec, struct sc_sql_param *out, char *err, size_t err_len)
{
    memset(out, 0, sizeof *out);
    size_t len = strlen(spec);
    const char *colon = strrchr(spec, ':');
    size_t path_len = colon ? (size_t)(colon - spec) : len;
    out->type = SC_SQL_T_AUTO;
    if (colon) {
        size_t t;
        for (t = 0; t < N_OF(types); t++)
            if (strcmp(colon + 1, types[t].name) == 0)
                break;
        if (t == N_OF(types)) {
            snprintf(err, err_len, "unknown type '%.32s' (expected int, decimal, bool, string, "
                     "json or datetime after the last ':')", colon + 1);
            return -1;
        }
        out->type = types[t].type;
    }
    size_t s;
    for (s = 0; s < N_OF(sources); s++)
        if (strlen(sources[s].name) == path_len && memcmp(spec, sources[s].name, path_len) == 0)
            break;
    if (s < N_OF(sources)) {
        out->src = sources[s].src;
    } else if (path_len >= 4 && memcmp(spec, "data", 4) == 0 &&
               (path_len == 4 || spec[4] == '/')) {
        out->src = SC_SQL_SRC_DATA;
        if (parse_pointer(spec + 4, path_len - 4, out, err, err_len))
            goto error;
    } else {
        snprintf(err, err_len, "unknown attribute '%.*s' (expected id, type, source, subject, "
                 "time, eventversion, traceparent, trace_id, data or data/JSON-Pointer)", (int)(path_len > 64 ? 64 : path_len),
                 spec);
        return -1;
    }
    if (!(out->spec = strdup(spec))) {
        snprintf(err, err_len, "out of memory");
        goto error;
    }
    return 0;
error:
    sc_sql_param_free(out);
    return -1;
}

size_t sc_sql_count_placeholders(const char *sql)
{
    size_t n = 0;
    for (const char *p = sql; *p; p++) {
        char c = *p;
        if (c == '?') {
            n++;
        } else if (c == '\'' || c == '"' || c == '`') {
            /* A quoted string or identifier: doubled quotes and, outside
             * backticks, backslash escapes stay inside. */
            for (p++; *p; p++) {
                if (*p == '\\' && c != '`' && p[1]) {
                    p++;
                } else if (*p == c) {
                    if (p[1] != c)
                        break;
                    p++;
                }
            }
            if (!*p)
                break;
        } else if (c == '#' || (c == '-' && p[1] == '-' && (p[2] == ' ' || p[2] == '\t' ||
                                                            p[2] == '\n' || p[2] == '\r' || !p[2]))) {
            while (*p && *p != '\n')
                p++;
            if (!*p)
                break;
        } else if (c == '/' && p[1] == '*' && p[2] != '!' && !(p[2] == 'M' && p[3] == '!')) {
            /* Executable comments (slash-star-bang) are code: only plain
             * comments are skipped. */
            const char *end = strstr(p + 2, "*/");
            if (!end)
                break;
            p = end + 1;
        }
    }
    return n;
}

/* ---- the config ---- */

static void stmt_free(struct sc_sql_stmt *s)
{
    for (size_t i = 0; i < s->n_params; i++)
        sc_sql_param_free(&s->params[i]);
    free(s->params);
    free(s->sql);
    free(s->key);
}

void sc_sql_config_free(struct sc_sql_config *c)
{
    if (!c)
        return;
    for (size_t r = 0; r < c->n_routes; r++) {
        for (size_t i = 0; i < c->routes[r].n_stmts; i++)
            stmt_free(&c->routes[r].stmts[i]);
        free(c->routes[r].stmts);
        free(c->routes[r].type);
    }
    free(c->routes);
    free(c->all);
    memset(c, 0, sizeof *c);
}

static int parse_stmt(json_t *obj, const char *key, struct sc_sql_stmt *s, char *err,
                      size_t err_len)
{
    const char *k;
    json_t *v;
    if (!json_is_object(obj)) {
        snprintf(err, err_len, "handler_config.%s: expected an object {\"sql\": ..., \"params\": [...]}",
                 key);
        return -1;
    }
    json_object_foreach(obj, k, v) {
        if (strcmp(k, "sql") != 0 && strcmp(k, "params") != 0) {
            snprintf(err, err_len, "handler_config.%s.%.64s: unknown key (expected sql, params)",
                     key, k);
            return -1;
        }
    }
    json_t *sql = json_object_get(obj, "sql");
    if (!json_is_string(sql) || json_string_length(sql) == 0 ||
        strlen(json_string_value(sql)) != json_string_length(sql)) {
        snprintf(err, err_len, "handler_config.%s.sql: expected a non-empty string", key);
        return -1;
    }
    json_t *params = json_object_get(obj, "params");
    if (params && !json_is_array(params)) {
        snprintf(err, err_len, "handler_config.%s.params: expected an array of strings", key);
        return -1;
    }
    size_t n = params ? json_array_size(params) : 0;
    if (n > SC_SQL_MAX_PARAMS) {
        snprintf(err, err_len, "handler_config.%s.params: %zu parameters, at most %d", key, n,
                 SC_SQL_MAX_PARAMS);
        return -1;
    }
    if (!(s->key = strdup(key)) || !(s->sql = strdup(json_string_value(sql))) ||
        (n && !(s->params = calloc(n, sizeof *s->params)))) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *p = json_array_get(params, i);
        char perr[200];
        if (!json_is_string(p) || strlen(json_string_value(p)) != json_string_length(p)) {
            snprintf(err, err_len, "handler_config.%s.params[%zu]: expected a string", key, i);
            return -1;
        }
        if (sc_sql_param_parse(json_string_value(p), &s->params[i], perr, sizeof perr)) {
            snprintf(err, err_len, "handler_config.%s.params[%zu]: %s", key, i, perr);
            return -1;
        }
        s->n_params++;
    }
    size_t marks = sc_sql_count_placeholders(s->sql);
    if (marks != n) {
        snprintf(err, err_len, "handler_config.%s: the sql has %zu placeholder%s, params has %zu",
                 key, marks, marks == 1 ? "" : "s", n);
        return -1;
    }
    return 0;
}

static int parse_events(json_t *events, struct sc_sql_config *c, char *err, size_t err_len)
{
    const char *type;
    json_t *list;
    size_t n = json_object_size(events);
    if (n && !(c->routes = calloc(n, sizeof *c->routes))) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    json_object_foreach(events, type, list) {
        struct sc_sql_route *r = &c->routes[c->n_routes];
        if (!json_is_array(list)) {
            snprintf(err, err_len, "handler_config.events.%.64s: expected an array of statements",
                     type);
            return -1;
        }
        if (!(r->type = strdup(type))) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
        c->n_routes++;
        size_t m = json_array_size(list);
        if (m && !(r->stmts = calloc(m, sizeof *r->stmts))) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
        for (size_t i = 0; i < m; i++) {
            char key[128];
            snprintf(key, sizeof key, "events.%.64s[%zu]", type, i);
            r->n_stmts++;
            if (parse_stmt(json_array_get(list, i), key, &r->stmts[i], err, err_len))
                return -1;
            c->n_all++;
        }
    }
    if (c->n_all && !(c->all = calloc(c->n_all, sizeof *c->all))) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    size_t k = 0;
    for (size_t r = 0; r < c->n_routes; r++)
        for (size_t i = 0; i < c->routes[r].n_stmts; i++) {
            c->routes[r].stmts[i].index = k;
            c->all[k++] = &c->routes[r].stmts[i];
        }
    return 0;
}

int sc_sql_config_parse(const char *text, size_t len, struct sc_sql_config *out, char *err,
                        size_t err_len)
{
    json_error_t je;
    memset(out, 0, sizeof *out);
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(err, err_len, "handler_config: not valid JSON: %s", je.text);
        return -1;
    }
    const char *k;
    json_t *v;
    if (!json_is_object(root)) {
        snprintf(err, err_len, "handler_config: expected an object {\"events\": {...}}");
        goto error;
    }
    json_object_foreach(root, k, v) {
        if (strcmp(k, "events") != 0 && strcmp(k, "other_events") != 0) {
            snprintf(err, err_len, "handler_config.%.64s: unknown key (expected events, "
                     "other_events)", k);
            goto error;
        }
    }
    json_t *events = json_object_get(root, "events");
    if (!json_is_object(events)) {
        snprintf(err, err_len, "handler_config.events: %s", events ? "expected an object "
                 "mapping event types to statement lists" : "missing (map event types to "
                 "statement lists)");
        goto error;
    }
    json_t *others = json_object_get(root, "other_events");
    if (others) {
        const char *o = json_is_string(others) ? json_string_value(others) : "";
        if (strcmp(o, "ignore") != 0 && strcmp(o, "reject") != 0) {
            snprintf(err, err_len, "handler_config.other_events: expected \"ignore\" or "
                     "\"reject\"");
            goto error;
        }
        out->reject_others = strcmp(o, "reject") == 0;
    }
    if (parse_events(events, out, err, err_len))
        goto error;
    json_decref(root);
    return 0;
error:
    json_decref(root);
    sc_sql_config_free(out);
    return -1;
}

const struct sc_sql_route *sc_sql_route_find(const struct sc_sql_config *c, const char *type)
{
    for (size_t i = 0; i < c->n_routes; i++)
        if (strcmp(c->routes[i].type, type) == 0)
            return &c->routes[i];
    return NULL;
}

/* ---- RFC 3339 ---- */

static int digits(const char *s, size_t n, int *out)
{
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

static int days_in_month(int y, int m)
{
    static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 ? 28 + leap : d[m - 1];
}

/* Days since 1970-01-01 of a civil date, and back (H. Hinnant's algorithms). */
static long long days_from_civil(int y, int m, int d)
{
    y -= m <= 2;
    long long era = (y >= 0 ? y : y - 399) / 400;
    long long yoe = y - era * 400;
    long long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    long long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(long long z, int *y, int *m, int *d)
{
    z += 719468;
    long long era = (z >= 0 ? z : z - 146096) / 146097;
    long long doe = z - era * 146097;
    long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    long long mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yoe + era * 400 + (*m <= 2));
}

int sc_sql_parse_datetime(const char *s, size_t len, struct sc_sql_datetime *out)
{
    struct sc_sql_datetime t = {0};
    if (len < 20 || strlen(s) != len)
        return -1;
    if (digits(s, 4, &t.year) || s[4] != '-' || digits(s + 5, 2, &t.month) || s[7] != '-' ||
        digits(s + 8, 2, &t.day) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
        digits(s + 11, 2, &t.hour) || s[13] != ':' || digits(s + 14, 2, &t.minute) ||
        s[16] != ':' || digits(s + 17, 2, &t.second))
        return -1;
    if (t.month < 1 || t.month > 12 || t.day < 1 || t.day > days_in_month(t.year, t.month) ||
        t.hour > 23 || t.minute > 59 || t.second > 59)
        return -1;
    size_t i = 19;
    if (s[i] == '.') {
        size_t n = 0;
        unsigned long us = 0;
        for (i++; i < len && s[i] >= '0' && s[i] <= '9'; i++, n++)
            if (n < 6)
                us = us * 10 + (unsigned long)(s[i] - '0');
        if (n == 0 || n > 9)
            return -1;
        for (; n < 6; n++)
            us *= 10;
        t.usec = us;
    }
    int off_min = 0;
    if (i + 1 == len && (s[i] == 'Z' || s[i] == 'z')) {
        /* UTC */
    } else if (i + 6 == len && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
        int oh, om;
        if (digits(s + i + 1, 2, &oh) || digits(s + i + 4, 2, &om) || oh > 23 || om > 59)
            return -1;
        off_min = (oh * 60 + om) * (s[i] == '-' ? -1 : 1);
    } else {
        return -1;
    }
    if (off_min) {
        long long secs = days_from_civil(t.year, t.month, t.day) * 86400LL + t.hour * 3600LL +
                         t.minute * 60LL + t.second - off_min * 60LL;
        long long days = secs >= 0 ? secs / 86400 : -((-secs + 86399) / 86400);
        long long rem = secs - days * 86400;
        civil_from_days(days, &t.year, &t.month, &t.day);
        t.hour = (int)(rem / 3600);
        t.minute = (int)(rem % 3600 / 60);
        t.second = (int)(rem % 60);
        if (t.year < 0 || t.year > 9999)
            return -1;
    }
    *out = t;
    return 0;
}
