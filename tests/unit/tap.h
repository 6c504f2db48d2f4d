/* A minimal TAP producer for the unit tests: ok(), is_int(), is_str(), done(). */
#ifndef SC_TAP_H
#define SC_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define is_int(got, want, ...) \
    tap_is_int((long long)(got), (long long)(want), __FILE__, __LINE__, __VA_ARGS__)
#define is_str(got, want, ...) tap_is_str((got), (want), __FILE__, __LINE__, __VA_ARGS__)

static void tap_vlabel(const char *fmt, va_list ap)
{
    vprintf(fmt, ap);
    putchar('\n');
}

__attribute__((format(printf, 4, 5), unused))
static int tap_ok(int cond, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%sok %d - ", cond ? "" : "not ", ++tap_n);
    tap_vlabel(fmt, ap);
    va_end(ap);
    if (!cond) {
        tap_failed++;
        printf("#   failed at %s:%d\n", file, line);
    }
    return cond;
}

__attribute__((format(printf, 5, 6), unused))
static int tap_is_int(long long got, long long want, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int cond = got == want;
    printf("%sok %d - ", cond ? "" : "not ", ++tap_n);
    tap_vlabel(fmt, ap);
    va_end(ap);
    if (!cond) {
        tap_failed++;
        printf("#   failed at %s:%d: got %lld, expected %lld\n", file, line, got, want);
    }
    return cond;
}

__attribute__((format(printf, 5, 6), unused))
static int tap_is_str(const char *got, const char *want, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int cond = got && want ? strcmp(got, want) == 0 : got == want;
    printf("%sok %d - ", cond ? "" : "not ", ++tap_n);
    tap_vlabel(fmt, ap);
    va_end(ap);
    if (!cond) {
        tap_failed++;
        printf("#   failed at %s:%d: got \"%s\", expected \"%s\"\n", file, line,
               got ? got : "(null)", want ? want : "(null)");
    }
    return cond;
}

__attribute__((unused)) static int done(void)
{
    printf("1..%d\n", tap_n);
    return tap_failed ? 1 : 0;
}

#endif
