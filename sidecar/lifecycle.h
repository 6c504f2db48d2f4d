/* Process lifecycle: stop requests from signals, interruptible sleeps. */
#ifndef SC_LIFECYCLE_H
#define SC_LIFECYCLE_H

/* SIGTERM and SIGINT request a stop; SIGPIPE is ignored. */
void sc_lifecycle_init(void);
int sc_stop_requested(void);
void sc_request_stop(void);

/* Sleeps up to ms, returning early when a stop is requested. */
void sc_sleep_ms(int ms);

#endif
