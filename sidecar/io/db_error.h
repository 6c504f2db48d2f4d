/* Classifying MySQL/MariaDB errors: the duplicate test that decides
 * "already consumed", and transient vs. connection vs. permanent failures.
 * Pure functions: no connection needed, unit tested. */
#ifndef SC_DB_ERROR_H
#define SC_DB_ERROR_H

#include <stddef.h>

#define SC_CONSUMED_EVENT_CONSTRAINT "uq_consumed_event_identity"
#define SC_DB_ERRMSG_MAX 512 /* MYSQL_ERRMSG_SIZE in both client libraries */

enum sc_db_error_class {
    SC_DBERR_NONE = 0,
    SC_DBERR_DUPLICATE,   /* 1062 on uq_consumed_event_identity: already consumed */
    SC_DBERR_DEADLOCK,    /* 1213: the server rolled the whole transaction back
                             (also a Galera certification failure) */
    SC_DBERR_LOCK_WAIT,   /* 1205: only the statement was undone (unless the server
                             runs innodb_rollback_on_timeout); MySQL 8's 3572, a
                             NOWAIT lock not granted, likewise */
    SC_DBERR_CONNECTION,  /* the connection is gone: outcome of an open commit unknown */
    SC_DBERR_FAILURE,     /* anything else, 1062 on any other key included */
    SC_DBERR_NOT_WRITABLE, /* the node cannot take writes now (read-only 1290/1836/1792,
                              innodb_read_only's 1036, Galera non-primary 1047): an outage,
                              not the message's fault */
    SC_DBERR_SAVEPOINT_GONE, /* 1305 on the sidecar's own savepoint statement: the
                                transaction it was set in is gone (assigned by the caller,
                                never by sc_db_classify: 1305 also names a missing procedure) */
    SC_DBERR_NOT_DURABLE, /* a session refused because the node's settings let a COMMIT
                             be lost in a crash (db_durability.h; assigned by that
                             check, never by sc_db_classify) */
};

/* Copies the key name of a 1062 message (after the last "for key '", up to
 * the closing quote that ends the message) into out. Returns 0, or -1 when
 * the message does not end in a complete key name (e.g. truncated). */
int sc_db_dup_key_name(const char *msg, char *out, size_t out_len);

/* 1 only when errno is 1062 and the key is uq_consumed_event_identity, in
 * MariaDB's form or MySQL 8's "consumed_event.uq_consumed_event_identity". */
int sc_db_is_consumed_duplicate(unsigned err, const char *msg);

enum sc_db_error_class sc_db_classify(unsigned err, const char *msg);

/* Worth a later retry: deadlock, lock wait, a lost connection or a node
 * that cannot take writes. The same
 * answer as sc_handler_error_is_transient() in the handler ABI header (a
 * unit test holds the two together). */
int sc_db_error_is_transient(enum sc_db_error_class c);

const char *sc_db_error_class_name(enum sc_db_error_class c);

#endif
