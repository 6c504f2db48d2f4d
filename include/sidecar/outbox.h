/* Producer helper: write a business row and its outbox_event row on one
 * connection in one transaction, and say honestly how it ended.
 *
 *   SC_OUTBOX_COMMITTED    COMMIT returned success.
 *   SC_OUTBOX_ROLLED_BACK  a statement failed and the ROLLBACK itself succeeded
 *                          (or the server had rolled the transaction back, a
 *                          deadlock): nothing was written; retrying is safe.
 *   SC_OUTBOX_UNKNOWN      COMMIT or ROLLBACK failed (e.g. the connection
 *                          dropped): the transaction may or may not have
 *                          committed. Never replay blindly: reconnect and
 *                          reconcile by the request's stable key.
 *   SC_OUTBOX_REFUSED      nothing ran: the connection already had a
 *                          transaction open (BEGIN, or autocommit off with a
 *                          statement run). START TRANSACTION would have
 *                          committed the caller's work half-way; the caller's
 *                          transaction is untouched. Commit or roll it back
 *                          first, or do the business statements in the
 *                          callback. A programming error: retrying the same
 *                          way is refused the same way.
 *   SC_OUTBOX_SPLIT        the business callback ended the transaction: an
 *                          implicit commit (DDL such as CREATE/ALTER/DROP,
 *                          COMMIT, START TRANSACTION, LOCK TABLES, ...). What
 *                          it wrote before that is committed, without the
 *                          outbox row, which was not written; what came after
 *                          is rolled back if still open. Not reconcilable by
 *                          request key (the business row may exist with no
 *                          event): a programming error to fix in the callback,
 *                          not to retry. Reported whether the callback
 *                          succeeded or failed afterwards (never ROLLED_BACK).
 *
 * The event id is made once per request (sc_outbox_new_event_id) before the
 * first attempt and reused on every retry of the same request, so a retry
 * after an UNKNOWN can never publish a second, different event.
 * The helper runs START TRANSACTION ... COMMIT on the connection itself,
 * with a savepoint after START TRANSACTION that tells it whether the
 * callback kept the transaction whole. */
#ifndef SIDECAR_OUTBOX_H
#define SIDECAR_OUTBOX_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct st_mysql; /* MYSQL */

enum sc_outbox_outcome {
    SC_OUTBOX_COMMITTED = 0,
    SC_OUTBOX_ROLLED_BACK = 1,
    SC_OUTBOX_UNKNOWN = 2,
    SC_OUTBOX_REFUSED = 3,
    SC_OUTBOX_SPLIT = 4,
};

struct sc_outbox_error {
    unsigned code;       /* MySQL error number, 0 when none */
    char sqlstate[6];
    char message[512];
};

struct sc_outbox_event {
    char event_id[37];          /* canonical lowercase UUID */
    const char *aggregate_type; /* e.g. "ORDER" */
    char aggregate_id[65];      /* may be filled by the business callback */
    const char *event_type;     /* e.g. "ORDER_ACCEPTED" */
    int event_version;
    const char *payload_json;   /* may be set by the business callback */
    /* ---- appended; zero-initialise the struct (`= {...}`) so they are NULL ---- */
    /* W3C Trace Context of the request (NULL: none), stored in the row and
     * published with the event: traceparent version 00,
     * "00-<32 hex>-<16 hex>-<2 hex>" lowercase, trace and parent ids not all
     * zeros; tracestate (only with a traceparent) a list of at most 32
     * key=value members, at most 512 characters. */
    const char *traceparent;
    const char *tracestate;
};

/* A new time-ordered (UUIDv7, RFC 9562) event id, canonical lowercase: a
 * valid UUID to every consumer, and cheap to index where ids are stored. */
void sc_outbox_new_event_id(char out[37]);

/* The caller's business statements, run inside the transaction on conn.
 * Return 0, or non-zero after filling err (the transaction is rolled back;
 * sc_outbox_exec and sc_outbox_error_from fill it). */
typedef int (*sc_outbox_business_fn)(struct st_mysql *conn, void *arg, struct sc_outbox_event *ev,
                                     struct sc_outbox_error *err);

/* Returns 1 when ev can become a valid CloudEvent, else 0 with the reason
 * in why: event_id a UUID, aggregate_type a non-empty URI-reference (it is
 * the event's `source`: no spaces), aggregate_id non-empty (`subject`),
 * event_type non-empty, payload_json exactly one JSON value, traceparent
 * and tracestate (when set) in the W3C Trace Context format, tracestate
 * only with a traceparent. */
int sc_outbox_check_event(const struct sc_outbox_event *ev, char *why, size_t why_len);

/* Runs one statement on conn (any rows it returns are dropped). Returns 0,
 * or -1 with err filled from the connection. */
int sc_outbox_exec(struct st_mysql *conn, const char *sql, struct sc_outbox_error *err);

/* Fills err from the connection's last error (code, SQLSTATE, message). */
void sc_outbox_error_from(struct sc_outbox_error *err, struct st_mysql *conn);

/* s escaped for conn's character set and in single quotes, as a SQL
 * literal for business statements; malloc'd (the caller frees it), or NULL
 * when out of memory. */
char *sc_outbox_quote(struct st_mysql *conn, const char *s);

/* Refuses a connection with a transaction open (REFUSED, err->code 0);
 * START TRANSACTION; SAVEPOINT; business(); checks the savepoint survived
 * (else SPLIT, err->code 0, unless the callback failed with a deadlock the
 * server rolled back: ROLLED_BACK); checks the event (sc_outbox_check_event:
 * an invalid one is ROLLED_BACK with err->code 0 and the reason in
 * err->message); INSERT outbox_event (PENDING); COMMIT. */
enum sc_outbox_outcome sc_outbox_write(struct st_mysql *conn, sc_outbox_business_fn business,
                                       void *arg, struct sc_outbox_event *ev,
                                       struct sc_outbox_error *err);

/* "committed", "rolled_back", "unknown", "refused" or "split", for logs. */
const char *sc_outbox_outcome_name(enum sc_outbox_outcome o);

#ifdef __cplusplus
}
#endif

#endif /* SIDECAR_OUTBOX_H */
