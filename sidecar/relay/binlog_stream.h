/* The binlog relay's replication connection: COM_BINLOG_DUMP from a
 * position, the events framed by libmariadb (mariadb_rpl_fetch), the row
 * events of outbox_event decoded here (binlog_rows.c), and the position
 * after the last complete transaction (binlog_tx.c). */
#ifndef SC_BINLOG_STREAM_H
#define SC_BINLOG_STREAM_H

#include <mysql.h>
#include <mariadb_rpl.h>
#include <stdint.h>

#include "binlog_core.h"
#include "binlog_rows.h"
#include "binlog_tx.h"
#include "io/db.h"

struct sc_binlog_stream {
    struct sc_db db;
    MARIADB_RPL *rpl;
    MARIADB_RPL_EVENT *ev;
    char schema[SC_BINLOG_NAME_MAX + 1];
    int key_col;                    /* event_id's column index in outbox_event */
    int checksum;                   /* every event ends in a CRC32 */
    struct sc_binlog_table table;   /* outbox_event's last TABLE_MAP */
    int have_table;
    struct sc_binlog_tx tx;         /* where it stands */
    unsigned long long rows_seen, bytes_read;
    unsigned long long end;         /* where the last event read ends in its file */
    unsigned long long ev_start;    /* where the event being handled starts (the one before's end) */
    int unreadable;                 /* the stream stopped at an event that may hold rows it cannot read */
    char err[512];
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
 * in ids, or -1 with s->err set (the stream is then closed; s->unreadable
 * when the event it stopped at may hold rows it cannot read: reading it
 * again cannot help). */
int sc_binlog_stream_read(struct sc_binlog_stream *s, char (*ids)[37], int have, int max, int cap,
                          int wait_ms);

/* One event fetched from the stream, as sc_binlog_stream_read takes it
 * (the unit test feeds it events of its own): the count in ids, or -1 with
 * s->err set (and s->unreadable) and the stream closed. */
int sc_binlog_stream_event(struct sc_binlog_stream *s, MARIADB_RPL_EVENT *ev, char (*ids)[37], int have,
                           int cap);

/* The oldest binary log's name into out. Returns 0, or -1 with e set. */
int sc_binlog_oldest(struct sc_db *db, char *out, size_t len, struct sc_db_err *e);

#endif
