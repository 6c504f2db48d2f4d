/* The outbox relay: claim outbox_event rows under a lease, publish them with
 * publisher confirms, and only then mark them PUBLISHED, conditionally on
 * still owning the lease. */
#ifndef SC_RELAY_H
#define SC_RELAY_H

#include "config.h"

/* Runs until a stop is requested; the batch in hand is finished first.
 * Returns the exit status: 0 on a clean stop, 2 without a relay section. */
int sc_relay_run(const struct sc_config *cfg);

#endif
