#include "db_error.h"

#include "sidecar/handler.h"

#include <stdio.h>
#include <string.h>

int sc_db_dup_key_name(const char *msg, char *out, size_t out_len)
{
    static const char marker[] = "for key '";
    if (!msg)
        return -1;
    /* The key follows the entry value, which may itself contain the marker
     * and quotes: only the last marker can start the key name. */
    const char *last = NULL;
    for (const char *p = msg; (p = strstr(p, marker)) != NULL; p++)
        last = p;
    if (!last)
        return -1;
    const char *name = last + sizeof marker - 1;
    size_t n = strlen(name);
    /* A complete message ends with the key's closing quote; a truncated one
     * does not, and then the name cannot be trusted. */
    if (n < 2 || name[n - 1] != '\'')
        return -1;
    n--;
    if (memchr(name, '\'', n) || n + 1 > out_len)
        return -1;
    memcpy(out, name, n);
    out[n] = 0;
    return 0;
}

int sc_db_is_consumed_duplicate(unsigned err, const char *msg)
{
    char key[256];
    if (err != 1062 || !msg || strncmp(msg, "Duplicate entry '", 17) != 0)
        return 0;
    /* The client keeps at most SC_DB_ERRMSG_MAX bytes of a message: one that
     * long may be cut anywhere, so its key name cannot be trusted. */
    if (strlen(msg) >= SC_DB_ERRMSG_MAX - 1)
        return 0;
    if (sc_db_dup_key_name(msg, key, sizeof key))
        return 0;
    return strcmp(key, SC_CONSUMED_EVENT_CONSTRAINT) == 0 ||
           strcmp(key, "consumed_event." SC_CONSUMED_EVENT_CONSTRAINT) == 0;
}

enum sc_db_error_class sc_db_classify(unsigned err, const char *msg)
{
    switch (err) {
    case 0:
        return SC_DBERR_NONE;
    case 1062:
        return sc_db_is_consumed_duplicate(err, msg) ? SC_DBERR_DUPLICATE : SC_DBERR_FAILURE;
    case 1205: /* ER_LOCK_WAIT_TIMEOUT */
    case 3572: /* ER_LOCK_NOWAIT (MySQL 8): the statement only is aborted, as
                  MariaDB's NOWAIT does with 1205 */
        return SC_DBERR_LOCK_WAIT;
    case 1213: /* ER_LOCK_DEADLOCK */
        return SC_DBERR_DEADLOCK;
    case 1290: /* ER_OPTION_PREVENTS_STATEMENT: read-only is the one option a
                  consumer's statement meets; --secure-file-priv and friends
                  name themselves */
        return !msg || !msg[0] || strstr(msg, "read-only") || strstr(msg, "read_only")
                   ? SC_DBERR_NOT_WRITABLE
                   : SC_DBERR_FAILURE;
    case 3989: /* ER_SCHEMA_READ_ONLY (MySQL 8.0.22+): this database is
                  read only (ALTER SCHEMA ... READ ONLY), the server is not */
    case 1792: /* ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION */
    case 1836: /* ER_READ_ONLY_MODE */
    case 1036: /* ER_OPEN_AS_READONLY: what a write on an innodb_read_only server
                  fails with (1836 comes only as its warning) */
        return SC_DBERR_NOT_WRITABLE;
    case 1047: /* ER_UNKNOWN_COM_ERROR, Galera's "WSREP has not yet prepared
                  node for application use" on a non-primary node */
        return !msg || !msg[0] || strstr(msg, "WSREP") ? SC_DBERR_NOT_WRITABLE
                                                       : SC_DBERR_FAILURE;
    default:
        /* The rest of the handler ABI's list is the lost connections: one
         * list of codes for the sidecar and for handlers. */
        return sc_handler_error_is_transient(err) ? SC_DBERR_CONNECTION : SC_DBERR_FAILURE;
    }
}

const char *sc_db_error_class_name(enum sc_db_error_class c)
{
    static const char *const names[] = {"none",       "duplicate", "deadlock",
                                        "lock wait",  "connection", "failure",
                                        "not writable", "savepoint gone", "not durable"};
    return (unsigned)c < sizeof names / sizeof names[0] ? names[c] : "?";
}

int sc_db_error_is_transient(enum sc_db_error_class c)
{
    return c == SC_DBERR_DEADLOCK || c == SC_DBERR_LOCK_WAIT || c == SC_DBERR_CONNECTION ||
           c == SC_DBERR_NOT_WRITABLE || c == SC_DBERR_NOT_DURABLE;
}
