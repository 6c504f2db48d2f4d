# Sourced by tests/servers and tests/cluster/servers.
# Our fixed ports lie in Linux's ephemeral range, so one can be the local end
# of another program's outgoing connection, and the server then cannot listen
# (seen: eaddrinuse). Waits, bounded, until no established connection holds it.
port_free() {
    local p=$1
    for _ in $(seq 1 120); do
        ss -Htan state established "( sport = :$p )" 2>/dev/null | grep -q . || return 0
        sleep 0.5
    done
    echo "port $p is still the local end of a connection:" >&2
    ss -tan state established "( sport = :$p )" >&2
}
