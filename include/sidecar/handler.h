/* sidecar handler ABI, version 1.
 *
 * A handler is a shared object that exports one function:
 *
 *     const struct sc_handler_v1 *sc_handler_v1(void);
 *
 * returning a pointer to a constant struct that lives as long as the library.
 * The sidecar opens the file with RTLD_NOW|RTLD_LOCAL and refuses it, before
 * calling anything else, when the symbol is missing, abi_version is not
 * SC_HANDLER_ABI_VERSION, struct_size is smaller than the first v1 struct
 * (SC_HANDLER_V1_MIN_SIZE), or name
 * or handle is NULL.
 *
 * Rules for handle():
 *   - It runs inside the sidecar's open transaction, after the row
 *     consumed_event(consumer_name, event_id) was inserted. Do the local effect
 *     with statements on `conn` and return.
 *   - Never COMMIT, ROLLBACK, change autocommit or close the connection: the
 *     sidecar checks the transaction is still open afterwards and fails the
 *     message otherwise.
 *   - It may be called from several worker threads at once (one connection
 *     each): keep shared state read-only or lock it.
 *   - Return SC_HANDLER_OK, SC_HANDLER_RETRY (transient: the message comes
 *     back later) or SC_HANDLER_REJECT (permanent: dead-lettered), with a
 *     short reason in `reason` for the last two.
 *
 * Compatibility: fields are only ever appended; a breaking change is a new
 * symbol, sc_handler_v2. This header is self-contained.
 */
#ifndef SIDECAR_HANDLER_H
#define SIDECAR_HANDLER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SC_HANDLER_ABI_VERSION 1u
#define SC_HANDLER_SYMBOL "sc_handler_v1"

/* MYSQL from <mysql.h> is `struct st_mysql` in both MySQL's libmysqlclient
 * and MariaDB Connector/C; handlers include <mysql.h> themselves. */
struct st_mysql;

typedef enum sc_handler_status {
    SC_HANDLER_OK = 0,
    SC_HANDLER_RETRY = 1,
    SC_HANDLER_REJECT = 2,
} sc_handler_status;

/* The parsed CloudEvents envelope. Strings are NUL-terminated and valid only
 * during the call. Optional attributes are NULL when absent. */
struct sc_event {
    const char *id;            /* canonical lowercase UUID, the dedup key (an id that is not a
                                  UUID is mapped to one: docs/contract.md) */
    const char *type;          /* event_type, e.g. "ORDER_ACCEPTED" */
    const char *source;        /* aggregate_type, e.g. "ORDER" */
    const char *subject;       /* aggregate_id as a string, or NULL */
    const char *time;          /* RFC 3339, or NULL */
    int64_t eventversion;      /* valid when has_eventversion != 0 */
    int has_eventversion;
    const char *data_json;     /* the data's JSON text exactly as written in the message
                                  (numbers keep every digit), or NULL when the event has no
                                  data or its data is not JSON (see data_bytes below) */
    size_t data_json_len;

    /* ---- appended (trace context); set by sidecars from this version on. A
     * sidecar from before passes a struct that ends above. From here on,
     * read a later field only when SC_EVENT_HAS says the sidecar that built
     * the event has it (struct_size covers it). ---- */
    uint32_t struct_size;      /* sizeof(struct sc_event) of the sidecar that built it */
    /* W3C Trace Context (https://www.w3.org/TR/trace-context/) the event
     * carried, each NULL when it had none or an invalid one: */
    const char *traceparent;   /* "00-<trace-id>-<parent-id>-<flags>", as the producer wrote it */
    const char *tracestate;    /* the vendor list, or NULL */
    const char *trace_id;      /* the traceparent's 32 hex digits of trace id */
    const char *span_id;       /* the consumer's own span for this handling (16 hex digits),
                                  a child of the traceparent's parent-id; new per delivery */

    /* ---- appended (data of any content type); read each only when
     * SC_EVENT_HAS(ev, field) says the sidecar that built the event has it. */
    const unsigned char *data_bytes; /* the event's data as bytes, whatever its content type,
                                        or NULL when it has none: for JSON data its text (the
                                        same bytes as data_json), else data_base64 decoded,
                                        the binary-mode body, or the content of a string
                                        `data` whose datacontenttype is not JSON. A NUL
                                        follows it, but the data may hold NUL bytes itself:
                                        data_bytes_len is its length */
    size_t data_bytes_len;
    const char *datacontenttype;     /* as the event gave it (binary mode: the content_type
                                        property), or NULL: none given, which means JSON */
    const char *original_id;         /* the id as the message carried it (a CloudEvents id,
                                        or a plain message's message_id) before it became
                                        `id`: the canonical UUID, or the UUIDv5 of a non-UUID */
};

