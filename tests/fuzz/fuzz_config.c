/* Fuzz target: the configuration loader. */
#include <stdint.h>
#include <string.h>

#include "sidecar/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sc_config c;
    char err[512] = "";
    if (sc_config_parse((const char *)data, size, 0, &c, err, sizeof err) == 0) {
        if (!c.amqp_url || !c.mysql_url) /* http_listen may be NULL: the command picks */
            __builtin_trap();
        for (size_t i = 0; i < c.n_consumers; i++)
            if (!c.consumers[i].queue || !c.consumers[i].dead_letter_queue || !c.consumers[i].n_retry_delays)
                __builtin_trap();
        sc_config_free(&c);
    } else if (!err[0]) {
        __builtin_trap();
    }
    return 0;
}
