/* The producer helper of include/sidecar/outbox.h: one transaction for the
 * business row and its outbox_event row, with an honest outcome. Depends on
 * the MySQL client and the C library only. */
#include "sidecar/outbox.h"

#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <uuid/uuid.h>
#include <stdint.h>

#include "envelope/trace_context.h"
#include "fault.h"
#include "relay/outbox_rules.h"

/* UUIDv7 (RFC 9562): 48 bits of Unix time in ms, version 7, 12 bits of
 * sub-millisecond time (method 3, so ids from one process sort in creation
 * order), variant 10, 62 random bits. Time-ordered ids keep inserts into
 * the consumers' unique index (consumed_event) on the few most recent
 * pages instead of random ones: see docs/performance.md. libuuid gained
 * uuid_generate_time_v7 only in util-linux 2.41; this needs nothing but
 * the clock and getrandom. */
void sc_outbox_new_event_id(char out[37])
{
    uint8_t u[16];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
    unsigned sub = (unsigned)(((uint64_t)(ts.tv_nsec % 1000000) * 4096) / 1000000);
    size_t got = 0;
    while (got < sizeof u) {
        ssize_t k = getrandom(u + got, sizeof u - got, 0);
        if (k < 0) {
            /* no entropy source: fall back to libuuid's random bytes */
            uuid_t r;
            uuid_generate(r);
            memcpy(u, r, sizeof u);
            break;
        }
        got += (size_t)k;
    }
    for (int i = 0; i < 6; i++)
        u[i] = (uint8_t)(ms >> (40 - 8 * i));
    u[6] = (uint8_t)(0x70 | (sub >> 8));
    u[7] = (uint8_t)(sub & 0xff);
    u[8] = (uint8_t)(0x80 | (u[8] & 0x3f));
    uuid_unparse_lower(u, out);
}

void sc_outbox_error_from(struct sc_outbox_error *err, MYSQL *conn)
{
    err->code = mysql_errno(conn);
    snprintf(err->sqlstate, sizeof err->sqlstate, "%s", mysql_sqlstate(conn));
    snprintf(err->message, sizeof err->message, "%s", mysql_error(conn));
}

int sc_outbox_exec(MYSQL *conn, const char *sql, struct sc_outbox_error *err)
{
    if (mysql_real_query(conn, sql, strlen(sql))) {
        sc_outbox_error_from(err, conn);
        return -1;
    }
    MYSQL_RES *r = mysql_store_result(conn);
    if (r)
        mysql_free_result(r);
    return 0;
}

char *sc_outbox_quote(MYSQL *conn, const char *s)
{
    size_t n = strlen(s);
    char *q = malloc(n * 2 + 3);
    if (!q)
        return NULL;
    q[0] = '\'';
    unsigned long m = mysql_real_escape_string(conn, q + 1, s, (unsigned long)n);
    q[m + 1] = '\'';
    q[m + 2] = 0;
    return q;
}

static int insert_outbox(MYSQL *conn, const struct sc_outbox_event *ev, struct sc_outbox_error *err)
{
    char *id = sc_outbox_quote(conn, ev->event_id), *at = sc_outbox_quote(conn, ev->aggregate_type),
         *ai = sc_outbox_quote(conn, ev->aggregate_id), *et = sc_outbox_quote(conn, ev->event_type),
         *pl = sc_outbox_quote(conn, ev->payload_json ? ev->payload_json : "null"),
         *tp = ev->traceparent ? sc_outbox_quote(conn, ev->traceparent) : NULL,
         *ts = ev->tracestate ? sc_outbox_quote(conn, ev->tracestate) : NULL;
    int rc = -1;
    if (id && at && ai && et && pl && (tp || !ev->traceparent) && (ts || !ev->tracestate)) {
        size_t len = strlen(id) + strlen(at) + strlen(ai) + strlen(et) + strlen(pl) +
                     (tp ? strlen(tp) : 0) + (ts ? strlen(ts) : 0) + 320;
        char *sql = malloc(len);
        if (sql) {
            /* JSON is bound as text: MariaDB has no CAST(... AS JSON) and
             * checks the column with json_valid. The trace columns are
             * named only when set, so a producer without trace context
             * works on a schema from before them. */
            snprintf(sql, len,
                     "INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, "
                     "event_version, payload, status, created_at%s%s) VALUES (%s, %s, %s, %s, %d, "
                     "%s, 'PENDING', UTC_TIMESTAMP(6)%s%s%s%s)",
                     tp ? ", traceparent" : "", ts ? ", tracestate" : "", id, at, ai, et,
                     ev->event_version, pl, tp ? ", " : "", tp ? tp : "", ts ? ", " : "",
                     ts ? ts : "");
            rc = sc_outbox_exec(conn, sql, err);
            free(sql);
        }
    } else {
        snprintf(err->message, sizeof err->message, "out of memory");
    }
    free(id);
    free(at);
    free(ai);
    free(et);
    free(pl);
    free(tp);
    free(ts);
    return rc;
}

int sc_outbox_check_event(const struct sc_outbox_event *ev, char *why, size_t why_len)
{
    if (!sc_rules_event(ev->event_id, ev->aggregate_type, ev->aggregate_id, ev->event_type,
                        ev->payload_json ? ev->payload_json : "null", why, why_len))
        return 0;
    if (ev->traceparent &&
        !sc_traceparent_check(ev->traceparent, strlen(ev->traceparent), why, why_len))
        return 0;
    if (ev->tracestate && !ev->traceparent) {
        snprintf(why, why_len, "tracestate without a traceparent");
        return 0;
    }
    if (ev->tracestate && !sc_tracestate_check(ev->tracestate, strlen(ev->tracestate), why, why_len))
        return 0;
    return 1;
}

