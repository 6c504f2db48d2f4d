/* Fuzz target: the binlog relay's row-event decoder (relay/binlog_rows.c).
 * Input: two bytes of length (little-endian) of a TABLE_MAP body, that
 * body, then a WRITE_ROWS body (v1; v2 when the length's top bit is set).
 * The properties: no read outside the input (ASan), every key handed out
 * lies inside the rows body, and a decoded table never claims more columns
 * than its bound. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sidecar/relay/binlog_rows.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct span {
    const uint8_t *lo, *hi;
    int n;
};

static int on_key(void *ctx, const char *v, size_t n)
{
    struct span *s = ctx;
    if ((const uint8_t *)v < s->lo || (const uint8_t *)v + n > s->hi)
        __builtin_trap();
    s->n++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t map_len = (size_t)(data[0] | (data[1] & 0x7f) << 8);
    int v2 = (data[1] & 0x80) != 0;
    if (map_len > size - 2)
        return 0;
    /* copies of exactly the right size, so ASan sees any overread */
    uint8_t *map = malloc(map_len ? map_len : 1);
    size_t rows_len = size - 2 - map_len;
    uint8_t *rows = malloc(rows_len ? rows_len : 1);
    if (!map || !rows)
        goto out;
    memcpy(map, data + 2, map_len);
    memcpy(rows, data + 2 + map_len, rows_len);
    struct sc_binlog_table t;
    if (sc_binlog_table_map(map, map_len, 6, &t) != SC_BINLOG_OK)
        goto out;
    if (t.ncols < 0 || t.ncols > SC_BINLOG_MAX_COLS || strlen(t.db) > SC_BINLOG_NAME_MAX)
        __builtin_trap();
    uint64_t id;
    sc_binlog_rows_table(rows, rows_len, 6, &id);
    struct span s = {rows, rows + rows_len, 0};
    for (int key = 0; key < 2; key++)
        sc_binlog_write_rows(rows, rows_len, 6, v2, &t, key, on_key, &s);
out:
    free(map);
    free(rows);
    return 0;
}
