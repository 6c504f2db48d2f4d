"""A database node that cannot take writes for a few seconds (a failover:
`SET GLOBAL read_only = 1`, the consumer's user has no READ ONLY ADMIN) is a
database outage, not a bad message: the deliveries are held (as for a lost
connection, up to db_outage_hold_ms), the session made again, and no
attempt is burned. Once the node takes writes again every message is
applied exactly once and nothing is dead-lettered. (Before: error 1290 was
a per-message failure, retried through the delay queues and
dead-lettered: a 4-second window dead-lettered 200 of 300 good messages.)

Run on a classic queue, then on a quorum queue (where returning a delivery
raises x-delivery-count)."""
import threading

from harness import *

WINDOW_S = 4  # how long the node refuses writes: the fault itself


def read_only_errors(sc):
    return [l for l in sc.lines() if "1290" in l.get("msg", "") or l.get("error_code") == 1290]


def scenario(label, n, quorum):
    extra = {"workers": 2, "prefetch": 32, "batch_max": 16, "max_attempts": 3,
             "retry_delays_ms": [200, 400]}
    if quorum:
        extra["queue_type"] = "quorum"
    sc = Sidecar(consumer_extra=extra)
    if not ok(sc.start(), f"{label}: sidecar started"):
        return
    events = new_events(n, start=11000)
    ids = [e for e, _ in events]

    def applied():
        return count_in("notification_job", "event_id", ids)

    def claimed():
        return count_in("consumed_event", "event_id", ids, f"AND consumer_name = '{sc.name}'")

    # Paced, so that messages keep arriving before, during and after the window.
    feeder = threading.Thread(target=publish_events, args=(sc.exchange, events),
                              kwargs={"pace_s": 2.0 * WINDOW_S / n}, daemon=True)
    feeder.start()
    ok(wait_until(lambda: applied() >= n // 6, timeout=30), f"{label}: events flow before the window")
    try:
        query("SET GLOBAL read_only = 1")
        ok(wait_until(lambda: read_only_errors(sc), timeout=WINDOW_S),
           f"{label}: the consumer met the read-only node (1290)", detail=sc.text()[-1500:])
        during = applied()
        time.sleep(WINDOW_S)  # the window itself (the fault's duration), not synchronisation
        ok(applied() == during, f"{label}: nothing was applied while the node refused writes")
    finally:
        query("SET GLOBAL read_only = 0")
    feeder.join(60)
    ok(not feeder.is_alive(), f"{label}: all {n} messages published")
    # Settled: every message applied, or the ones missing are in the DLQ.
    ok(wait_until(lambda: claimed() + queue_depth(sc.dlq) >= n, timeout=60),
       f"{label}: every message had its outcome", detail=f"claimed {claimed()}, dead-lettered {queue_depth(sc.dlq)}")
    is_eq(queue_depth(sc.dlq), 0, f"{label}: nothing dead-lettered")
    is_eq(claimed(), n, f"{label}: every message claimed once")
    is_eq(applied(), n, f"{label}: every effect once")
    retried = [l for l in sc.outcomes("retried") if l.get("event_id") in set(ids)]
    is_eq(len(retried), 0, f"{label}: no message went through a delay queue (no attempt burned)")
    late = [l for l in sc.outcomes("applied") if l.get("event_id") in set(ids) and l.get("attempt", 1) != 1]
    is_eq(len(late), 0, f"{label}: every message applied at attempt 1")
    ok(sc.alive(), f"{label}: the process kept running")
    is_eq(sc.stop(), 0, f"{label}: clean stop")


scenario("classic", 300, quorum=False)
scenario("quorum", 150, quorum=True)
done()
