/* The relay's two connections and their failures: open what is closed,
 * close what failed, log a database failure once per change of state, keep
 * the broker connection alive around database work. */
#ifndef SC_RELAY_CONN_H
#define SC_RELAY_CONN_H

#include "relay_core.h"

int64_t sc_relay_now(const struct sc_relay_core *c);

/* Close the connection and clear its readiness gauge. */
void sc_relay_db_lost(struct sc_relay_core *c);
void sc_relay_amqp_lost(struct sc_relay_core *c);

/* Counts a database failure; logs it when the failing state changes. */
void sc_relay_db_failed(struct sc_relay_core *c, const char *what, const struct sc_db_err *e);
/* Ends a failing state (logged once). */
void sc_relay_db_healthy(struct sc_relay_core *c);

/* 1 when the failed statement can run again on this connection (deadlock
 * or lock wait, rolled back); 0 for every other class, unknown ones too. */
int sc_relay_rerun_in_place(struct sc_relay_core *c, const struct sc_db_err *e);

/* Sends a heartbeat when half the interval passed since the last frame. */
void sc_relay_keep_alive(struct sc_relay_core *c);

/* Opens what is closed. Returns 1 when both are open, else 0 with
 * c->round_wait set to the backoff. */
int sc_relay_connect_both(struct sc_relay_core *c);

#endif
