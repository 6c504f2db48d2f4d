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

/* test_plugin --load PATH: one load in this process, for the read-only
 * mount cases run inside a private mount namespace. */
static int load_only(const char *path)
{
    struct sc_plugin p;
    char err[1024] = "";
    if (sc_plugin_load(&p, path, "{}", err, sizeof err) != 0) {
        printf("refused: %s\n", err);
        return 1;
    }
    printf("loaded: %s\n", p.h->name);
    sc_plugin_unload(&p);
    return 0;
}

/* Runs script under `unshare --mount` (a private mount namespace, so the
 * host's mounts are untouched) and returns its output in out. */
static int in_mount_namespace(const char *script, char *out, size_t out_len)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "unshare --mount --propagation private sh -ec '%s' 2>&1", script);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    size_t n = fread(out, 1, out_len - 1, f);
    while (n > 0 && out[n - 1] == '\n')
        n--;
    out[n] = '\0';
    return pclose(f);
}

/* A handler owned by another uid loads only from a read-only mount (file
 * and directory); the same file on a writable mount, or group-writable on
 * the read-only one, is refused. */
static void read_only_mounts(const char *self, const char *sample, const char *dir)
{
    if (geteuid() != 0 || system("unshare --mount true 2>/dev/null") != 0) {
        for (int i = 0; i < 4; i++)
            printf("ok %d - # SKIP needs root and unshare --mount\n", ++tap_n);
        return;
    }
    char script[3072], out[2048];
    /* rw tmpfs, handler owned by uid 1000 (a host user's build) */
    snprintf(script, sizeof script,
             "m=%s/mnt; mkdir -p $m; mount -t tmpfs -o mode=755 none $m; "
             "cp %s $m/h.so; chown 1000:1000 $m/h.so; chmod 755 $m/h.so; %s --load $m/h.so",
             dir, sample, self);
    int rc = in_mount_namespace(script, out, sizeof out);
    ok(rc != 0 && strstr(out, "refused: owned by uid 1000") &&
           strstr(out, "or the file and its directory on a read-only mount"),
       "uid 1000's handler on a writable mount is refused (%s)", out);
    /* the same, remounted read-only */
    snprintf(script, sizeof script,
             "m=%s/mnt; mkdir -p $m; mount -t tmpfs -o mode=755 none $m; "
             "cp %s $m/h.so; chown 1000:1000 $m/h.so; chmod 755 $m/h.so; "
             "mount -o remount,ro $m; %s --load $m/h.so",
             dir, sample, self);
    rc = in_mount_namespace(script, out, sizeof out);
    ok(rc == 0 && strstr(out, "loaded: notification_job"),
       "uid 1000's handler on a read-only mount loads (%s)", out);
    /* read-only file system, but the directory holding it is writable: a
     * single file bind-mounted read-only into a writable directory */
    snprintf(script, sizeof script,
             "m=%s/mnt; mkdir -p $m; mount -t tmpfs -o mode=755 none $m; "
             "cp %s $m/src.so; chown 1000:1000 $m/src.so; chmod 755 $m/src.so; "
             "mkdir $m/d; touch $m/d/h.so; mount --bind $m/src.so $m/d/h.so; "
             "mount -o remount,bind,ro $m/d/h.so; %s --load $m/d/h.so",
             dir, sample, self);
    rc = in_mount_namespace(script, out, sizeof out);
    ok(rc != 0 && strstr(out, "refused: owned by uid 1000"),
       "a read-only file in a writable directory is refused when another uid owns it (%s)", out);
    /* read-only, but group-writable: still refused */
    snprintf(script, sizeof script,
             "m=%s/mnt; mkdir -p $m; mount -t tmpfs -o mode=755 none $m; "
             "cp %s $m/h.so; chown 1000:1000 $m/h.so; chmod 775 $m/h.so; "
             "mount -o remount,ro $m; %s --load $m/h.so",
             dir, sample, self);
    rc = in_mount_namespace(script, out, sizeof out);
    ok(rc != 0 && strstr(out, "refused: the file is group-writable (mode 775)"),
       "a group-writable handler is refused on a read-only mount too (%s)", out);
    snprintf(script, sizeof script, "%s/mnt", dir);
    rmdir(script);
}

