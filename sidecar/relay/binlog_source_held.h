/* The binlog source's marks and held-aggregate reads (binlog_source_held.c):
 * struct sc_binlog_ops's hold_rows, held_load, held_failed, held_rows and
 * log_end over MariaDB, io being the struct sc_binlog_source. */
#ifndef SC_BINLOG_SOURCE_HELD_H
#define SC_BINLOG_SOURCE_HELD_H

#include "binlog_source.h"

int sc_binlog_src_hold_rows(void *io, char (*ids)[37], int n, struct sc_db_err *e);
int sc_binlog_src_held_load(void *io, struct sc_binlog_held *h, struct sc_db_err *e);
int sc_binlog_src_log_end(void *io, struct sc_binlog_pos *end, struct sc_db_err *e);
int sc_binlog_src_held_failed(void *io, struct sc_binlog_held *h, struct sc_db_err *e);
int sc_binlog_src_held_rows(void *io, const char *type, const char *id, const char *before,
                            struct sc_relay_row *rows, int max, struct sc_db_err *e);

#endif
