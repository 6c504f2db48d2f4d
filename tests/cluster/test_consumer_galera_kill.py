"""A consumer writing to a Galera node that is killed with SIGKILL
mid-stream: the batch in flight is held and run again through another node
(nothing committed before the loss), or its COMMIT outcome is unknown and
the redelivery, written through another node, meets the unique key. Exact
counts by event id."""
from cluster_lib import *

N = 800
s = Sidecar(consumer_extra={"queue_type": "quorum", "prefetch": 64, "batch_max": 16})
configure(s, MYSQL_CONSUMER, [AMQP[1], AMQP[2], AMQP[0]])
ok(s.start(), "consumer started")
ok(connects(s, "mysql")[:1] == [(0, "127.0.0.1:23311")], "consumer's database connection is on Galera node 1",
   detail=connects(s, "mysql"))
events = new_events(N, start=100000)
ids = [e for e, _ in events]
pub = Publisher(s.exchange, events, pace_s=0.004)
pub.start()
applied = lambda: count_in("notification_job", "event_id", ids)
reached = wait_until(lambda: applied() >= N // 5, timeout=120)
ok(reached, f"mid-stream before the kill ({applied()} of {N} applied)")
kill("mysql", 1)
t_kill = time.time()
killed_at = applied()
wait_until(lambda: applied() > killed_at + 20, timeout=120)
stall = time.time() - t_kill
ok(killed_at < N, f"events still flowing when the node died ({killed_at} of {N} applied)")
wait_until(lambda: applied() == N and not pub.is_alive(), timeout=180)
pub.join(5)
is_eq(applied(), N, "every event applied once (notification_job rows by event id)")
is_eq(count_in("consumed_event", "event_id", ids, f"AND consumer_name = '{s.name}'"), N,
      "one consumed_event row per event")
dups = query(f"SELECT COUNT(*) FROM (SELECT event_id FROM consumed_event WHERE consumer_name = '{s.name}'"
             " GROUP BY event_id HAVING COUNT(*) > 1) d")[0][0]
is_eq(dups, 0, "no event claimed twice")
ok(wait_until(lambda: queue_depth(s.queue) == 0, timeout=30), "queue drained")
dead = queue_depth(s.dlq)
ok(dead == 0, f"nothing in the dead-letter queue (got {dead}, expected 0)",
   detail=[l for l in s.lines() if l.get("outcome") == "dead_lettered" or l.get("level") == "error"][:5])
nodes = [n for n, _ in connects(s, "mysql")]
ok(any(n != 0 for n in nodes), f"reconnected to another Galera node (nodes connected to: {nodes})")
redelivered = [l for l in s.lines() if l.get("redelivered")]
unknown = s.outcomes("unknown")
dup_out = s.outcomes("duplicate")
held = [l for l in s.lines() if "holding the batch" in l.get("msg", "")]
ok(len(redelivered) + len(unknown) + len(held) > 0,
   f"the kill was felt: {len(held)} batches held through a new session, {len(redelivered)} "
   f"redelivered, {len(unknown)} commit outcomes unknown, {len(dup_out)} duplicates")
st, metrics = s.get("/metrics")
ok(st == 200 and re.search(r'sidecar_endpoint\{worker="sidecar consume [^"]* worker 0",server="mysql",node="[12]",endpoint="127.0.0.1:2331[23]"\} 1', metrics),
   "/metrics says which Galera node the worker is on now", detail=metrics[-1500:])
diag(f"stall after the kill: {stall:.1f} s until 20 more events were applied")
diag(f"repeat cost: {len(redelivered)} redeliveries, {len(unknown)} unknown, {len(dup_out)} duplicates recognised")
s.stop()
restart("mysql", 1)
done()