/* What the loaded handler says of itself: its name and, from handle(), the
 * "<name> <config>" reason of named_handler.c (whose code ran, with whose
 * state). */
static const char *answer(const struct sc_plugin *p, char *buf, size_t len)
{
    if (!p->h)
        return "(not loaded)";
    sc_plugin_handle(p, NULL, NULL, buf, len);
    return buf;
}

static int load_named(struct sc_plugin *p, const char *dir, const char *file, const char *config)
{
    char path[1024], err[1024] = "";
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int rc = sc_plugin_load(p, path, config, err, sizeof err);
    if (rc)
        printf("# %s: %s\n", file, err);
    return rc;
}

/* Two consumers of one process, each with its own handler file, and two
 * with one file but each its own handler_config: every load runs its own
 * file's code, with its own init and state, whatever was loaded or
 * unloaded before (the loader opens each file and loads it by descriptor:
 * a name glibc already knows must never stand for another file). */
static void side_by_side(const char *dir)
{
    struct sc_plugin a, b, a2, b2;
    char buf[256];
    ok(load_named(&a, dir, "named_alpha.so", "{\"k\":1}") == 0, "alpha loads");
    ok(load_named(&b, dir, "named_beta.so", "{\"k\":2}") == 0, "beta loads beside it");
    is_str(b.h ? b.h->name : NULL, "beta", "the second file is its own object, not the first's");
    is_str(answer(&b, buf, sizeof buf), "beta {\"k\":2}", "beta's handle runs beta's code with its state");
    is_str(answer(&a, buf, sizeof buf), "alpha {\"k\":1}", "alpha's handle still runs alpha's code");

    ok(load_named(&a2, dir, "named_alpha.so", "{\"k\":3}") == 0, "alpha loads a second time");
    is_str(answer(&a2, buf, sizeof buf), "alpha {\"k\":3}",
           "one file used twice: the second load ran init with its own handler_config");
    is_str(answer(&a, buf, sizeof buf), "alpha {\"k\":1}", "and the first load kept its state");
    ok(a2.state != a.state, "two states, one per load");

    /* Unloading one of the two alpha loads leaves alpha loaded (and its
     * descriptor number free again): the next file is still its own. */
    sc_plugin_unload(&a);
    is_str(answer(&a2, buf, sizeof buf), "alpha {\"k\":3}", "the other alpha load works on");
    sc_plugin_unload(&b);
    ok(load_named(&b2, dir, "named_beta.so", "{\"k\":4}") == 0, "beta loads again");
    is_str(answer(&b2, buf, sizeof buf), "beta {\"k\":4}",
           "after unloads the freed descriptor numbers name no stale object");
    ok(load_named(&b, dir, "named_alpha.so", "{\"k\":5}") == 0, "alpha a third time");
    is_str(answer(&b, buf, sizeof buf), "alpha {\"k\":5}", "and it is alpha");
    sc_plugin_unload(&b);
    sc_plugin_unload(&b2);
    sc_plugin_unload(&a2);

    /* The other order, from nothing loaded. */
    ok(load_named(&b, dir, "named_beta.so", "{}") == 0 && load_named(&a, dir, "named_alpha.so", "{}") == 0,
       "beta, then alpha load");
    is_str(a.h ? a.h->name : NULL, "alpha", "the second is alpha");
    sc_plugin_unload(&a);
    sc_plugin_unload(&b);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--load") == 0)
        return load_only(argv[2]);
    if (argc < 3) {
        printf("Bail out! usage: test_plugin BAD_HANDLER_DIR SAMPLE_HANDLER\n");
        return 1;
    }
    const char *dir = argv[1];
    side_by_side(dir);
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

    char self[1024];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    self[sl > 0 ? sl : 0] = '\0';
    read_only_mounts(self, src, dir);

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