/* Fills err for an event the helper refuses to write. */
static int refuse_invalid(const struct sc_outbox_event *ev, struct sc_outbox_error *err)
{
    char why[256];
    if (sc_outbox_check_event(ev, why, sizeof why))
        return 0;
    err->code = 0;
    snprintf(err->sqlstate, sizeof err->sqlstate, "%s", "");
    snprintf(err->message, sizeof err->message, "invalid outbox event: %s", why);
    return -1;
}

#define TXN_MARK "sc_outbox_txn"

static int in_transaction(MYSQL *conn)
{
    return (conn->server_status & SERVER_STATUS_IN_TRANS) != 0;
}

/* After the callback: 1 when the transaction START TRANSACTION opened is
 * still the one open (its savepoint exists), 0 when something ended it,
 * -1 when the connection cannot say (lost: err filled). An implicit commit
 * (DDL, COMMIT, START TRANSACTION...) and a server-side rollback both drop
 * every savepoint. */
static int transaction_whole(MYSQL *conn, struct sc_outbox_error *err)
{
    if (!in_transaction(conn))
        return 0; /* nothing open at all: cheap, no round trip */
    struct sc_outbox_error e;
    if (sc_outbox_exec(conn, "RELEASE SAVEPOINT " TXN_MARK, &e) == 0)
        return 1;
    if (e.code == 1305) /* SAVEPOINT ... does not exist */
        return 0;
    *err = e;
    return -1;
}

/* The callback broke the transaction: say so, roll back what is still
 * open after the break (nothing of it can be trusted to be whole). */
static enum sc_outbox_outcome split(MYSQL *conn, struct sc_outbox_error *err, const char *how)
{
    char was[sizeof err->message];
    snprintf(was, sizeof was, "%s", err->code || err->message[0] ? err->message : "");
    struct sc_outbox_error rb;
    sc_outbox_exec(conn, "ROLLBACK", &rb);
    err->code = 0;
    snprintf(err->sqlstate, sizeof err->sqlstate, "%s", "");
    snprintf(err->message, sizeof err->message,
             "the business callback ended the transaction (an implicit commit: DDL, COMMIT, START "
             "TRANSACTION...) %s: what it wrote before that is committed without the outbox row%s%.200s",
             how, was[0] ? "; its error: " : "", was);
    return SC_OUTBOX_SPLIT;
}

enum sc_outbox_outcome sc_outbox_write(MYSQL *conn, sc_outbox_business_fn business, void *arg,
                                       struct sc_outbox_event *ev, struct sc_outbox_error *err)
{
    memset(err, 0, sizeof *err);
    /* START TRANSACTION commits whatever the caller has open: its work
     * would be split in two without a word. */
    if (in_transaction(conn)) {
        snprintf(err->message, sizeof err->message,
                 "the connection already has a transaction open (BEGIN, or autocommit off with a "
                 "statement run): START TRANSACTION would commit it; nothing was run");
        return SC_OUTBOX_REFUSED;
    }
    if (sc_outbox_exec(conn, "START TRANSACTION", err))
        return mysql_errno(conn) >= 2000 ? SC_OUTBOX_UNKNOWN : SC_OUTBOX_ROLLED_BACK;
    /* Only a callback can break the transaction: without one, no marker
     * (two round trips fewer). */
    if (business && sc_outbox_exec(conn, "SAVEPOINT " TXN_MARK, err)) {
        struct sc_outbox_error rb;
        if (sc_outbox_exec(conn, "ROLLBACK", &rb))
            return SC_OUTBOX_UNKNOWN;
        return SC_OUTBOX_ROLLED_BACK;
    }
    int failed = business && business(conn, arg, ev, err);
    int whole = !business ? 1 : transaction_whole(conn, failed ? &(struct sc_outbox_error){0} : err);
    if (whole < 0 && !failed)
        return SC_OUTBOX_UNKNOWN; /* the connection is gone: nothing is sure */
    if (whole == 0) {
        /* A deadlock (and a lock wait under innodb_rollback_on_timeout)
         * rolls the whole transaction back: nothing written, as a failed
         * statement. Anything else that ended it committed. */
        if (failed && (err->code == 1213 || err->code == 1205)) {
            struct sc_outbox_error rb;
            if (sc_outbox_exec(conn, "ROLLBACK", &rb))
                return SC_OUTBOX_UNKNOWN;
            return SC_OUTBOX_ROLLED_BACK;
        }
        return split(conn, err, failed ? "and then failed" : "and returned success");
    }
    if (failed || refuse_invalid(ev, err) || insert_outbox(conn, ev, err)) {
        struct sc_outbox_error rb;
        /* ROLLED_BACK only when the rollback itself answered. */
        if (sc_outbox_exec(conn, "ROLLBACK", &rb))
            return SC_OUTBOX_UNKNOWN;
        return SC_OUTBOX_ROLLED_BACK;
    }
    SC_FAULT("producer.before_commit");
    if (sc_outbox_exec(conn, "COMMIT", err))
        return SC_OUTBOX_UNKNOWN;
    return SC_OUTBOX_COMMITTED;
}

const char *sc_outbox_outcome_name(enum sc_outbox_outcome o)
{
    switch (o) {
    case SC_OUTBOX_COMMITTED: return "committed";
    case SC_OUTBOX_ROLLED_BACK: return "rolled_back";
    case SC_OUTBOX_UNKNOWN: return "unknown";
    case SC_OUTBOX_REFUSED: return "refused";
    case SC_OUTBOX_SPLIT: return "split";
    }
    return "?";
}
