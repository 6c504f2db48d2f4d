/* The batch core's seam: every call it makes to the database session, the
 * handler and the broker. The daemon's implementation (batch_io.c) wraps the
 * real connections; the simulation (tests/unit/sim_consume.c) puts stand-ins
 * here and drives the same batch code through every fault they can make. */
#ifndef SC_BATCH_IO_H
#define SC_BATCH_IO_H

#include <stddef.h>
#include <stdint.h>

#include "io/db.h"
#include "io/db_held.h"
#include "sidecar/handler.h"

struct worker;
struct item;

struct sc_batch_io {
    /* The database session. Each returns 0, or -1 with e filled and
     * classified. */
    int (*exec)(struct worker *w, const char *sql, struct sc_db_err *e); /* savepoints */
    int (*claim)(struct worker *w, const char *event_id, struct sc_db_err *e);
    int (*claim_many)(struct worker *w, const char *const *ids, int n, struct sc_db_err *e);
    int (*unclaim_many)(struct worker *w, const char *const *ids, int n, struct sc_db_err *e);
    int (*count_claims)(struct worker *w, const char *const *ids, int n, long *found,
                        struct sc_db_err *e);
    int (*commit)(struct worker *w, struct sc_db_err *e);
    int (*rollback)(struct worker *w, struct sc_db_err *e);
    int (*in_transaction)(struct worker *w);
    void (*last_error)(struct worker *w, struct sc_db_err *e);
    int (*replace_session)(struct worker *w); /* after a contract violation */
    /* Held keys of an ordered consumer (io/db_held.h), on the same session,
     * outside any batch transaction. */
    int (*held_read)(struct worker *w, const char *const *keys, int n, struct sc_held_row *rows,
                     struct sc_db_err *e);
    int (*held_hold)(struct worker *w, const char *key, const char *event_id, const char *token,
                     int64_t *seq, char *current, struct sc_db_err *e);
    long (*held_left)(struct worker *w, const char *key, char *first, struct sc_db_err *e);

    /* The handler, on the session's connection. */
    sc_handler_status (*handle)(struct worker *w, const struct sc_event *ev, char *reason,
                                size_t reason_len);
    int (*has_batch)(struct worker *w);
    int (*handle_batch)(struct worker *w, const struct sc_event *const *evs, size_t n,
                        sc_handler_status *st, char *reasons, size_t reason_len);

    /* The broker. publish_* return 0 once the broker confirmed the copy. */
    int (*publish_dead)(struct worker *w, const struct item *it, const char *why);
    int (*publish_retry)(struct worker *w, const struct item *it, int delay_ms, const char *why);
    int (*ack)(struct worker *w, uint64_t tag, int multiple);
    int (*nack)(struct worker *w, uint64_t tag, int multiple); /* with requeue */
    void (*keep_alive)(struct worker *w);
};

/* The daemon's seam: the worker's own connections and plugin. */
extern const struct sc_batch_io sc_batch_io_real;

#endif
