"""A batch-mate of a contract violation must never be acked without its
effect. Batches of two: [OK, REJECT] dead-letters the second delivery; in
the next batch [ROLLBACK-handler, OK] the handler's ROLLBACK ends the
transaction, the OK one is returned for redelivery, and must be applied
when it comes back. The bug: per-delivery state (the "republished" flag of
the slot dead-lettered in the batch before) lived on in the reused slot, so
the returned delivery was acked as if it had been republished, and its
event was lost (measured: 4 of 8 good events lost in 4 rounds).

The deliveries wait in the queue before the sidecar starts, in the repeated
order OK, REJECT, ROLLBACK: with batch_max 2 the pairs run through every
phase of that cycle, so [OK, REJECT] then [ROLLBACK, OK] happens in every
round whatever the first batch's size. Checked by event id: every good
event applied exactly once, none acked without its effect."""
from harness import *

ROUNDS = 8
sc = Sidecar(handler=TEST_HANDLER, extra={"log": {"level": "debug"}},
             consumer_extra={"workers": 1, "prefetch": 64, "batch_max": 2, "max_attempts": 3,
                             "retry_delays_ms": [200, 400]})
bound_queue(sc.exchange, queue=sc.queue)
good, rejected, rolled_back = [], [], []
conn = amqp()
ch = conn.channel()
ch.confirm_delivery()
for r in range(ROUNDS):
    for etype, into in (("ORDER_ACCEPTED", good), ("POISON", rejected), ("ROLLBACKER", rolled_back)):
        eid = str(uuid.uuid4())
        into.append(eid)
        publish(ch, sc.exchange, etype, event_body(eid, etype=etype, subject=str(9000 + r)), message_id=eid)
conn.close()
ok(sc.start(), "sidecar started with the deliveries already waiting")


def effects(ids):
    return count_in("notification_job", "event_id", ids)


def claims(ids):
    return count_in("consumed_event", "event_id", ids, f"AND consumer_name = '{sc.name}'")


def settled():
    """Every delivery has had its outcome: the queue holds nothing (ready
    or unacked) and every refused event is in the dead-letter queue."""
    if queue_depth(sc.dlq) < len(rejected) + len(rolled_back):
        return False
    rows = rabbitmqctl("list_queues", "--no-table-headers", "name", "messages").stdout.splitlines()
    return any(l.split("\t") == [sc.queue, "0"] for l in rows)


ok(wait_until(lambda: effects(good) == len(good) or settled(), timeout=60),
   "every delivery had its outcome")
wait_until(lambda: effects(good) == len(good), timeout=5)  # a redelivery still in flight
pairs = [l for l in sc.lines() if l.get("msg", "").startswith("batch of 2:")]
diag(f"{len(pairs)} batches of two; {len(sc.outcomes('dead_lettered'))} dead-lettered")
ok(len(pairs) >= ROUNDS, f"the deliveries ran in batches of two ({len(pairs)})")
is_eq(sc.stop(), 0, "clean stop")

lost = [e for e in good if effects([e]) == 0]
is_eq(len(lost), 0, f"no good event was lost ({len(lost)} of {len(good)} acked without effect)")
is_eq(effects(good), len(good), "every good event has its effect exactly once")
is_eq(claims(good), len(good), "and exactly one claim")
is_eq(queue_depth(sc.queue), 0, "nothing is left to redeliver: the missing ones were acked")
dead = {json.loads(b)["id"]: p.headers for p, b in drain(sc.dlq)}
ok(sorted(dead) == sorted(rejected + rolled_back),
   f"the dead-letter queue holds exactly the {len(rejected + rolled_back)} refused events ({len(dead)} there)")
ok(all("contract violation" in str(dead[e].get("x-sidecar-reason", "")) for e in rolled_back),
   "the rolled-back ones as contract violations")
is_eq(effects(rejected + rolled_back) + claims(rejected + rolled_back), 0,
      "the refused events left neither effect nor claim")
done()
