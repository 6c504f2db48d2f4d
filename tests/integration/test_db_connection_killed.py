"""KILL CONNECTION of the sidecar's database sessions during a stream: it
reconnects and keeps going; every event has exactly one effect."""
import threading

from harness import *

N = 600
sc = Sidecar(consumer_extra={"workers": 2, "max_attempts": 10, "retry_delays_ms": [100]})
ok(sc.start(), "sidecar started with two workers")
events = new_events(N)
ids = [e for e, _ in events]
t = threading.Thread(target=publish_events, args=(sc.exchange, events), kwargs={"pace_s": 0.004})
t.start()

def sessions():
    return query("SELECT id FROM information_schema.processlist WHERE user = 'sidecar_consumer' AND db = 'app'")


# Six rounds, each once the workers are connected again and have applied
# more events since the previous round: every kill hits a live stream and
# every reconnect is proven before the next.
kills = 0
progress = -1
for _ in range(6):
    tids = wait_until(lambda: len(sc.outcomes("applied")) > progress and sessions(), timeout=30)
    progress = len(sc.outcomes("applied"))
    for (tid,) in tids or []:
        try:
            query(f"KILL CONNECTION {int(tid)}")
            kills += 1
        except pymysql.err.OperationalError:
            pass
t.join()
ok(kills >= 6, f"killed the sidecar's database connections {kills} times in 6 rounds")
ok(progress < N, f"the last kill came before the stream was done ({progress} of {N} applied)")
# Outcomes are logged after the ack: done once every event has one (a
# duplicate where a commit's outcome was unknown and the redelivery met it).
ok(wait_until(lambda: count_in("consumed_event", "event_id", ids) >= N and queue_depth(sc.queue) == 0
              and len(set(l["event_id"] for l in sc.outcomes("applied") + sc.outcomes("duplicate"))) >= N,
              timeout=120),
   "every event reached its outcome")
is_eq(count_in("notification_job", "event_id", ids), N, "one effect per event")
is_eq(count_in("consumed_event", "event_id", ids, f"AND consumer_name = '{sc.name}'"), N, "one consumed_event row per event")
applied = [l["event_id"] for l in sc.outcomes("applied")]
is_eq(len(applied), len(set(applied)), "no event applied twice")
ok(sc.alive(), "the sidecar never exited")
again = [l for l in sc.lines() if l.get("msg", "").startswith("database session made again")]
resets = len([l for l in sc.lines() if l.get("msg", "").startswith("worker")]) - 2
ok(len(again) >= 1, f"workers made their database sessions again, keeping the broker session "
   f"({len(again)} in place, {resets} full resets)")
is_eq(queue_depth(sc.dlq), 0, "nothing dead-lettered")
is_eq(sc.stop(), 0, "clean stop")
done()
