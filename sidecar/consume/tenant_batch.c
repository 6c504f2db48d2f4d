/* A tenant's batch on its database session: fresh sessions after a loss,
 * the blame of a delivery that ends them, leaving the session
 * (tenant_batch.h). */
#include "consume/tenant_batch.h"

#include <string.h>

#include "consume/tenant_pool.h"

/* Fresh sessions a tenant's batch gets, after its session was lost, before
 * the tenant counts as down: the first when the lost one was kept open (it
 * may have gone away while idle) or a delivery was running; more while a
 * run names that delivery. A delivery that ends every session it runs in
 * (a statement the server kills it for) is blamed on the second loss under
 * it (batch.c's hold(): its retry spends an attempt), and the next session
 * runs the batch without it. Waiting in hand instead, it would come back
 * with the tenant, end its session again, and hold the tenant down for
 * good. A batch handler's loss names no delivery: one run with a savepoint
 * per delivery names it, then two more blame it and run the rest. */
#define FRESH_SESSIONS 4

static int session_again(const struct worker *w, int tries, int opened)
{
    if (tries >= FRESH_SESSIONS)
        return 0;
    if (tries == 0)
        return opened == 0 || w->hold_culprit[0];
    return w->hold_blamed || w->hold_culprit[0] || w->hold_one_by_one;
}

enum next sc_tenant_batch(struct worker *w, struct delivery *dls, int n, int opened)
{
    enum next next = sc_batch_process(w, dls, n);
    for (int tries = 0; next == NEXT_DB_HOLD && session_again(w, tries, opened); tries++) {
        struct sc_db_err e = {0};
        w->hold_blamed = 0;
        if (sc_worker_db_open(w, &e)) {
            w->hold_cause = e;
            break;
        }
        w->holding = 1;
        next = sc_batch_process(w, dls, n);
        w->holding = 0;
    }
    w->hold_one_by_one = w->hold_blamed = 0;
    w->hold_culprit[0] = 0;
    return next;
}

void sc_tenant_batch_leave(struct worker *w, int i, enum next next)
{
    struct sc_db_err lost = w->hold_cause;
    if (next == NEXT_DB_LOST)
        lost = (struct sc_db_err){.code = 2013, .cls = SC_DBERR_CONNECTION,
                                  .msg = "session ended after a COMMIT without outcome or a "
                                         "handler contract violation"};
    if (next == NEXT_RESET) {
        sc_db_close(&w->db); /* the broker's failure, not the tenant's */
        memset(&w->db, 0, sizeof w->db);
    } else {
        sc_tenant_leave(w, i, next != NEXT_CONTINUE, &lost);
    }
}
