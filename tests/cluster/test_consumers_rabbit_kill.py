"""Two `consume` processes on one quorum queue while the RabbitMQ node they
are connected to is killed with SIGKILL and later restarted: unacked
deliveries come back (through another node) and meet the unique key."""
import os
import signal

from cluster_lib import *

N = 800
c1 = Sidecar(consumer_extra={"queue_type": "quorum", "prefetch": 32, "batch_max": 8})
c2 = Sidecar(name=c1.name, exchange=c1.exchange,
             consumer_extra={"queue_type": "quorum", "prefetch": 32, "batch_max": 8})
for c in (c1, c2):
    configure(c, [MYSQL_CONSUMER[1], MYSQL_CONSUMER[2]], AMQP)
    ok(c.start(), "consumer started")
    ok(connects(c, "amqp")[:1] == [(0, "127.0.0.1:26681")], "its consuming connection is on RabbitMQ node 1",
       detail=connects(c, "amqp"))
events = new_events(N, start=200000)
ids = [e for e, _ in events]
pub = Publisher(c1.exchange, events, pace_s=0.004)  # through node 2
pub.start()
applied = lambda: count_in("notification_job", "event_id", ids)
ok(wait_until(lambda: applied() >= N // 5, timeout=120), f"mid-stream before the kill ({applied()} of {N})")
# Both consumers frozen until the stream backs up behind their prefetch, so
# the node dies with deliveries unacked in their hands whatever the
# machine's speed (a consumer that keeps up may hold none at that moment).
for c in (c1, c2):
    os.kill(c.proc.pid, signal.SIGSTOP)
ok(wait_until(lambda: queue_depth(c1.queue) > 0, timeout=60),
   "with the consumers frozen, messages wait in the queue: their prefetch is full")
kill("rabbit", 1)
t_kill = time.time()
for c in (c1, c2):
    os.kill(c.proc.pid, signal.SIGCONT)
at_kill = applied()
ok(at_kill < N, f"events still flowing when the node died ({at_kill} of {N})")
wait_until(lambda: applied() > at_kill + 20, timeout=120)
diag(f"stall after the kill: {time.time() - t_kill:.1f} s until 20 more events were applied")
wait_until(lambda: applied() == N and not pub.is_alive(), timeout=180)
is_eq(applied(), N, "every event applied once (notification_job rows by event id)")
is_eq(count_in("consumed_event", "event_id", ids, f"AND consumer_name = '{c1.name}'"), N,
      "one consumed_event row per event")
ok(wait_until(lambda: queue_depth(c1.queue) == 0, timeout=30), "queue drained")
is_eq(queue_depth(c1.dlq), 0, "nothing in the dead-letter queue")
for c in (c1, c2):
    later = [n for n, _ in connects(c, "amqp")[2:]]
    ok(later and 0 not in later[:2], f"consumer reconnected to surviving nodes ({later})")
redelivered = sum(len([l for l in c.lines() if l.get("redelivered")]) for c in (c1, c2))
dups = sum(len(c.outcomes("duplicate")) for c in (c1, c2))
ok(redelivered > 0, f"repeats observed: {redelivered} redelivered deliveries, {dups} recognised duplicates")
diag(f"repeat cost: {redelivered} redeliveries, {dups} duplicates; publisher retried: {pub.error}")
restart("rabbit", 1)
c1.stop()
c2.stop()
done()
