"""Quorum queues: declared from config, and a message that keeps killing the
process is bounded by x-delivery-count and max_attempts, then dead-lettered
without running the handler again."""
import uuid

from harness import *

sc = Sidecar(consumer_extra={"queue_type": "quorum", "max_attempts": 2, "prefetch": 1})
poison = str(uuid.uuid4())
bound_queue(sc.exchange, queue=sc.queue, quorum=True)
publish_events(sc.exchange, [(poison, "9")])
codes = []
for run in range(2):
    sc.start(env={"SIDECAR_FAULT": "consumer.after_insert"}, wait=False)
    codes.append(sc.wait_exit(30))
is_eq(codes, [86, 86], "the message took the process down twice (first delivery and one redelivery)")
ok(sc.start(), "restarted without the fault")
ok(wait_until(lambda: queue_depth(sc.dlq) == 1, timeout=30), "the third delivery went to the DLQ")
dead = wait_until(lambda: [l for l in sc.outcomes("dead_lettered") if l.get("event_id") == poison], timeout=10)
ok(dead and "x-delivery-count" in dead[0]["msg"], "the reason names x-delivery-count", detail=dead)
is_eq(count_in("consumed_event", "event_id", [poison]), 0, "no claim was ever committed")
ok(any(l.split("\t")[0] == sc.queue and "quorum" in l
       for l in rabbitmqctl("list_queues", "name", "type").stdout.splitlines()),
   "the queue is a quorum queue")
good = new_events(5)
publish_events(sc.exchange, good)
wait_until(lambda: count_in("notification_job", "event_id", [e for e, _ in good]) == 5, timeout=30)
is_eq(count_in("notification_job", "event_id", [e for e, _ in good]), 5, "ordinary events still flow")
is_eq(sc.stop(), 0, "clean stop")

# Over the limit but applied: the process died after COMMIT, before the ack.
# The broker counts a delivery without an outcome; the claim says otherwise:
# the redelivery is a duplicate (acked, no effect), not a dead letter.
sc2 = Sidecar(consumer_extra={"queue_type": "quorum", "max_attempts": 1, "prefetch": 1})
applied = str(uuid.uuid4())
bound_queue(sc2.exchange, queue=sc2.queue, quorum=True)
publish_events(sc2.exchange, [(applied, "10")])
sc2.start(env={"SIDECAR_FAULT": "consumer.after_commit"}, wait=False)
is_eq(sc2.wait_exit(30), 86, "the process died after COMMIT, before the ack")
is_eq(count_in("notification_job", "event_id", [applied]), 1, "its effect is committed")
ok(sc2.start(), "restarted without the fault")
ok(wait_until(lambda: sc2.outcomes("duplicate") or sc2.outcomes("dead_lettered"), timeout=30),
   "the redelivery was settled")
redelivered = [l for l in sc2.outcomes("duplicate") if l.get("event_id") == applied]
ok(redelivered and redelivered[0].get("attempt") == 2,
   "the redelivery (x-delivery-count 1, over max_attempts 1) was recognised as a duplicate",
   detail=sc2.lines()[-5:])
ok(wait_until(lambda: queue_depth(sc2.queue) == 0, timeout=10), "and acked")
is_eq(queue_depth(sc2.dlq), 0, "nothing dead-lettered")
is_eq(count_in("notification_job", "event_id", [applied]), 1, "still one effect")
is_eq(count_in("consumed_event", "event_id", [applied]), 1, "one claim")
is_eq(sc2.stop(), 0, "clean stop")
done()
