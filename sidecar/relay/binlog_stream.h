/* The binlog relay's replication connection: COM_BINLOG_DUMP from a
 * position, the events framed by libmariadb (mariadb_rpl_fetch), the row
 * events of outbox_event decoded here (binlog_rows.c), and the position
 * after the last complete transaction: the only place a checkpoint may
 * point to, since a stream cannot start inside a transaction. */
#ifndef SC_BINLOG_STREAM_H
#define SC_BINLOG_STREAM_H

#include <mysql.h>
#include <mariadb_rpl.h>
#include <stdint.h>

#include "binlog_rows.h"
#include "io/db.h"

#define SC_BINLOG_FILE_MAX 255
#define SC_BINLOG_GTID_MAX 64

struct sc_binlog_pos {
    char file[SC_BINLOG_FILE_MAX + 1]; /* empty: no position */
    unsigned long long pos;
    char gtid[SC_BINLOG_GTID_MAX + 1]; /* MariaDB domain-server-seq of that transaction, or empty */
    unsigned when;                     /* its commit time (the event's timestamp), 0 unknown */
};

struct sc_binlog_stream {
    struct sc_db db;
    MARIADB_RPL *rpl;
    MARIADB_RPL_EVENT *ev;
    char schema[SC_BINLOG_NAME_MAX + 1];
    int key_col;                    /* event_id's column index in outbox_event */
    int checksum;                   /* every event ends in a CRC32 */
    struct sc_binlog_table table;   /* outbox_event's last TABLE_MAP */
    int have_table;
    char file[SC_BINLOG_FILE_MAX + 1]; /* the file being read */
    struct sc_binlog_pos committed; /* after the last complete transaction read */
    char pending_gtid[SC_BINLOG_GTID_MAX + 1];
    int in_tx, standalone;
    int foreign; /* read an event of another table than relay_checkpoint, or a statement:
                    worth an idle checkpoint (its own writes are not) */
    unsigned long long rows_seen, bytes_read;
    char err[512];
};

enum sc_binlog_open {
    SC_BINLOG_OPENED = 0,
    SC_BINLOG_OPEN_FAILED, /* e says why; try again later */
    SC_BINLOG_GONE,        /* the position is older than the oldest binary log: never skip */
};

/* Connects and starts the dump at from (or, when from->file is empty, at
 * the oldest binary log there is). */
enum sc_binlog_open sc_binlog_stream_open(struct sc_binlog_stream *s, const struct sc_config *cfg,
                                          const struct sc_binlog_pos *from, unsigned server_id,
                                          struct sc_db_err *e);
void sc_binlog_stream_close(struct sc_binlog_stream *s);
int sc_binlog_stream_is_open(const struct sc_binlog_stream *s);

/* Reads events, appending outbox_event ids (36 characters, 0-terminated)
 * to ids[have..], until max are there, or until nothing more arrives within
 * wait_ms (0 once one is in). One rows event may carry the count past max,
 * never past cap (a rows event that would is an error). Returns the count
 * in ids, or -1 with s->err set (the stream is then closed). */
int sc_binlog_stream_read(struct sc_binlog_stream *s, char (*ids)[37], int have, int max, int cap,
                          int wait_ms);

/* The oldest binary log's name into out. Returns 0, or -1 with e set. */
int sc_binlog_oldest(struct sc_db *db, char *out, size_t len, struct sc_db_err *e);

#endif
