"""Hundreds of events with about a quarter published twice: one effect per
event id, and the duplicate branch really taken for every repeat."""
import random

from harness import *

N, REPEATS = 400, 100

sc = Sidecar()
ok(sc.start(), "sidecar started and consuming")
events = new_events(N)
ids = [e for e, _ in events]
stream = list(events) + random.sample(events, REPEATS)
# Repeats spread through the stream, each after its original.
random.shuffle(stream)
seen, ordered = set(), []
for e in stream:
    ordered.append(e)
publish_events(sc.exchange, ordered)

wait_until(lambda: len(sc.outcomes("applied")) + len(sc.outcomes("duplicate")) >= N + REPEATS, timeout=120)
is_eq(count_in("notification_job", "event_id", ids), N, "one notification_job row per event")
is_eq(count_in("consumed_event", "event_id", ids, f"AND consumer_name = '{sc.name}'"), N,
      "one consumed_event row per event")
applied = sc.outcomes("applied")
dups = sc.outcomes("duplicate")
is_eq(len(applied), N, "applied exactly once per event id")
is_eq(len({l["event_id"] for l in applied}), N, "applied event ids are distinct")
is_eq(len(dups), REPEATS, "the duplicate branch was taken for every repeat")
ok(all(l.get("error_code") == 1062 for l in dups), "every duplicate was a 1062")
delivered = {}
for l in applied + dups:
    delivered[l["event_id"]] = delivered.get(l["event_id"], 0) + 1
is_eq(sum(1 for v in delivered.values() if v == 2), REPEATS, "repeated ids were really delivered twice")
is_eq(queue_depth(sc.queue), 0, "queue drained")
is_eq(queue_depth(sc.dlq), 0, "nothing dead-lettered")
is_eq(sc.stop(), 0, "SIGTERM: clean exit 0")
ok("stopped: applied=400 duplicate=100" in sc.text(), "shutdown summary counts")
done()
