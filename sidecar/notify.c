/* The sd_notify protocol, written out: one datagram of VAR=value lines to
 * the AF_UNIX socket named by $NOTIFY_SOCKET (a path, or "@name" for the
 * abstract namespace). systemd documents it as a stable interface
 * (sd_notify(3), "the protocol is simple"); doing it here saves linking
 * libsystemd for four system calls. */
#include "notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"

int sc_notify(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !path[0])
        return 0;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || len >= sizeof sa.sun_path) {
        sc_warn("NOTIFY_SOCKET=%s: expected an absolute path or @name", path);
        return -EINVAL;
    }
    memcpy(sa.sun_path, path, len);
    if (path[0] == '@')
        sa.sun_path[0] = '\0'; /* abstract: the length says where the name ends */
    socklen_t sa_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (path[0] == '/'));
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        int e = errno;
        sc_warn("NOTIFY_SOCKET: socket: %s", strerror(e));
        return -e;
    }
    int rc = 0;
    if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, sa_len) < 0) {
        rc = -errno;
        sc_warn("NOTIFY_SOCKET=%s: %s", path, strerror(-rc));
    }
    close(fd);
    return rc;
}

int sc_notify_ready(const char *status)
{
    char msg[512];
    snprintf(msg, sizeof msg, "READY=1\nSTATUS=%s", status);
    return sc_notify(msg);
}
