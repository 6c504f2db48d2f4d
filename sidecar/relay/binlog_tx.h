/* Where a binary log stream stands: the position after the last complete
 * transaction it read, the only place a checkpoint may point to, since a
 * stream cannot start inside a transaction. Pure: the real stream
 * (binlog_stream.c) and the simulation's stand-in feed it the same
 * events. */
#ifndef SC_BINLOG_TX_H
#define SC_BINLOG_TX_H

#include <stddef.h>

#define SC_BINLOG_FILE_MAX 255
#define SC_BINLOG_GTID_MAX 64

struct sc_binlog_pos {
    char file[SC_BINLOG_FILE_MAX + 1]; /* empty: no position */
    unsigned long long pos;
    char gtid[SC_BINLOG_GTID_MAX + 1]; /* MariaDB domain-server-seq of that transaction, or empty */
    unsigned when;                     /* its commit time (the event's timestamp), 0 unknown */
};

struct sc_binlog_tx {
    char file[SC_BINLOG_FILE_MAX + 1]; /* the file being read */
    struct sc_binlog_pos committed;    /* after the last complete transaction read */
    char pending_gtid[SC_BINLOG_GTID_MAX + 1];
    int in_tx, standalone;
    int foreign; /* read an event of another table than relay_checkpoint, or a statement:
                    worth an idle checkpoint (its own writes are not) */
};

/* The stream starts at start (a transaction boundary). */
void sc_binlog_tx_start(struct sc_binlog_tx *t, const struct sc_binlog_pos *start);
/* A rotate to file (name of len bytes) at position at. */
void sc_binlog_tx_rotate(struct sc_binlog_tx *t, const char *file, size_t len, unsigned long long at);
/* A GTID event: a transaction begins, or a standalone statement follows. */
void sc_binlog_tx_gtid(struct sc_binlog_tx *t, const char *gtid, int standalone);
/* An XID event: the transaction ends; the next event starts at next_pos. */
void sc_binlog_tx_xid(struct sc_binlog_tx *t, unsigned long long next_pos, unsigned when);
/* A query event of statement q (len bytes): BEGIN, COMMIT or another. */
void sc_binlog_tx_query(struct sc_binlog_tx *t, const char *q, size_t len, unsigned long long next_pos,
                        unsigned when);
/* A TABLE_MAP of table name. */
void sc_binlog_tx_table(struct sc_binlog_tx *t, const char *name);

#endif
