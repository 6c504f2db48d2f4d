/* Process lifecycle: stop requests from signals, interruptible sleeps. */
#ifndef SC_LIFECYCLE_H
#define SC_LIFECYCLE_H

#include <stdint.h>

/* SIGTERM and SIGINT request a stop; SIGPIPE is ignored. */
void sc_lifecycle_init(void);
int sc_stop_requested(void);
void sc_request_stop(void);

/* Monotonic clock, for timeouts and durations. */
int64_t sc_now_ms(void);
int64_t sc_now_us(void);

/* Sleeps up to ms, returning early when a stop is requested. */
void sc_sleep_ms(int ms);

/* The one reconnect backoff: the wait after the k-th consecutive failure
 * (k >= 1) is 100 ms doubling to 30 s, plus up to a quarter of jitter so
 * that many workers do not retry in step. */
#define SC_BACKOFF_MIN_MS 100
#define SC_BACKOFF_MAX_MS 30000
int sc_backoff_ms(unsigned long long k);

#endif
