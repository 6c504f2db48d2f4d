#include "plugin.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Who can change a handler: its owner (chmod, then write) and anyone who may
 * write the file. Someone who may write its directory can only put a file of
 * their own there, which the owner check refuses; and the checks run on the
 * opened file, which is the one dlopen loads. A read-only mount stops
 * everyone but root (remounting takes root), whoever owns the file: so a
 * file owned by another uid is trusted only when it and its directory sit on
 * read-only mounts (a `:ro` bind mount into a container), and then trust
 * rests with whoever may write the mounted folder outside. */
static int on_read_only_mount(int fd)
{
    struct statvfs vfs;
    return fstatvfs(fd, &vfs) == 0 && (vfs.f_flag & ST_RDONLY);
}

static int trusted_uid(uid_t uid)
{
    return uid == 0 || uid == geteuid();
}

static int check_file(const char *path, int fd, char *err, size_t err_len)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, err_len, "handler %s: cannot load: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, err_len, "handler %s: expected a regular file", path);
        return -1;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(err, err_len,
                 "handler %s: refused: the file is %s-writable (mode %03o); expected writable by "
                 "its owner only (chmod go-w)",
                 path, (st.st_mode & S_IWOTH) ? "world" : "group", (unsigned)(st.st_mode & 0777));
        return -1;
    }
    if (trusted_uid(st.st_uid))
        return 0;
    char dir[4096]; /* path always has a slash (sc_plugin_load) */
    const char *slash = strrchr(path, '/');
    size_t dlen = slash == path ? 1 : (size_t)(slash - path);
    if (dlen >= sizeof dir) {
        snprintf(err, err_len, "handler %s: cannot load: path too long", path);
        return -1;
    }
    memcpy(dir, path, dlen);
    dir[dlen] = '\0';
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int read_only = on_read_only_mount(fd) && dfd >= 0 && on_read_only_mount(dfd);
    if (dfd >= 0)
        close(dfd);
    if (!read_only) {
        snprintf(err, err_len,
                 "handler %s: refused: owned by uid %u; expected root or the running user (uid "
                 "%u), or the file and its directory on a read-only mount",
                 path, (unsigned)st.st_uid, (unsigned)geteuid());
        return -1;
    }
    return 0;
}

/* dlopen looks a name up among the objects already loaded before it opens
 * anything: had a handler been loaded as "/proc/self/fd/N" and N closed, the
 * next handler's open() would get N again and dlopen would hand back the
 * first handler's object (its code, never its own init). So each load names
 * its file by a descriptor number no earlier load of this process used.
 * (One file loaded twice is still one object: glibc also matches device and
 * inode. Each load calls init all the same and keeps its own state.) */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static int unused_fd_number; /* no load used this number or any above it */

/* dlopen of the opened, checked file fd under a fresh name. Returns the
 * handle, or NULL with the reason in err. */
static void *open_by_descriptor(const char *path, int fd, char *err, size_t err_len)
{
    char fd_path[64];
    void *dl = NULL;
    pthread_mutex_lock(&load_lock);
    int named = fcntl(fd, F_DUPFD_CLOEXEC, unused_fd_number);
    if (named < 0) {
        snprintf(err, err_len, "handler %s: cannot load: no descriptor number from %d on: %s",
                 path, unused_fd_number, strerror(errno));
        goto out;
    }
    unused_fd_number = named + 1;
    snprintf(fd_path, sizeof fd_path, "/proc/self/fd/%d", named);
    /* Without /proc (a bare chroot) the path itself: then a name is a path. */
    dl = dlopen(access(fd_path, F_OK) == 0 ? fd_path : path, RTLD_NOW | RTLD_LOCAL);
    if (!dl)
        snprintf(err, err_len, "handler %s: cannot load: %s", path, dlerror());
    close(named);
out:
    pthread_mutex_unlock(&load_lock);
    return dl;
}

