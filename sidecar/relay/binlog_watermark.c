#include "binlog_watermark.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

int sc_binlog_pos_after(const struct sc_binlog_pos *a, const struct sc_binlog_pos *b)
{
    size_t la = strlen(a->file), lb = strlen(b->file);
    if (!la || !lb)
        return la > lb;
    int c = la != lb ? (la > lb ? 1 : -1) : strcmp(a->file, b->file);
    return c > 0 || (c == 0 && a->pos > b->pos);
}

int64_t sc_binlog_wm_candidate(int64_t now_us, long long oldest_age_s)
{
    if (oldest_age_s < 0)
        oldest_age_s = 0;
    return now_us - ((int64_t)oldest_age_s + SC_BINLOG_WM_MARGIN_S) * 1000000;
}

void sc_binlog_wm_add(struct sc_binlog_wm *w, const struct sc_binlog_pos *end, int64_t w_us)
{
    if (w->n >= SC_BINLOG_WM_SAMPLES || w_us <= 0 || !end->file[0])
        return;
    w->s[w->n].end = *end;
    w->s[w->n].w_us = w_us;
    w->n++;
}

int64_t sc_binlog_wm_passed(struct sc_binlog_wm *w, const struct sc_binlog_pos *at)
{
    int k = 0;
    while (k < w->n && !sc_binlog_pos_after(&w->s[k].end, at)) {
        if (w->s[k].w_us > w->ready)
            w->ready = w->s[k].w_us;
        k++;
    }
    memmove(w->s, w->s + k, (size_t)(w->n - k) * sizeof w->s[0]);
    w->n -= k;
    return w->ready;
}

void sc_binlog_wm_format(int64_t us, char *out, size_t len)
{
    if (us <= 0) {
        snprintf(out, len, "%s", "");
        return;
    }
    time_t t = (time_t)(us / 1000000);
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(out, len, "%04d-%02d-%02d %02d:%02d:%02d.%06lld", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long long)(us % 1000000));
}

int64_t sc_binlog_wm_parse(const char *s)
{
    struct tm tm = {0};
    int frac_at = 0;
    if (!s || sscanf(s, "%4d-%2d-%2d %2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                     &tm.tm_min, &tm.tm_sec, &frac_at) != 6)
        return 0;
    long long frac = 0;
    const char *p = s + frac_at;
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9' && digits < 6; p++, digits++)
            frac = frac * 10 + (*p - '0');
        for (; digits < 6; digits++)
            frac *= 10;
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t t = timegm(&tm);
    return t <= 0 ? 0 : (int64_t)t * 1000000 + frac;
}