/* 1 when ev has the appended member `field` (its sidecar set it). */
#define SC_EVENT_HAS(ev, field)                                                                \
    ((ev)->struct_size >= offsetof(struct sc_event, field) + sizeof((ev)->field))

struct sc_handler_v1 {
    uint32_t abi_version;      /* SC_HANDLER_ABI_VERSION */
    uint32_t struct_size;      /* sizeof(struct sc_handler_v1) */
    const char *name;

    /* Optional. Called once per consumer before any handle(), with the
     * consumer's handler_config as JSON text. Return 0 and set *state, or
     * non-zero with a message in err (start-up then fails). */
    int (*init)(const char *config_json, void **state, char *err, size_t err_len);

    /* Required. See the rules above. */
    sc_handler_status (*handle)(void *state, struct st_mysql *conn,
                                const struct sc_event *event,
                                char *reason, size_t reason_len);

    /* Optional. Called once at exit. */
    void (*shutdown)(void *state);

    /* ---- appended after 0.1; used only when struct_size covers it ---- */

    /* Optional. Handles n events of a batch at once, inside the open
     * transaction, after their consumed_event rows were inserted. For each
     * event set status[i] (and a reason in reasons + i * reason_len for
     * RETRY and REJECT). Every OK event's effect is done; every RETRY or
     * REJECT event has no effect at all. Return non-zero when that cannot be
     * promised (a statement failed halfway): the sidecar then rolls the
     * batch back and calls handle() per event instead. */
    int (*handle_batch)(void *state, struct st_mysql *conn, const struct sc_event *const *events,
                        size_t n, sc_handler_status *status, char *reasons, size_t reason_len);
};

/* The server errors after which a handler should answer SC_HANDLER_RETRY
 * (the same list the sidecar uses): deadlock 1213 (the whole transaction is
 * gone; also a Galera certification failure), lock wait timeout 1205 (and
 * MySQL 8's 3572, a NOWAIT lock not granted), lost or killed connections, and
 * a node that cannot take writes for now (read-only during a failover, a
 * Galera node out of the primary component). Anything else is permanent for
 * that event: SC_HANDLER_REJECT with the code and SQLSTATE in the reason. */
static inline int sc_handler_error_is_transient(unsigned code)
{
    switch (code) {
    case 1205: /* ER_LOCK_WAIT_TIMEOUT */
    case 3572: /* ER_LOCK_NOWAIT (MySQL 8: NOWAIT, the statement aborted) */
    case 1213: /* ER_LOCK_DEADLOCK */
    case 1053: /* ER_SERVER_SHUTDOWN */
    case 1927: /* ER_CONNECTION_KILLED (MariaDB) */
    case 2002: /* CR_CONNECTION_ERROR */
    case 2003: /* CR_CONN_HOST_ERROR */
    case 2006: /* CR_SERVER_GONE_ERROR */
    case 2013: /* CR_SERVER_LOST */
    case 2055: /* CR_SERVER_LOST_EXTENDED */
    case 4031: /* ER_CLIENT_INTERACTION_TIMEOUT (MySQL 8) */
    case 1290: /* ER_OPTION_PREVENTS_STATEMENT (--read-only) */
    case 1036: /* ER_OPEN_AS_READONLY (innodb_read_only) */
    case 1792: /* ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION */
    case 3989: /* ER_SCHEMA_READ_ONLY (MySQL 8: ALTER SCHEMA ... READ ONLY) */
    case 1836: /* ER_READ_ONLY_MODE */
    case 1047: /* ER_UNKNOWN_COM_ERROR (Galera: node not ready) */
        return 1;
    default:
        return 0;
    }
}

/* Size of the struct before handle_batch was appended. */
#define SC_HANDLER_V1_MIN_SIZE 40u

typedef const struct sc_handler_v1 *(*sc_handler_v1_fn)(void);

/* The one symbol a handler exports (define it with default visibility). */
const struct sc_handler_v1 *sc_handler_v1(void);

#ifdef __cplusplus
}
#endif

#endif /* SIDECAR_HANDLER_H */
