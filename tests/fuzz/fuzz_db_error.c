/* Fuzz target: the 1062 classifier. The property: "already consumed" only
 * for a message that ends in the target key name and its closing quote. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sidecar/io/db_error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *msg = malloc(size + 1);
    if (!msg)
        return 0;
    memcpy(msg, data, size);
    msg[size] = 0;
    static const char tail[] = "uq_consumed_event_identity'";
    size_t len = strlen(msg);
    if (sc_db_is_consumed_duplicate(1062, msg)) {
        if (len < sizeof tail - 1 || strcmp(msg + len - (sizeof tail - 1), tail) != 0 ||
            strncmp(msg, "Duplicate entry '", 17) != 0)
            __builtin_trap();
    }
    if (sc_db_classify(1452, msg) == SC_DBERR_DUPLICATE || sc_db_is_consumed_duplicate(0, msg))
        __builtin_trap(); /* only 1062 can ever be a duplicate */
    char key[128];
    if (sc_db_dup_key_name(msg, key, sizeof key) == 0 && strchr(key, '\''))
        __builtin_trap();
    free(msg);
    return 0;
}
