/* sql.so's parameter values: an envelope attribute, or the part of `data`
 * a JSON Pointer names, read from the text exactly as written.
 *
 * Nothing of `data` is converted but the values the parameters point at: a
 * parser that builds the whole tree (doubles, 64-bit integers) would refuse
 * or change numbers in fields no statement uses, where the envelope accepts
 * and keeps them. The pointer is walked through the text (sql_pointer.c),
 * skipping what it passes without recursion (any depth), and only the
 * value it lands on is converted (sql_convert.c): numbers keep their
 * digits, strings are unescaped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql_config.h"
#include "sql_convert.h"
#include "sql_json.h"
#include "sql_pointer.h"

/* An attribute's value as a JSON string token, escaped: it is then
 * converted by the same rules as a string in data. */
static char *json_string_token(const char *s)
{
    size_t n = strlen(s);
    char *o = malloc(n * 6 + 3), *q = o;
    if (!o)
        return NULL;
    *q++ = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            *q++ = '\\';
            *q++ = (char)*p;
        } else if (*p < 0x20) {
            q += sprintf(q, "\\u%04x", *p);
        } else {
            *q++ = (char)*p;
        }
    }
    *q++ = '"';
    *q = 0;
    return o;
}

int sc_sql_param_value(const struct sc_sql_param *p, const struct sc_event *ev,
                       struct sc_sql_value *out, char *reason, size_t reason_len)
{
    memset(out, 0, sizeof *out);
    const char *attr = NULL;
    char num[32], *token = NULL;
    struct jval v = {0};
    int have = 0;
    switch (p->src) {
    case SC_SQL_SRC_ID: attr = ev->id; break;
    case SC_SQL_SRC_TYPE: attr = ev->type; break;
    case SC_SQL_SRC_SOURCE: attr = ev->source; break;
    case SC_SQL_SRC_SUBJECT: attr = ev->subject; break;
    case SC_SQL_SRC_TIME: attr = ev->time; break;
    case SC_SQL_SRC_EVENTVERSION:
        if (ev->has_eventversion) {
            snprintf(num, sizeof num, "%lld", (long long)ev->eventversion);
            v = (struct jval){J_NUMBER, num, strlen(num)};
            have = 1;
        }
        break;
    case SC_SQL_SRC_TRACEPARENT:
    case SC_SQL_SRC_TRACE_ID: {
        /* An event without trace context (or from a sidecar without these
         * fields) binds NULL: tracing never refuses an event. */
        const char *t = NULL;
        if (SC_EVENT_HAS(ev, trace_id))
            t = p->src == SC_SQL_SRC_TRACEPARENT ? ev->traceparent : ev->trace_id;
        if (t)
            attr = t;
        else
            v = (struct jval){J_NULL, "null", 4};
        have = 1;
        break;
    }
    case SC_SQL_SRC_DATA:
        if (ev->data_json) {
            const char *twice = NULL;
            switch (sc_sql_pointer_resolve(p, ev->data_json, ev->data_json_len, &v, &twice)) {
            case PTR_FOUND:
                have = 1;
                break;
            case PTR_MISSING:
                break;
            case PTR_NOT_JSON:
                snprintf(reason, reason_len, "parameter '%s': data is not JSON where the pointer "
                         "leads", p->spec);
                return -1;
            case PTR_TWICE:
                snprintf(reason, reason_len, "parameter '%s': the member '%.64s' appears twice "
                         "in one object of data (ambiguous)", p->spec, twice);
                return -1;
            }
        }
        break;
    }
    if (attr) {
        if (!(token = json_string_token(attr))) {
            snprintf(reason, reason_len, "parameter '%s': out of memory", p->spec);
            return -1;
        }
        v = (struct jval){J_STRING, token, strlen(token)};
        have = 1;
    }
    if (!have) {
        snprintf(reason, reason_len, "parameter '%s': missing in the event", p->spec);
        return -1;
    }
    const char *why = NULL;
    int rc = sc_sql_convert(p, &v, out, &why);
    if (rc) {
        snprintf(reason, reason_len, "parameter '%s': the value (%s) %s", p->spec,
                 sc_sql_jval_kind_name(&v), why);
        sc_sql_value_free(out);
    } else if (out->s && !out->owned && (token || v.text == num)) {
        /* points into a buffer that goes now: keep a copy */
        char *copy = malloc(out->len + 1);
        if (!copy) {
            snprintf(reason, reason_len, "parameter '%s': out of memory", p->spec);
            sc_sql_value_free(out);
            rc = -1;
        } else {
            memcpy(copy, out->s, out->len);
            copy[out->len] = 0;
            out->owned = copy;
            out->s = copy;
        }
    }
    free(token);
    return rc;
}

void sc_sql_value_free(struct sc_sql_value *v)
{
    free(v->owned);
    memset(v, 0, sizeof *v);
}
