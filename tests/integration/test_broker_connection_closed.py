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
t = threading.Thread(target=publish_events, args=(sc.exchange, events), kwargs={"pace_s": 0.03})
t.start()

def sidecar_connections():
    r = rabbitmqctl("list_connections", "pid", "client_properties")
    return [line.split("\t")[0] for line in r.stdout.splitlines()
            if f"sidecar consume {sc.name}" in line or f"sidecar publish {sc.name}" in line]


# Four rounds, each once the sidecar is connected again (both connections
# listed) and has applied more events since the previous close: every close
# hits a live stream and every reconnect is proven before the next.
closed = 0
progress = -1
for _ in range(4):
    def reconnected_and_progressing():
        if len(sc.outcomes("applied")) <= progress:
            return None
        pids = sidecar_connections()
        return pids if len(pids) >= 2 else None

    pids = wait_until(reconnected_and_progressing, timeout=30, step=0.05)
    progress = len(sc.outcomes("applied"))
    for pid in pids or []:
        c = rabbitmqctl("close_connection", pid, "test closes the connection")
        closed += c.returncode == 0
t.join()
ok(closed >= 4, f"closed the sidecar's broker connections {closed} times in 4 rounds")
ok(progress < N, f"the last close came before the stream was done ({progress} of {N} applied)")
# Outcomes are logged after the ack: done once every event has one (a
# duplicate where a commit's outcome was unknown and the redelivery met it).
ok(wait_until(lambda: count_in("consumed_event", "event_id", ids) >= N and queue_depth(sc.queue) == 0
              and len(set(l["event_id"] for l in sc.outcomes("applied") + sc.outcomes("duplicate"))) >= N,
              timeout=120),
   "every event reached its outcome")
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
