"""The x-delivery-count guard and a twin in the same batch: the relay can
publish an event twice (a confirm lost), and the copy that was returned
often enough passes max_attempts. When its twin runs in the same batch, the
guard's claim probe cannot see the twin's uncommitted claim; the copy over
the limit must be acked as the twin's duplicate, not dead-lettered (found by
the nemesis: an applied event with a copy in the DLQ). The count is the
x-delivery-count header, as a quorum queue sets it; a classic queue passes a
publisher's header through, so the test can set it."""
from harness import *

sc = Sidecar(consumer_extra={"max_attempts": 5, "batch_max": 16, "prefetch": 16})
ok(sc.start(), "consumer started")
sc.stop()  # the queue exists; both copies wait in it, so one batch takes them together
eid = str(uuid.uuid4())
conn = amqp()
ch = conn.channel()
ch.confirm_delivery()
body = event_body(eid, subject="4242")
publish(ch, sc.exchange, "ORDER_ACCEPTED", body, message_id=eid, headers={"x-delivery-count": 9})
publish(ch, sc.exchange, "ORDER_ACCEPTED", body, message_id=eid)
conn.close()
ok(sc.start(), "consumer started again with both copies in its queue")
ok(wait_until(lambda: count_in("notification_job", "event_id", [eid]) == 1 and queue_depth(sc.queue) == 0,
              timeout=30), "the event is applied once and the queue is empty")
outs = [l.get("outcome") for l in sc.lines(run=2) if l.get("event_id") == eid and l.get("outcome")]
ok(queue_depth(sc.dlq) == 0, f"nothing dead-lettered: the copy over the limit is its twin's duplicate ({outs})")
ok(sorted(outs) == ["applied", "duplicate"], f"one copy applied, the other a duplicate ({outs})")
is_eq(sc.stop(), 0, "consumer stops cleanly")
done()