int sc_plugin_load(struct sc_plugin *p, const char *path, const char *config_json, char *err,
                   size_t err_len)
{
    char local[4096];
    memset(p, 0, sizeof *p);
    /* Without a slash dlopen searches the library path; a handler is always
     * a file named by the config. */
    if (!strchr(path, '/')) {
        snprintf(local, sizeof local, "./%s", path);
        path = local;
    }
    /* Loading a file means running its code as this process: refuse one
     * that someone else could have written. The checks run on the opened
     * file and dlopen loads that same file (through /proc/self/fd), so it
     * cannot be swapped in between. */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, err_len, "handler %s: cannot load: %s", path, strerror(errno));
        return -1;
    }
    if (check_file(path, fd, err, err_len)) {
        close(fd);
        return -1;
    }
    void *dl = open_by_descriptor(path, fd, err, err_len);
    close(fd);
    if (!dl)
        return -1;
    /* Copy what the error needs before dlclose: the strings live in the .so. */
    dlerror();
    sc_handler_v1_fn fn;
    *(void **)&fn = dlsym(dl, SC_HANDLER_SYMBOL);
    if (!fn) {
        snprintf(err, err_len,
                 "handler %s: missing symbol: expected an exported function %s, got none",
                 path, SC_HANDLER_SYMBOL);
        goto error_dlclose;
    }
    const struct sc_handler_v1 *h = fn();
    if (!h) {
        snprintf(err, err_len, "handler %s: %s(): expected a struct pointer, got NULL", path,
                 SC_HANDLER_SYMBOL);
        goto error_dlclose;
    }
    if (h->abi_version != SC_HANDLER_ABI_VERSION) {
        snprintf(err, err_len, "handler %s: abi_version: expected %u, got %u", path,
                 SC_HANDLER_ABI_VERSION, h->abi_version);
        goto error_dlclose;
    }
    if (h->struct_size < SC_HANDLER_V1_MIN_SIZE) {
        snprintf(err, err_len, "handler %s: struct_size: expected at least %u, got %u", path,
                 SC_HANDLER_V1_MIN_SIZE, h->struct_size);
        goto error_dlclose;
    }
    if (!h->name || !h->name[0]) {
        snprintf(err, err_len, "handler %s: name: expected a non-empty string, got %s", path,
                 h->name ? "\"\"" : "NULL");
        goto error_dlclose;
    }
    if (!h->handle) {
        snprintf(err, err_len, "handler %s: handle: expected a function, got NULL", path);
        goto error_dlclose;
    }
    if (h->init) {
        char ierr[512] = "";
        if (h->init(config_json ? config_json : "{}", &p->state, ierr, sizeof ierr) != 0) {
            snprintf(err, err_len, "handler %s (%s): init failed: %s", path, h->name,
                     ierr[0] ? ierr : "no reason given");
            goto error_dlclose;
        }
    }
    p->dl = dl;
    p->h = h;
    /* An appended field exists only when the handler's struct covers it. */
    p->handle_batch = h->struct_size >= offsetof(struct sc_handler_v1, handle_batch) +
                                            sizeof h->handle_batch
                          ? h->handle_batch
                          : NULL;
    return 0;
error_dlclose:
    dlclose(dl);
    return -1;
}

void sc_plugin_unload(struct sc_plugin *p)
{
    if (p->h && p->h->shutdown)
        p->h->shutdown(p->state);
    if (p->dl)
        dlclose(p->dl);
    memset(p, 0, sizeof *p);
}

sc_handler_status sc_plugin_handle(const struct sc_plugin *p, struct st_mysql *conn,
                                   const struct sc_event *ev, char *reason, size_t reason_len)
{
    if (reason_len)
        reason[0] = 0;
    return p->h->handle(p->state, conn, ev, reason, reason_len);
}

int sc_plugin_handle_batch(const struct sc_plugin *p, struct st_mysql *conn,
                           const struct sc_event *const *events, size_t n,
                           sc_handler_status *status, char *reasons, size_t reason_len)
{
    if (!p->handle_batch)
        return -1;
    memset(reasons, 0, n * reason_len);
    return p->handle_batch(p->state, conn, events, n, status, reasons, reason_len);
}
