#include "fault.h"

#if SC_FAULT_POINTS
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    if (atomic_fetch_add(&hits, 1) + 1 < want)
        return;
    char line[256];
    int len = snprintf(line, sizeof line,
                       "{\"level\":\"error\",\"msg\":\"fault point reached, exiting\",\"fault\":\"%s\"}\n",
                       name);
    ssize_t w = write(STDERR_FILENO, line, (size_t)len);
    (void)w;
    _exit(SC_FAULT_EXIT_CODE);
}
#else
typedef int sc_fault_points_disabled;
#endif
