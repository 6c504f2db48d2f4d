"""A COMMIT lost with its connection, again and again, on a quorum queue.
The server never gets the COMMIT (a TCP proxy closes both sides instead of
forwarding it): each outcome is unknown and nothing was committed. The
batch is held in hand and runs again on a new session; it is never nacked,
so no x-delivery-count is spent on the database's fault. With a nack per
loss (RabbitMQ before 4.3 counts every return) four losses would take the
delivery past max_attempts 2, and the guard would dead-letter a good event
unrun. A hold that every new session loses again ends at
db_outage_hold_ms: the deliveries go back to the broker."""
from harness import *


class CommitDroppingProxy(CommitCuttingProxy):
    """While armed, a COMMIT is never forwarded: both sides are closed."""
    CUT = CommitCuttingProxy.CUT_BEFORE


LOSSES = 4
proxy = CommitDroppingProxy(int(os.environ["SC_TEST_MYSQL_PORT"]))
sc = Sidecar(mysql_url=proxy.url(),
             consumer_extra={"queue_type": "quorum", "max_attempts": 2, "prefetch": 1})
bound_queue(sc.exchange, queue=sc.queue, quorum=True)
ok(sc.start(), "sidecar started through the proxy, on a quorum queue, max_attempts 2")
warm = new_events(2)
publish_events(sc.exchange, warm)
ok(wait_until(lambda: count_in("notification_job", "event_id", [e for e, _ in warm]) == 2, timeout=30),
   "two events applied before the losses")

proxy.armed = LOSSES
event = new_events(1, start=7000)
eid = event[0][0]
publish_events(sc.exchange, event)
ok(wait_until(lambda: [l for l in sc.outcomes("applied") if l.get("event_id") == eid]
              or [l for l in sc.outcomes("dead_lettered") if l.get("event_id") == eid], timeout=90),
   "the event was settled", detail=sc.lines()[-8:])
is_eq(proxy.cuts, LOSSES, f"{LOSSES} COMMITs in a row never reached the server")
unknown = [l for l in sc.outcomes("unknown") if l.get("event_id") == eid]
is_eq(len(unknown), LOSSES, f"each logged as an unknown outcome ({LOSSES})")
ok(all("held in hand" in l.get("msg", "") for l in unknown), "each held in hand, not returned",
   detail=[l.get("msg") for l in unknown])
applied = [l for l in sc.outcomes("applied") if l.get("event_id") == eid]
ok(applied and applied[0].get("attempt") == 1,
   "applied at attempt 1, never returned: no x-delivery-count spent on the losses",
   detail=applied or sc.lines()[-8:])
is_eq([l.get("msg") for l in sc.outcomes("dead_lettered") if l.get("event_id") == eid], [],
      "not dead-lettered by the delivery-count guard")
is_eq((count_in("notification_job", "event_id", [eid]), count_in("consumed_event", "event_id", [eid])),
      (1, 1), "one effect, one claim")
ok(wait_until(lambda: queue_depth(sc.queue) == 0, timeout=10), "acked: the queue is empty")
is_eq(queue_depth(sc.dlq), 0, "the DLQ is empty")
is_eq(sc.stop(), 0, "clean stop")

# Every new session loses the COMMIT again: the hold ends at
# db_outage_hold_ms (waiting between sessions, not remaking them in a loop)
# and the deliveries in hand go back to the broker.
HOLD_MS = 3000
sc2 = Sidecar(mysql_url=proxy.url(),
              consumer_extra={"queue_type": "quorum", "max_attempts": 5, "prefetch": 1,
                              "db_outage_hold_ms": HOLD_MS})
bound_queue(sc2.exchange, queue=sc2.queue, quorum=True)
ok(sc2.start(), "second sidecar started, db_outage_hold_ms 3000")
cuts_before = proxy.cuts
proxy.armed = 1000000
event2 = new_events(1, start=7100)
eid2 = event2[0][0]
t0 = time.time()
publish_events(sc2.exchange, event2)


def gave_up():
    return [l for l in sc2.lines() if "held for 3000 ms (db_outage_hold_ms)" in l.get("msg", "")]


ok(wait_until(gave_up, timeout=30, step=0.05), "the hold ended at db_outage_hold_ms, naming it",
   detail=sc2.lines()[-6:])
took = time.time() - t0
proxy.armed = 0
lost = proxy.cuts - cuts_before
diag(f"hold given up {took:.1f} s after the publish, {lost} COMMITs cut meanwhile")
ok(HOLD_MS / 1000 - 0.5 <= took <= HOLD_MS / 1000 + 5, f"after about 3 s (took {took:.1f} s)")
ok(2 <= lost <= 12, f"new sessions waited for between losses: {lost} COMMITs cut in 3 s, not hundreds")
ok(wait_until(lambda: [l for l in sc2.outcomes("applied") if l.get("event_id") == eid2], timeout=60),
   "the event applied once the COMMITs went through again", detail=sc2.lines()[-6:])
applied2 = [l for l in sc2.outcomes("applied") if l.get("event_id") == eid2]
ok(applied2[0].get("attempt", 0) >= 2,
   "at attempt 2 or later (x-delivery-count): the hold had given it back to the broker",
   detail=applied2)
is_eq((count_in("notification_job", "event_id", [eid2]), count_in("consumed_event", "event_id", [eid2])),
      (1, 1), "one effect, one claim")
is_eq(queue_depth(sc2.dlq), 0, "nothing dead-lettered")
is_eq(sc2.stop(), 0, "clean stop")
done()
