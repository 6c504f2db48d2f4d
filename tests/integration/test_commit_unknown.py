"""COMMIT reaches the server and commits, but the reply is lost (a TCP proxy
cuts the connection right after COMMIT is sent): the outcome is UNKNOWN, the
message is not acked, the redelivery meets the unique key, one effect."""
from harness import *

proxy = CommitCuttingProxy(int(os.environ["SC_TEST_MYSQL_PORT"]))
sc = Sidecar(mysql_url=proxy.url(), consumer_extra={"prefetch": 1})
ok(sc.start(), "sidecar started through the proxy")
N = 12
events = new_events(N)
ids = [e for e, _ in events]
publish_events(sc.exchange, events[:3])
wait_until(lambda: len(sc.outcomes("applied")) >= 3, timeout=30)
proxy.armed = 2  # the next two COMMITs lose their reply
publish_events(sc.exchange, events[3:])
wait_until(lambda: count_in("consumed_event", "event_id", ids) >= N and
           len(sc.outcomes("applied")) + len(sc.outcomes("duplicate")) >= N, timeout=90)
is_eq(proxy.cuts, 2, "two connections were cut right after COMMIT")
unknown = sc.outcomes("unknown")
is_eq(len(unknown), 2, "two UNKNOWN outcomes logged")
ok(all(l.get("error_code") in (2013, 2006, 2055) for l in unknown), "UNKNOWN came from a lost connection",
   detail=unknown)
dups = {l["event_id"] for l in sc.outcomes("duplicate")}
ok({l["event_id"] for l in unknown} <= dups,
   "each UNKNOWN event was redelivered and recognised as already consumed (the commit had happened)",
   detail=f"unknown={[l['event_id'] for l in unknown]} dups={dups}")
is_eq(count_in("notification_job", "event_id", ids), N, "one effect per event")
is_eq(count_in("consumed_event", "event_id", ids), N, "one consumed_event row per event")
ok(sc.alive(), "the sidecar reconnected and kept running")
is_eq(queue_depth(sc.queue), 0, "queue drained")
is_eq(sc.stop(), 0, "clean stop")
done()
