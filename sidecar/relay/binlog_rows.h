/* The two binary-log events the binlog relay decodes itself: TABLE_MAP (a
 * table id, its schema, name and column types) and WRITE_ROWS (the rows an
 * INSERT wrote). Pure functions of the event body (the bytes after the
 * 19-byte common header, without the checksum), so a fuzzer drives them
 * (tests/fuzz/fuzz_binlog_rows.c). Only the key column's value is
 * extracted: the relay reads the rest back by primary key. */
#ifndef SC_BINLOG_ROWS_H
#define SC_BINLOG_ROWS_H

#include <stddef.h>
#include <stdint.h>

#define SC_BINLOG_MAX_COLS 64
#define SC_BINLOG_NAME_MAX 64

struct sc_binlog_table {
    uint64_t table_id;
    char db[SC_BINLOG_NAME_MAX + 1], name[SC_BINLOG_NAME_MAX + 1];
    int ncols;
    unsigned char type[SC_BINLOG_MAX_COLS];
    uint16_t meta[SC_BINLOG_MAX_COLS];
};

enum sc_binlog_decode {
    SC_BINLOG_OK = 0,
    SC_BINLOG_TRUNCATED,   /* the body ends inside a field */
    SC_BINLOG_UNSUPPORTED, /* a column type (or column count) this decoder does not size */
    SC_BINLOG_BAD,         /* a field's value is impossible (a length beyond its column's) */
};

const char *sc_binlog_decode_name(enum sc_binlog_decode d);

/* TABLE_MAP body. id_len is the table id's width (6, or 4 for a post-header
 * of 6 bytes). */
enum sc_binlog_decode sc_binlog_table_map(const unsigned char *body, size_t len, int id_len,
                                          struct sc_binlog_table *t);

/* The table id a rows event names, without decoding it. */
enum sc_binlog_decode sc_binlog_rows_table(const unsigned char *body, size_t len, int id_len,
                                           uint64_t *table_id);

/* Calls on_key(ctx, value, value_len) for column key_col of each row of a
 * WRITE_ROWS body (v2 when v2, with its extra data) for table t, in order;
 * a NULL or absent key column is SC_BINLOG_BAD. on_key returns 0, or
 * nonzero to stop (returned as SC_BINLOG_BAD). */
enum sc_binlog_decode sc_binlog_write_rows(const unsigned char *body, size_t len, int id_len, int v2,
                                           const struct sc_binlog_table *t, int key_col,
                                           int (*on_key)(void *ctx, const char *v, size_t n),
                                           void *ctx);

#endif
