"""A COMMIT lost with its connection, again and again, on a quorum queue.
The server never gets the COMMIT (a TCP proxy closes both sides instead of
forwarding it): each outcome is unknown and nothing was committed. The
batch is held in hand and runs again on a new session; it is never nacked,
so no x-delivery-count is spent on the database's fault. With a nack per
loss (RabbitMQ before 4.3 counts every return) four losses would take the
delivery past max_attempts 2, and the guard would dead-letter a good event
unrun."""
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
ok(applied and applied[0].get("attempt") == 1 and not applied[0].get("redelivered"),
   "applied at attempt 1, never redelivered: no x-delivery-count spent on the losses",
   detail=applied or sc.lines()[-8:])
is_eq([l.get("msg") for l in sc.outcomes("dead_lettered") if l.get("event_id") == eid], [],
      "not dead-lettered by the delivery-count guard")
is_eq((count_in("notification_job", "event_id", [eid]), count_in("consumed_event", "event_id", [eid])),
      (1, 1), "one effect, one claim")
ok(wait_until(lambda: queue_depth(sc.queue) == 0, timeout=10), "acked: the queue is empty")
is_eq(queue_depth(sc.dlq), 0, "the DLQ is empty")
is_eq(sc.stop(), 0, "clean stop")
done()
