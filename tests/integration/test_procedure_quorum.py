"""Moving a consumer from a classic queue to a quorum queue with nothing lost,
as docs/operations.md describes it, while events keep arriving: a second
consumer process under the same consumer name on a new quorum queue with the
same bindings, the old queue unbound, drained by its own consumer, which is
then stopped and the old queue (with its delay queues) deleted. Every event
applied exactly once; both queues saw copies, recognised as duplicates."""
import threading

from harness import *

old = Sidecar()
ok(old.start(), "the consumer on its classic queue")
events = new_events(600, start=20000)
ids = [e for e, _ in events]
sent = []


def producer():
    conn = amqp()
    ch = conn.channel()
    ch.confirm_delivery()
    for eid, subject in events:
        publish(ch, old.exchange, "ORDER_ACCEPTED", event_body(eid, subject=subject), message_id=eid)
        sent.append(eid)
        time.sleep(0.01)
    conn.close()


pub = threading.Thread(target=producer)
pub.start()
ok(wait_until(lambda: len(old.outcomes("applied")) >= 50, timeout=60), "events flow to the old consumer")

# Step 1: the same consumer name on a new quorum queue, the same bindings.
quorum_queue = old.queue + "-quorum"
new = Sidecar(name=old.name, exchange=old.exchange,
              consumer_extra={"queue": quorum_queue, "queue_type": "quorum"})
ok(new.start(), "step 1: the new consumer declared and bound its quorum queue")
at_bind = len(sent)
ok(wait_until(lambda: len(new.outcomes("applied")) + len(new.outcomes("duplicate")) >= 20, timeout=60),
   "both queues receive every event for a while")

# Step 2: the old queue unbound: nothing new reaches it.
conn = amqp()
conn.channel().queue_unbind(old.queue, old.exchange, "#")
conn.close()
at_unbind = len(sent)
ok(at_unbind > at_bind and pub.is_alive(), f"step 2: unbound while events arrive (sent {at_bind}, then {at_unbind})")


def old_queues():
    """name -> (ready, unacked) of the old queue and its delay queues."""
    out = {}
    for line in rabbitmqctl("list_queues", "name", "messages_ready", "messages_unacknowledged").stdout.splitlines():
        f = line.split("\t")
        if len(f) == 3 and (f[0] == old.queue or f[0].startswith(old.queue + ".retry.")):
            out[f[0]] = (int(f[1]), int(f[2]))
    return out


# Step 3: the old consumer drains its queue and its delay queues.
ok(wait_until(lambda: old_queues() and all(v == (0, 0) for v in old_queues().values()), timeout=60),
   "step 3: the old queue and its delay queues are empty, nothing unacked", detail=old_queues())
is_eq(queue_depth(old.dlq), 0, "the old dead-letter queue is empty (else: replay it first)")
# Step 4: the old consumer stopped, the old queues deleted.
is_eq(old.stop(), 0, "step 4: the old consumer stopped")
conn = amqp()
ch = conn.channel()
for q in list(old_queues()) + [old.dlq]:
    ch.queue_delete(q, if_empty=True)
conn.close()
ok(not old_queues(), "the old queue and its delay queues are deleted")
pub.join()
ok(wait_until(lambda: count_in("notification_job", "event_id", ids) == len(ids), timeout=60),
   "every event's effect is there")
ok(wait_until(lambda: queue_depth(quorum_queue) == 0, timeout=30), "the quorum queue is drained")
applied = [l["event_id"] for l in old.outcomes("applied") + new.outcomes("applied")]
ok(sorted(applied) == sorted(ids), f"each of the {len(ids)} events applied exactly once "
   f"({len(old.outcomes('applied'))} by the old consumer, {len(new.outcomes('applied'))} by the new)")
dups = len(old.outcomes("duplicate")) + len(new.outcomes("duplicate"))
ok(dups > 0, f"while both queues were bound each event reached both: {dups} copies recognised as duplicates")
is_eq(count_in("consumed_event", "event_id", ids, f"AND consumer_name = '{old.name}'"), len(ids), "one claim per event")
ok(any(l.split("\t")[0] == quorum_queue and "quorum" in l
       for l in rabbitmqctl("list_queues", "name", "type").stdout.splitlines()), "the new queue is a quorum queue")
is_eq(queue_depth(quorum_queue + ".dlq"), 0, "nothing dead-lettered")
is_eq(new.stop(), 0, "clean stop")
done()
