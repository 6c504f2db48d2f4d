#include "fault.h"

#if SC_FAULT_POINTS
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_long hits;

void sc_fault_point(const char *name)
{
    const char *spec = getenv("SIDECAR_FAULT");
    if (!spec)
        return;
    size_t n = strlen(name);
    if (strncmp(spec, name, n) != 0 || (spec[n] != 0 && spec[n] != ':'))
        return;
    long want = spec[n] == ':' ? atol(spec + n + 1) : 1;
    const char *pause = getenv("SIDECAR_FAULT_PAUSE_MS");
    long hit = atomic_fetch_add(&hits, 1) + 1;
    if (hit < want || (pause && hit > want))
        return; /* a pause happens once; an exit ends it all anyway */
    char line[256];
    int len = snprintf(line, sizeof line,
                       "{\"level\":\"error\",\"msg\":\"fault point reached, %s\",\"fault\":\"%s\"}\n",
                       pause ? "pausing" : "exiting", name);
    ssize_t w = write(STDERR_FILENO, line, (size_t)len);
    (void)w;
    if (pause) {
        /* Pause instead of dying: lets a test change the world (take a
         * lease away) at exactly this point, then watch what happens. */
        long ms = atol(pause);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        len = snprintf(line, sizeof line,
                       "{\"level\":\"error\",\"msg\":\"fault point resumed\",\"fault\":\"%s\"}\n", name);
        w = write(STDERR_FILENO, line, (size_t)len);
        (void)w;
        return;
    }
    _exit(SC_FAULT_EXIT_CODE);
}
#else
typedef int sc_fault_points_disabled;
#endif
