/* Handler plugins: dlopen, ABI check, init and shutdown. */
#ifndef SC_PLUGIN_H
#define SC_PLUGIN_H

#include <stddef.h>

#include "sidecar/handler.h"

struct sc_plugin {
    void *dl;
    const struct sc_handler_v1 *h;
    void *state;
    /* h->handle_batch when the handler's struct_size covers it, else NULL */
    int (*handle_batch)(void *state, struct st_mysql *conn, const struct sc_event *const *events,
                        size_t n, sc_handler_status *status, char *reasons, size_t reason_len);
};

/* Opens path (RTLD_NOW|RTLD_LOCAL), checks the ABI block, then calls init
 * with config_json. Returns 0, or -1 with a message that names the file and
 * says expected X, got Y in err; the library is closed again by then. */
int sc_plugin_load(struct sc_plugin *p, const char *path, const char *config_json, char *err,
                   size_t err_len);
void sc_plugin_unload(struct sc_plugin *p);

/* The handler's two entry points, called only through here: one event, or
 * (when the handler has handle_batch; else -1 without calling anything) a
 * whole batch. Reasons are cleared before the call. */
sc_handler_status sc_plugin_handle(const struct sc_plugin *p, struct st_mysql *conn,
                                   const struct sc_event *ev, char *reason, size_t reason_len);
int sc_plugin_handle_batch(const struct sc_plugin *p, struct st_mysql *conn,
                           const struct sc_event *const *events, size_t n,
                           sc_handler_status *status, char *reasons, size_t reason_len);

#endif
