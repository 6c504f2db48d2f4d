# Sourced by tests/compose/run: the container engine and the local images.
# Needs: $root (the repository), $cache (cache dir), $logs (log dir), log().

# apt-get for what is missing (sudo when not root).
compose_install() {
    local missing=() p
    for p in docker.io docker-compose debootstrap; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    log "installing ${missing[*]}"
    local sudo=; [ "$(id -u)" -ne 0 ] && sudo=sudo
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        "${missing[@]}" >"$logs/apt.log" 2>&1 \
        || { $sudo apt-get update >>"$logs/apt.log" 2>&1 \
             && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y \
                  --no-install-recommends "${missing[@]}" >>"$logs/apt.log" 2>&1; }
}

# Starts dockerd when none answers; remembers the pid so compose_stop_engine
# stops only a daemon this script started.
started_dockerd=
compose_start_engine() {
    if docker info >/dev/null 2>&1; then
        log "using the running docker daemon"
        return 0
    fi
    log "starting dockerd (log: $logs/dockerd.log)"
    setsid dockerd >"$logs/dockerd.log" 2>&1 </dev/null &
    started_dockerd=$!
    local i
    for i in $(seq 1 120); do
        docker info >/dev/null 2>&1 && return 0
        kill -0 "$started_dockerd" 2>/dev/null || break
        sleep 0.5
    done
    echo "# dockerd did not come up:" >&2
    tail -20 "$logs/dockerd.log" >&2
    return 1
}

compose_stop_engine() {
    [ -n "$started_dockerd" ] || return 0
    log "stopping the dockerd this run started (pid $started_dockerd); it leaves ip_forward=1," \
        "the FORWARD policy DROP and the docker0 link behind"
    kill -TERM "$started_dockerd" 2>/dev/null
    local i
    for i in $(seq 1 60); do
        kill -0 "$started_dockerd" 2>/dev/null || { started_dockerd=; return 0; }
        sleep 0.5
    done
    kill -KILL "$started_dockerd" 2>/dev/null
    started_dockerd=
}

# debian:bookworm (and :bookworm-slim) from debootstrap, from the mirror apt
# already uses; the root file system is cached as a tarball in $cache.
compose_base_image() {
    if docker image inspect debian:bookworm >/dev/null 2>&1 \
       && docker image inspect debian:bookworm-slim >/dev/null 2>&1; then
        return 0
    fi
    local tarball="$cache/debian-bookworm-minbase.tar"
    if [ ! -s "$tarball" ]; then
        local mirror rootfs
        mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null)
        [ -n "$mirror" ] || mirror=$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
        [ -n "$mirror" ] || { echo "# no Debian mirror found in the apt sources" >&2; return 1; }
        rootfs=$(mktemp -d "$cache/rootfs.XXXXXX")
        log "debootstrap bookworm from $mirror (log: $logs/debootstrap.log)"
        debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$logs/debootstrap.log" 2>&1 \
            || { rm -rf "$rootfs"; echo "# debootstrap failed" >&2; tail -5 "$logs/debootstrap.log" >&2; return 1; }
        rm -f "$rootfs"/etc/apt/sources.list
        cp /etc/apt/sources.list.d/*.sources "$rootfs/etc/apt/sources.list.d/" 2>/dev/null
        [ -f /etc/apt/sources.list ] && cp /etc/apt/sources.list "$rootfs/etc/apt/"
        cp /etc/apt/apt.conf.d/* "$rootfs/etc/apt/apt.conf.d/" 2>/dev/null
        : >"$rootfs/etc/resolv.conf"
        rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
        tar -C "$rootfs" --exclude='./proc/*' --exclude='./sys/*' --exclude='./dev/*' \
            -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
        rm -rf "$rootfs"
    fi
    log "importing debian:bookworm from $tarball"
    docker import -c 'CMD ["bash"]' -c 'ENV LANG=C.UTF-8' "$tarball" debian:bookworm >/dev/null \
        && docker tag debian:bookworm debian:bookworm-slim
}

# The stand-ins for mysql:8.4 and rabbitmq:3.13-management, and the project
# image with its handler-sdk target.
compose_images() {
    local t0
    t0=$(date +%s)
    # one at a time: side by side they compete for the disk and take longer
    docker build -q -t sidecar-standin-mysql:8.4 "$root/tests/compose/standin/mysql" \
        >"$logs/build-mysql.log" 2>&1 || { cat "$logs/build-mysql.log" >&2; return 1; }
    docker build -q -t sidecar-standin-rabbitmq:3.13-management "$root/tests/compose/standin/rabbitmq" \
        >"$logs/build-rabbitmq.log" 2>&1 || { cat "$logs/build-rabbitmq.log" >&2; return 1; }
    docker build -t sidecar:latest "$root" >"$logs/build-sidecar.log" 2>&1 \
        || { tail -30 "$logs/build-sidecar.log" >&2; return 1; }
    docker build --target handler-sdk -t sidecar-handler-sdk:latest "$root" \
        >"$logs/build-sdk.log" 2>&1 || { tail -30 "$logs/build-sdk.log" >&2; return 1; }
    log "images ready ($(( $(date +%s) - t0 )) s)"
}
