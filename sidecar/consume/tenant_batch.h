/* One batch of a tenant's deliveries on that tenant's database session,
 * for both loops of a consumer with tenants (tenant_loop.c, without
 * ordering; ordered_tenants.c, with it): the fresh sessions a batch gets
 * after its session was lost before the tenant counts as down, the blame a
 * delivery that ends every session it runs in takes (so it never holds its
 * tenant down), and leaving the session as the batch left it. */
#ifndef SC_CONSUME_TENANT_BATCH_H
#define SC_CONSUME_TENANT_BATCH_H

#include "consume/worker.h"

/* Runs dls[0..n) as one batch on the session sc_tenant_enter() just moved
 * into w->db (opened: what it returned, 0 kept open or 1 opened now).
 * After a loss the batch runs again on fresh sessions, at most four: the
 * first when the lost one had been kept open (it may have idled out) or a
 * delivery was running; more while a run names that delivery. The same
 * delivery running at the second loss under it is blamed (its retry spends
 * an attempt, the DLQ at max_attempts) and the next session runs the batch
 * without it. Returns the batch's next step: NEXT_DB_HOLD when nothing of
 * it is settled and every delivery is in hand (w->hold_cause says why). */
enum next sc_tenant_batch(struct worker *w, struct delivery *dls, int n, int opened);

/* Moves w->db back into tenant session i after a batch that ended with
 * next: kept open when it went on, closed with the tenant down (backoff)
 * after a hold or a lost session, closed only after a broker failure (not
 * the tenant's). */
void sc_tenant_batch_leave(struct worker *w, int i, enum next next);

#endif
