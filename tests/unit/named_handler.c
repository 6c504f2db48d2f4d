/* A well-formed handler built twice under two names (NAMED_HANDLER), for the
 * loader test: two different files loaded in one process must each run
 * their own code, and one file loaded twice must keep one state per load.
 * handle() answers REJECT with "<name> <handler_config>" as the reason, so
 * the test sees whose code ran with whose state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sidecar/handler.h"

static int init(const char *config, void **state, char *err, size_t err_len)
{
    char *copy = strdup(config);
    if (!copy) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    *state = copy;
    return 0;
}

static sc_handler_status handle(void *state, struct st_mysql *conn, const struct sc_event *ev,
                                char *reason, size_t reason_len)
{
    (void)conn;
    (void)ev;
    snprintf(reason, reason_len, "%s %s", NAMED_HANDLER, state ? (const char *)state : "(no state)");
    return SC_HANDLER_REJECT;
}

static void shutdown_(void *state)
{
    free(state);
}

static const struct sc_handler_v1 h = {
    .abi_version = SC_HANDLER_ABI_VERSION,
    .struct_size = sizeof(struct sc_handler_v1),
    .name = NAMED_HANDLER,
    .init = init,
    .handle = handle,
    .shutdown = shutdown_,
};

__attribute__((visibility("default"))) const struct sc_handler_v1 *sc_handler_v1(void)
{
    return &h;
}
