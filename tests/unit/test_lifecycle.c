/* Backoff: bounds, and jitter that differs between processes. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sidecar/lifecycle.h"
#include "tap.h"

/* The first draws of a new process, as a string. */
static int draws(char *out, size_t len)
{
    int fd[2];
    if (pipe(fd))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        sc_lifecycle_init();
        char buf[256];
        int off = 0;
        for (int i = 0; i < 8; i++)
            off += snprintf(buf + off, sizeof buf - (size_t)off, "%d ", sc_backoff_ms(12));
        if (write(fd[1], buf, (size_t)off) != off)
            _exit(1);
        _exit(0);
    }
    close(fd[1]);
    ssize_t n = read(fd[0], out, len - 1);
    close(fd[0]);
    waitpid(pid, NULL, 0);
    out[n > 0 ? n : 0] = 0;
    return n > 0 ? 0 : -1;
}

int main(void)
{
    char a[256], b[256];
    ok(draws(a, sizeof a) == 0 && draws(b, sizeof b) == 0, "two processes drew backoffs");
    ok(strcmp(a, b) != 0, "their jitter differs (%s| vs %s|)", a, b);
    int lo = 1 << 30, hi = 0;
    for (int i = 0; i < 1000; i++) {
        int ms = sc_backoff_ms(1);
        lo = ms < lo ? ms : lo;
        hi = ms > hi ? ms : hi;
    }
    ok(lo >= SC_BACKOFF_MIN_MS && hi <= SC_BACKOFF_MIN_MS + SC_BACKOFF_MIN_MS / 4 + 1,
       "first backoff within [min, min * 1.25] (%d..%d)", lo, hi);
    int top = sc_backoff_ms(1000);
    ok(top >= SC_BACKOFF_MAX_MS && top <= SC_BACKOFF_MAX_MS + SC_BACKOFF_MAX_MS / 4 + 1,
       "backoff is capped (%d)", top);
    return done();
}
