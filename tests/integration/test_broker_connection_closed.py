"""The broker closes the sidecar's connections during a stream: it
reconnects, the broker redelivers what was unacked, and every event has
exactly one effect; the repeats are recognised as duplicates."""
import threading

from harness import *

N = 600
sc = Sidecar(consumer_extra={"prefetch": 128})
ok(sc.start(), "sidecar started")
events = new_events(N)
ids = [e for e, _ in events]
t = threading.Thread(target=publish_events, args=(sc.exchange, events), kwargs={"pace_s": 0.004})
t.start()

closed = 0
for _ in range(4):
    time.sleep(0.5)
    r = rabbitmqctl("list_connections", "pid", "client_properties")
    for line in r.stdout.splitlines():
        if f"sidecar consume {sc.name}" in line or f"sidecar publish {sc.name}" in line:
            pid = line.split("\t")[0]
            c = rabbitmqctl("close_connection", pid, "test closes the connection")
            closed += c.returncode == 0
t.join()
ok(closed >= 3, f"closed the sidecar's broker connections {closed} times")
wait_until(lambda: count_in("consumed_event", "event_id", ids) >= N and queue_depth(sc.queue) == 0, timeout=120)
time.sleep(1)
is_eq(count_in("notification_job", "event_id", ids), N, "one effect per event")
applied = [l["event_id"] for l in sc.outcomes("applied")]
is_eq(len(applied), N, "each event applied once")
is_eq(len(set(applied)), N, "no event applied twice")
ok(sc.alive(), "the sidecar never exited")
ok(any("broker connection lost" in l.get("msg", "") or "publisher connection lost" in l.get("msg", "")
       for l in sc.lines()), "the loss was noticed and logged")
diag(f"duplicates after reconnects: {len(sc.outcomes('duplicate'))}")
is_eq(queue_depth(sc.dlq), 0, "nothing dead-lettered")
is_eq(sc.stop(), 0, "clean stop")
done()
