#include "admin_rows.h"

#include <stdlib.h>
#include <string.h>

json_t *sc_cell_text(const struct sc_rows *rows, size_t r, const char *col)
{
    int c = sc_rows_col(rows, col);
    const char *v = c < 0 ? NULL : sc_rows_get(rows, r, (size_t)c);
    return v ? json_string(v) : json_null();
}

json_t *sc_cell_int(const struct sc_rows *rows, size_t r, const char *col)
{
    int c = sc_rows_col(rows, col);
    const char *v = c < 0 ? NULL : sc_rows_get(rows, r, (size_t)c);
    return v ? json_integer(atoll(v)) : json_null();
}

int sc_cursor_parse(const char *after, char *key, size_t key_len, char *eid, size_t eid_len)
{
    key[0] = eid[0] = 0;
    const char *comma = after ? strrchr(after, ',') : NULL;
    if (!comma || (size_t)(comma - after) >= key_len || strlen(comma + 1) >= eid_len)
        return 0;
    memcpy(key, after, (size_t)(comma - after));
    key[comma - after] = 0;
    memcpy(eid, comma + 1, strlen(comma + 1) + 1);
    if (key[0] && eid[0])
        return 1;
    key[0] = eid[0] = 0;
    return 0;
}
