/* The consume loop: for each delivery, one database transaction that claims
 * (consumer_name, event_id) and runs the handler's local effect, COMMIT, and
 * only then the ack. */
#ifndef SC_CONSUMER_H
#define SC_CONSUMER_H

#include "config.h"

/* Runs every consumer of cfg (workers threads each) until a stop is
 * requested. Returns the process exit status: 0 on a clean stop, 2 when a
 * handler is refused at start-up. */
int sc_consume_run(const struct sc_config *cfg);

#endif
