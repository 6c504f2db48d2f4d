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

kills = 0
for _ in range(6):
    time.sleep(0.35)
    for (tid,) in query("SELECT id FROM information_schema.processlist WHERE user = 'sidecar_consumer' AND db = 'app'"):
        try:
            query(f"KILL CONNECTION {int(tid)}")
            kills += 1
        except pymysql.err.OperationalError:
            pass
t.join()
ok(kills >= 4, f"killed the sidecar's database connections {kills} times")
wait_until(lambda: count_in("consumed_event", "event_id", ids) >= N and queue_depth(sc.queue) == 0, timeout=120)
time.sleep(1)
is_eq(count_in("notification_job", "event_id", ids), N, "one effect per event")
is_eq(count_in("consumed_event", "event_id", ids, f"AND consumer_name = '{sc.name}'"), N, "one consumed_event row per event")
applied = [l["event_id"] for l in sc.outcomes("applied")]
is_eq(len(applied), len(set(applied)), "no event applied twice")
ok(sc.alive(), "the sidecar never exited")
ok(len([l for l in sc.lines() if l.get("msg", "").startswith("worker")]) > 2, "workers reconnected")
is_eq(queue_depth(sc.dlq), 0, "nothing dead-lettered")
is_eq(sc.stop(), 0, "clean stop")
done()
