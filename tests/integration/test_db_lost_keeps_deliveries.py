"""The database connection dies under a batch while the broker session is
fine: the worker holds the batch, makes its database session again in place
and runs the same batch on it, keeping every delivery in hand (the cut batch
and those prefetched behind it). A nack or a closed channel would return
them, and a quorum queue counts every return in x-delivery-count: a few
failovers in a row would dead-letter messages that never ran. Checked by each
event's attempt number: all 1."""
import re

from harness import *

N = 30
CUT = 5  # the claim of the 5th delivery pauses; its connection is killed then
sc = Sidecar(consumer_extra={"queue_type": "quorum", "prefetch": 64, "batch_max": 1, "workers": 1})
bound_queue(sc.exchange, queue=sc.queue, quorum=True)
events = new_events(N, start=4200)
ids = [e for e, _ in events]
publish_events(sc.exchange, events)  # all waiting: the worker takes them all in hand at once
ok(sc.start(env={"SIDECAR_FAULT": f"consumer.after_insert:{CUT}", "SIDECAR_FAULT_PAUSE_MS": "3000"}),
   "consumer started")
ok(wait_until(lambda: any("fault point reached" in l.get("msg", "") for l in sc.lines()), timeout=30),
   f"paused inside the transaction of delivery {CUT}")
threads = [int(m.group(1)) for l in sc.lines()
           for m in [re.search(r"database thread (\d+)", l.get("msg", ""))] if m]
ok(threads, "the worker's database thread id is logged", detail=sc.lines()[-5:])
query(f"KILL CONNECTION {threads[0]}")
ok(wait_until(lambda: count_in("notification_job", "event_id", ids) == N, timeout=60),
   "every event applied")
# Outcome lines are written after the ack, which follows the COMMIT seen above.
wait_until(lambda: len({l.get("event_id") for l in sc.outcomes("applied")} & set(ids)) == N, timeout=10)
is_eq(count_in("notification_job", "event_id", ids), N, "each once (effects by event id)")
is_eq(count_in("consumed_event", "event_id", ids, f"AND consumer_name = '{sc.name}'"), N, "one claim each")
lost = [l for l in sc.lines() if "session lost during a batch" in l.get("msg", "")]
ok(len(lost) == 1, "the connection was lost under exactly one batch", detail=lost)
ok(any("database session made again" in l.get("msg", "") for l in sc.lines()),
   "the database session was made again in place")
attempts = {}
for l in sc.outcomes("applied"):
    attempts.setdefault(l.get("event_id"), []).append(l.get("attempt"))
again = sorted(e for e, a in attempts.items() if a != [1])
is_eq(len(again), 0, "no delivery came back: every event applied once, at attempt 1")
returned = [l for l in sc.lines() if l.get("outcome") in ("returned", "unknown")]
ok(not returned, "nothing was returned to the queue", detail=returned[:3])
is_eq(queue_depth(sc.dlq), 0, "nothing dead-lettered")
ok(wait_until(lambda: queue_depth(sc.queue) == 0, timeout=10), "queue drained")
st, body = sc.get("/readyz")
is_eq(st, 200, "ready again")
is_eq(sc.stop(), 0, "clean stop")
done()
