/* The Prometheus text buffer and label escaping. */
#include "metrics_out.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void sc_metrics_emit(struct sc_metrics_out *o, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (o->len + (size_t)n < o->cap) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = (o->cap + (size_t)n) * 2;
        char *p = realloc(o->p, cap);
        if (!p)
            return;
        o->p = p;
        o->cap = cap;
    }
}

const char *sc_metrics_esc(const char *s, char *buf, size_t len)
{
    size_t j = 0;
    for (; *s && j + 2 < len; s++) {
        if (*s == '\\' || *s == '"') {
            buf[j++] = '\\';
            buf[j++] = *s;
        } else if (*s == '\n') {
            buf[j++] = '\\';
            buf[j++] = 'n';
        } else {
            buf[j++] = *s;
        }
    }
    buf[j] = 0;
    return buf;
}
