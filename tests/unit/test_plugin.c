/* The loader refuses every broken handler with the file name and
 * expected/got, and loads the sample handler. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sidecar/plugin.h"
#include "tap.h"

static void refused(const char *dir, const char *file, const char *want, const char *label)
{
    char path[1024], err[1024] = "";
    struct sc_plugin p;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int rc = sc_plugin_load(&p, path, "{}", err, sizeof err);
    ok(rc != 0 && strstr(err, want) && strstr(err, file), "%s (error: %s)", label, err);
    if (rc == 0)
        sc_plugin_unload(&p);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        printf("Bail out! usage: test_plugin BAD_HANDLER_DIR SAMPLE_HANDLER\n");
        return 1;
    }
    const char *dir = argv[1];
    refused(dir, "bad_abi.so", "abi_version: expected 1, got 2", "wrong ABI version");
    refused(dir, "bad_size.so", "struct_size: expected at least 40, got 16", "struct too small");
    refused(dir, "bad_name.so", "name: expected a non-empty string, got NULL", "NULL name");
    refused(dir, "bad_handle.so", "handle: expected a function, got NULL", "NULL handle");
    refused(dir, "bad_symbol.so", "missing symbol: expected an exported function sc_handler_v1, got none", "missing symbol");
    refused(dir, "bad_init.so", "init failed: config {} refused", "init failure reported");
    refused(dir, "no_such_handler.so", "cannot load", "missing file");

    /* A handler someone else could have written is refused before dlopen. */
    char src[1024], copy[1024], cmd[3200];
    snprintf(src, sizeof src, "%s", argv[2]);
    snprintf(copy, sizeof copy, "%s/writable_handler.so", dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' && chmod 664 '%s'", src, copy, copy);
    ok(system(cmd) == 0, "made a group-writable copy of the sample handler");
    refused(dir, "writable_handler.so", "refused: the file is group-writable (mode 664)", "group-writable file");
    snprintf(cmd, sizeof cmd, "chmod 646 '%s'", copy);
    ok(system(cmd) == 0, "made it world-writable");
    refused(dir, "writable_handler.so", "refused: the file is world-writable", "world-writable file");
    snprintf(cmd, sizeof cmd, "chmod 755 '%s'", copy);
    ok(system(cmd) == 0, "made it owner-writable only");
    {
        struct sc_plugin ok_p;
        char e2[1024] = "";
        ok(sc_plugin_load(&ok_p, copy, "{}", e2, sizeof e2) == 0, "then it loads (%s)", e2);
        sc_plugin_unload(&ok_p);
    }
    if (geteuid() == 0) {
        snprintf(cmd, sizeof cmd, "chown 4242 '%s'", copy);
        ok(system(cmd) == 0, "gave it to another user");
        refused(dir, "writable_handler.so", "refused: owned by uid 4242", "owned by someone else");
    }
    remove(copy);

    struct sc_plugin p;
    char err[1024] = "", path[1024];
    ok(sc_plugin_load(&p, argv[2], "{}", err, sizeof err) == 0, "sample handler loads (%s)", err);
    is_str(p.h ? p.h->name : NULL, "notification_job", "sample handler name");
    ok(p.handle_batch != NULL, "the sample handler offers handle_batch");
    sc_plugin_unload(&p);

    snprintf(path, sizeof path, "%s/bad_old.so", dir);
    ok(sc_plugin_load(&p, path, "{}", err, sizeof err) == 0,
       "a handler built before handle_batch (struct_size 40) still loads (%s)", err);
    ok(p.handle_batch == NULL, "and its handle_batch is not read past its struct_size");
    sc_plugin_unload(&p);
    return done();
}
