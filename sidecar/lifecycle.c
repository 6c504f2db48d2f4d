#include "lifecycle.h"

#include <stdlib.h>

#include <signal.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1; /* only a flag: the loops notice it within one poll */
}

void sc_lifecycle_init(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* Backoff jitter only spreads reconnects when processes draw different
     * numbers: rand() unseeded gives every process the same sequence. */
    unsigned seed;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed)
        seed = (unsigned)time(NULL) ^ ((unsigned)getpid() << 16);
    srand(seed);
}

int sc_stop_requested(void)
{
    return stop_flag != 0;
}

void sc_request_stop(void)
{
    stop_flag = 1;
}

int64_t sc_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t sc_now_ms(void)
{
    return sc_now_us() / 1000;
}

void sc_sleep_ms(int ms)
{
    while (ms > 0 && !stop_flag) {
        int step = ms < 100 ? ms : 100;
        struct timespec ts = {0, (long)step * 1000000L};
        nanosleep(&ts, NULL);
        ms -= step;
    }
}

int sc_backoff_ms(unsigned long long k)
{
    int ms = SC_BACKOFF_MIN_MS;
    for (unsigned long long i = 1; i < k && ms < SC_BACKOFF_MAX_MS; i++)
        ms *= 2;
    if (ms > SC_BACKOFF_MAX_MS)
        ms = SC_BACKOFF_MAX_MS;
    return ms + rand() % (ms / 4 + 1);
}
