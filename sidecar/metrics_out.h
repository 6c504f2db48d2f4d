/* The Prometheus text being rendered: a growing buffer and label escaping,
 * shared by the renderers of metrics.c, metrics_tenants.c and the
 * console's (console/console_metrics.c). */
#ifndef SC_METRICS_OUT_H
#define SC_METRICS_OUT_H

#include <stddef.h>

#include "metrics.h"

struct sc_metrics_out {
    char *p;
    size_t len, cap;
};

/* Appends; the buffer grows (left as it was when out of memory). */
__attribute__((format(printf, 2, 3))) void sc_metrics_emit(struct sc_metrics_out *o,
                                                           const char *fmt, ...);

/* Label values are consumer names, worker ids and tenant names: escape \ "
 * and newline. Returns buf. */
const char *sc_metrics_esc(const char *s, char *buf, size_t len);

/* The tenant series of the consumers (those with tenants) and of the relay
 * (metrics_tenants.c). lab is the relay's worker label. */
void sc_metrics_render_consumer_tenants(struct sc_metrics_out *o,
                                        struct sc_consumer_metrics *const *c, int n);
void sc_metrics_render_relay_tenants(struct sc_metrics_out *o, struct sc_relay_metrics *r,
                                     const char *lab);

#endif
