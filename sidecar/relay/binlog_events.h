/* Which binary log events the binlog relay may pass over. The reader
 * decodes a few kinds itself (binlog_stream.c); any other event is skipped
 * only when it is known to hold no insert of a row: an event that may hold
 * one and cannot be read (MySQL's compressed transaction, a statement or
 * rows compressed by MariaDB, a LOAD DATA logged as a statement, a type
 * this code does not know) stops the relay, which must never skip an
 * outbox insert. Pure: the unit test feeds it every type. */
#ifndef SC_BINLOG_EVENTS_H
#define SC_BINLOG_EVENTS_H

/* The types with a name here that the libmariadb of Debian 12
 * (mariadb_rpl.h, 3.3) lacks: MySQL 8's. */
#define SC_BINLOG_TRANSACTION_PAYLOAD 40 /* binlog_transaction_compression: a whole transaction, zstd */
#define SC_BINLOG_HEARTBEAT_V2 41
#define SC_BINLOG_GTID_TAGGED 42        /* MySQL 8.3+: a GTID with a tag */
/* The header flag that lets a replica skip an event it does not know. */
#define SC_BINLOG_IGNORABLE_F 0x0080

enum sc_binlog_event_kind {
    SC_BINLOG_EV_SKIP = 0,   /* holds no inserted row: pass over it */
    SC_BINLOG_EV_UNREADABLE, /* may hold inserted rows the reader cannot read: stop */
};

/* What an event of type (the header's type byte) with header flags holds
 * for the reader: the kinds of WRITE_ROWS it decodes itself are
 * UNREADABLE here too, since nothing else may pass over them. */
enum sc_binlog_event_kind sc_binlog_event_kind(unsigned type, unsigned flags);

/* The type's name as the servers' sources spell it ("TRANSACTION_PAYLOAD_EVENT"),
 * or "unknown to the relay". */
const char *sc_binlog_event_name(unsigned type);

/* Why an unreadable event of type may hold rows, and what the operator
 * changes on the server so that it writes none again. */
const char *sc_binlog_event_remedy(unsigned type);

#endif
