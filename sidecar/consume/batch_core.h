/* Inside the batch core: how one transaction ended, shared by the ladder
 * (batch.c), the transaction (batch_txn.c) and the settling (batch_settle.c). */
#ifndef SC_BATCH_CORE_H
#define SC_BATCH_CORE_H

#include "consume/batch_io.h"
#include "consume/worker.h"

/* Attempt counts read from headers are clamped here (a header is input). */
#define SC_MAX_ATTEMPTS_SEEN 1000000

/* How a transaction of the batch ended. */
enum txn {
    TXN_COMMITTED,   /* COMMIT succeeded */
    TXN_EMPTY,       /* nothing to commit (duplicates and failures only): rolled back */
    TXN_ROLLED_BACK, /* nothing of it stands: the server rolled it all back (deadlock,
                        a savepoint gone), or its claims vanished under the handler;
                        the ladder runs it again */
    TXN_OUTAGE,      /* the session is gone before COMMIT (connection lost, node not
                        writable, a session that cannot go on): nothing committed */
    TXN_UNKNOWN,     /* COMMIT failed or the connection dropped around it */
    TXN_BROKEN,      /* a handler ended the transaction itself: the session is suspect */
};

const char *sc_txn_name(enum txn t);

/* The session cannot go on: the connection is lost, or its node takes no
 * writes. What it held comes back on a new session, where the claims tell. */
static inline int sc_session_gone(const struct sc_db_err *e)
{
    return e->cls == SC_DBERR_CONNECTION || e->cls == SC_DBERR_NOT_WRITABLE;
}

/* The end of one transaction: how, the error that ended it, and the index of
 * the delivery that was running then (-1: none in particular). */
struct txn_end {
    enum txn t;
    int culprit;
    struct sc_db_err cause;
};

/* batch_txn.c: runs the claim and the handler of every open parsed item of
 * items[0..n) in one transaction and ends it. */
struct txn_end sc_txn_run(struct worker *w, struct item *items, int n);

/* batch_txn.c: the error fields of a delivery's log lines. */
void sc_item_error_fields(struct item *it, const struct sc_db_err *e);
void sc_describe_db_error(char *out, size_t len, const char *what, const struct sc_db_err *e);

/* batch_begin.c: sets up the events of dls[0..n) in w->items (or, holding,
 * opens again what the last run decided in a transaction). Returns how many
 * are over the x-delivery-count limit (sticky 2: their claims are probed). */
int sc_batch_begin(struct worker *w, struct delivery *dls, int n);

/* batch_settle.c: republishes what goes to a delay queue or the DLQ, then
 * acks each delivery of dls[0..n) whose events are all settled and nacks
 * each one with an event without an outcome (D_REQUEUE). */
enum next sc_settle(struct worker *w, struct delivery *dls, int n, int64_t committed_us);

#endif
