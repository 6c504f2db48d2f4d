#!/bin/bash
# Stand-in for the official rabbitmq image's entrypoint: the default user
# from RABBITMQ_DEFAULT_USER/PASS, listeners on every interface, logs on
# stdout, the server as the rabbitmq user.
set -eo pipefail
if [ "$1" = rabbitmq-server ]; then
    {
        echo "loopback_users.guest = false"
        echo "listeners.tcp.default = 5672"
        echo "management.tcp.port = 15672"
        echo "log.console = true"
        echo "log.console.level = info"
        echo "log.file = false"
        [ -n "${RABBITMQ_DEFAULT_USER:-}" ] && echo "default_user = $RABBITMQ_DEFAULT_USER"
        [ -n "${RABBITMQ_DEFAULT_PASS:-}" ] && echo "default_pass = $RABBITMQ_DEFAULT_PASS"
    } >/etc/rabbitmq/rabbitmq.conf
    chown rabbitmq:rabbitmq /etc/rabbitmq/rabbitmq.conf /var/lib/rabbitmq
    chmod 600 /etc/rabbitmq/rabbitmq.conf
    exec setpriv --reuid=rabbitmq --regid=rabbitmq --init-groups /usr/lib/rabbitmq/bin/rabbitmq-server
fi
exec "$@"
