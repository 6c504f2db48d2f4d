"""A Galera node outside the primary component (isolated, or the minority of
a partition) keeps its connections and answers SET, SHOW and
`SELECT @@global.read_only` (0), but every other statement fails with 1047
"WSREP has not yet prepared node for application use". The contract puts
1047 in the class "not writable" with read-only: an outage of the node, not
the message's fault. So deliveries are held, no attempt is spent and
nothing is dead-lettered.

Found by the nemesis (--cluster, a Galera node isolated): the session made
again during the hold passed the read-only check, the claim met 1047 again,
and the delivery was blamed for it: "error 1047 (not writable) again for this
delivery on a new database session ...; counted as an attempt", a trip
through the delay queue, and at max_attempts the dead-letter queue.

Here the node is a TCP proxy in front of MariaDB that answers 1047 to every
statement but SET/SHOW/SELECT @@... for a window of a few seconds, exactly
as the non-primary node did in the nemesis run. Not blaming the delivery is
not enough alone: the session made again is taken at once and fails at once,
so the worker must also back off between such sessions (without that, a
4-second window made 5,367 sessions)."""
import threading

from harness import *
from harness import _MySQLProxy

WINDOW_S = 4
N = 40


class NonPrimaryProxy(_MySQLProxy):
    """Forwards to MariaDB. While `non_primary`, a command other than a
    query starting SET, SHOW or SELECT @@ (and a prepared statement's
    execution) is answered with ERR 1047 by the proxy itself; the server
    never sees it, so the session stays in step."""

    ERR_1047 = b"\xff" + (1047).to_bytes(2, "little") + b"#08S01" + \
        b"WSREP has not yet prepared node for application use"

    def __init__(self, target_port):
        super().__init__(target_port)
        self.non_primary = False
        self.refused = 0
        self._serve()

    def _refuse(self, payload):
        cmd = payload[:1]
        if cmd == b"\x17":  # COM_STMT_EXECUTE
            return True
        if cmd == b"\x03":  # COM_QUERY
            text = payload[1:].lstrip().upper()
            return not (text.startswith(b"SET") or text.startswith(b"SHOW") or text.startswith(b"SELECT @@"))
        return False

    def packet(self, pkt, link):
        # a command starts with sequence 0 (the handshake's packets do not)
        if self.non_primary and pkt[3] == 0 and self._refuse(pkt[4:]):
            self.refused += 1
            err = self.ERR_1047
            with link.lock:
                link.client.sendall(len(err).to_bytes(3, "little") + b"\x01" + err)
            return self.DROP
        return self.FORWARD


def scenario(label, quorum):
    proxy = NonPrimaryProxy(int(os.environ["SC_TEST_MYSQL_PORT"]))
    extra = {"workers": 1, "prefetch": 16, "batch_max": 8, "max_attempts": 2, "retry_delays_ms": [200]}
    if quorum:
        extra["queue_type"] = "quorum"
    sc = Sidecar(mysql_url=proxy.url(), consumer_extra=extra)
    if not ok(sc.start(), f"{label}: sidecar started"):
        return
    events = new_events(N, start=12000)
    ids = set(e for e, _ in events)

    def claimed():
        return count_in("consumed_event", "event_id", ids, f"AND consumer_name = '{sc.name}'")

    feeder = threading.Thread(target=publish_events, args=(sc.exchange, events),
                              kwargs={"pace_s": 3.0 * WINDOW_S / N}, daemon=True)
    feeder.start()
    ok(wait_until(lambda: claimed() >= N // 8, timeout=30), f"{label}: events flow before the window")
    proxy.non_primary = True
    ok(wait_until(lambda: proxy.refused > 0, timeout=WINDOW_S),
       f"{label}: the consumer met the non-primary node (1047)")
    time.sleep(WINDOW_S)  # the window itself (the fault's duration), not synchronisation
    proxy.non_primary = False
    feeder.join(60)
    ok(wait_until(lambda: claimed() + queue_depth(sc.dlq) >= N, timeout=60),
       f"{label}: every message had its outcome", detail=f"claimed {claimed()}, dead-lettered {queue_depth(sc.dlq)}")
    # Backed off, not spun: a node that takes the session but no write must
    # not get a new session for every try (one per 100 ms is already many).
    sessions = [l for l in sc.lines() if l.get("msg", "").startswith("database session made again")]
    ok(len(sessions) <= WINDOW_S * 10, f"{label}: sessions made again during the window backed off"
       f" ({len(sessions)} in {WINDOW_S} s, at most {WINDOW_S * 10})")
    blamed = [l for l in sc.lines() if "again for this delivery" in l.get("msg", "")]
    is_eq(len(blamed), 0, f"{label}: no delivery blamed for the node's 1047")
    is_eq(queue_depth(sc.dlq), 0, f"{label}: nothing dead-lettered")
    retried = [l for l in sc.outcomes("retried") if l.get("event_id") in ids]
    is_eq(len(retried), 0, f"{label}: no message went through a delay queue (no attempt spent)")
    is_eq(claimed(), N, f"{label}: every message claimed once")
    is_eq(count_in("notification_job", "event_id", ids), N, f"{label}: every effect once")
    ok(sc.alive(), f"{label}: the process kept running")
    is_eq(sc.stop(), 0, f"{label}: clean stop")


scenario("classic", quorum=False)
scenario("quorum", quorum=True)
done()
