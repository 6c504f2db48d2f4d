"""The relay survives its database connection being killed and its broker
connection being closed, without exiting, and publishes everything."""
import collections

from harness import *

clear_outbox()
ex = "reconnect-" + suffix()
q = bound_queue(ex)
r = Relay(ex, batch=20, lease_ms=1000, poll_ms=50).start()
ids = insert_outbox(100)
wait_until(lambda: count_in("outbox_event", "event_id", ids, "AND status = 'PUBLISHED'") == 100, timeout=30)

for (tid,) in query("SELECT id FROM information_schema.processlist WHERE user = 'sidecar_relay'"):
    query(f"KILL CONNECTION {int(tid)}")
closed = 0
for line in rabbitmqctl("list_connections", "pid", "client_properties").stdout.splitlines():
    if f"sidecar relay {r.worker_id}" in line:
        closed += rabbitmqctl("close_connection", line.split("\t")[0], "test").returncode == 0
is_eq(closed, 1, "closed the relay's broker connection")
more = insert_outbox(100)
ok(wait_until(lambda: count_in("outbox_event", "event_id", more, "AND status = 'PUBLISHED'") == 100, timeout=60),
   "after both connections were cut, the next rows were all published")
ok(r.alive(), "the relay never exited")
d = collections.Counter(json.loads(b)["id"] for _, _, b in drain_with_keys(q))
ok(all(d[i] >= 1 for i in ids + more), "every event reached the queue")
ok(any("claim failed" in l.get("msg", "") or "database" in l.get("msg", "") for l in r.lines()),
   "the lost database connection was logged")
is_eq(r.stop(), 0, "clean stop")
done()
