/* Deliberately broken handlers for the loader test, one per BAD_* macro;
 * BAD_OLD is not broken: it is a handler built before handle_batch existed. */
#include <stdio.h>

#include "sidecar/handler.h"

__attribute__((unused)) static sc_handler_status handle(void *state, struct st_mysql *conn, const struct sc_event *ev,
                                char *reason, size_t reason_len)
{
    (void)state; (void)conn; (void)ev; (void)reason; (void)reason_len;
    return SC_HANDLER_OK;
}

__attribute__((unused)) static int init_fails(const char *config, void **state, char *err, size_t err_len)
{
    (void)state;
    snprintf(err, err_len, "config %s refused", config);
    return -1;
}

static const struct sc_handler_v1 h = {
#ifdef BAD_ABI
    .abi_version = 2,
#else
    .abi_version = SC_HANDLER_ABI_VERSION,
#endif
#ifdef BAD_SIZE
    .struct_size = 16,
#elif defined(BAD_OLD)
    .struct_size = 40, /* built against the header before handle_batch */
#else
    .struct_size = sizeof(struct sc_handler_v1),
#endif
#ifdef BAD_NAME
    .name = NULL,
#else
    .name = "bad",
#endif
#ifdef BAD_INIT
    .init = init_fails,
#endif
#ifndef BAD_HANDLE
    .handle = handle,
#endif
};

#ifdef BAD_SYMBOL
__attribute__((visibility("default"))) const struct sc_handler_v1 *sc_handler_v0(void);
__attribute__((visibility("default"))) const struct sc_handler_v1 *sc_handler_v0(void)
#else
__attribute__((visibility("default"))) const struct sc_handler_v1 *sc_handler_v1(void)
#endif
{
    return &h;
}
