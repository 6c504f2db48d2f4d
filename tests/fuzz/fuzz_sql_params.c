/* Fuzz target: sql.so's parameter grammar and values. The first line is a
 * parameter ("data/a~1b/0:int"), the rest the event's data as JSON; the
 * whole input also goes through the placeholder counter and the RFC 3339
 * parser. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "handlers/sql/sql_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    (void)sc_sql_count_placeholders(text);
    struct sc_sql_datetime dt;
    if (sc_sql_parse_datetime(text, strlen(text), &dt) == 0 &&
        (dt.month < 1 || dt.month > 12 || dt.day < 1 || dt.day > 31 || dt.hour > 23 ||
         dt.minute > 59 || dt.second > 59 || dt.usec > 999999))
        __builtin_trap();

    char *nl = strchr(text, '\n');
    const char *json = nl ? nl + 1 : NULL;
    if (nl)
        *nl = 0;
    struct sc_sql_param p;
    char err[256] = "";
    if (sc_sql_param_parse(text, &p, err, sizeof err) != 0) {
        if (!err[0])
            __builtin_trap();
        free(text);
        return 0;
    }
    struct sc_event ev = {.id = "00000000-0000-4000-8000-000000000000", .type = "T",
                          .source = "S", .subject = "42", .time = "2026-01-01T00:00:00Z",
                          .eventversion = 7, .has_eventversion = 1,
                          .data_json = json, .data_json_len = json ? size - (size_t)(json - text) : 0};
    struct sc_sql_value v;
    char reason[400] = "";
    if (sc_sql_param_value(&p, &ev, &v, reason, sizeof reason) == 0) {
        if ((v.kind == SC_SQL_V_TEXT || v.kind == SC_SQL_V_DECIMAL) && !v.s && v.len)
            __builtin_trap();
        volatile unsigned char sink = 0; /* every byte of a text value is readable (ASan) */
        for (size_t i = 0; i < v.len; i++)
            sink ^= (unsigned char)v.s[i];
        (void)sink;
        sc_sql_value_free(&v);
    } else if (strncmp(reason, "parameter '", 11) != 0) {
        __builtin_trap(); /* a refusal always names the parameter */
    }
    sc_sql_param_free(&p);
    free(text);
    return 0;
}
