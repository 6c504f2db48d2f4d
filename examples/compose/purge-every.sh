#!/bin/sh
# The purge service of docker-compose.yml: `sidecar purge` at start, then
# every PURGE_EVERY_S seconds (default a day), with PURGE_OLDER_THAN as the
# retention (default 14d; purge refuses one below purge.redelivery_horizon_s,
# and so does this loop: exit 2 stops it, the log says why).
# docs/operations.md#a-purge-schedule
every=${PURGE_EVERY_S:-86400}
older=${PURGE_OLDER_THAN:-14d}
trap 'exit 0' TERM INT
while :; do
    sidecar purge -c /etc/sidecar/sidecar.json --older-than "$older"
    rc=$?
    [ "$rc" = 2 ] && exit 2
    sleep "$every" &
    wait $!
done
