"""Quorum queues and x-delivery-limit. RabbitMQ 4 drops a quorum message,
without a trace, once it has been given back more times than the queue's
delivery limit (20 when none was declared), and a session that ends gives
back every delivery in hand. So every quorum queue the sidecar declares
carries x-delivery-limit 2147483647; a consumed queue that exists with a
lower limit, or none, is refused at start (exit 2) when the broker could drop
a message before max_attempts dead-letters it, and taken as it is (with a
warning) when it cannot; and a message that kills the process is
dead-lettered after max_attempts deaths with nothing lost.

Run on RabbitMQ 3.10, which enforces an x-delivery-limit the same way (a
message given back more times than the limit is dropped) but has no default
limit."""
from harness import *

LIMIT = QUORUM_DELIVERY_LIMIT


def arguments():
    """name -> the arguments column of rabbitmqctl list_queues."""
    out = {}
    for line in rabbitmqctl("list_queues", "name", "arguments").stdout.splitlines():
        parts = line.split("\t")
        out[parts[0]] = parts[1] if len(parts) > 1 else ""
    return out


def has_limit(args, value):
    return f'"x-delivery-limit",{value}' in (args or "")


def declare(queue, limit=None, extra=None, exchange=None):
    """A quorum queue as something else (an earlier version, an operator)
    declared it: with limit, or with none; bound to exchange when given."""
    a = {"x-queue-type": "quorum"}
    if limit is not None:
        a["x-delivery-limit"] = limit
    a.update(extra or {})
    conn = amqp()
    ch = conn.channel()
    ch.queue_declare(queue, durable=True, arguments=a)
    if exchange:
        ch.exchange_declare(exchange, "topic", durable=True)
        ch.queue_bind(queue, exchange, "#")
    conn.close()


def refused_line(sc):
    return [l for l in sc.lines() if l.get("level") == "error" and "x-delivery-limit" in l.get("msg", "")]


# --- every quorum queue the sidecar declares carries the limit ---------------
sc = Sidecar(consumer_extra={"queue_type": "quorum", "retry_delays_ms": [200, 400]})
ok(sc.start(), "a quorum consumer with two delay queues starts")
args = arguments()
mine = [sc.queue, sc.dlq, sc.queue + ".retry.200ms", sc.queue + ".retry.400ms"]
for q in mine:
    ok(has_limit(args.get(q), LIMIT) and '"x-queue-type","quorum"' in args.get(q, ""),
       f"{q} is a quorum queue with x-delivery-limit {LIMIT}", detail=args.get(q))
good = new_events(3)
publish_events(sc.exchange, good)
ok(wait_until(lambda: count_in("notification_job", "event_id", [e for e, _ in good]) == 3, timeout=30),
   "events flow")
is_eq(sc.stop(), 0, "clean stop")

for partitions in (1, 2):
    o = Sidecar(handler=TEST_HANDLER, consumer_extra={
        "queue_type": "quorum", "workers": 1, "max_attempts": 1000,
        "ordering": {"key": "subject", "partitions": partitions}})
    ok(o.start(), f"an ordered quorum consumer with partitions {partitions} starts")
    args = arguments()
    qs = [o.queue] if partitions == 1 else [o.queue + f".p{i}" for i in range(partitions)]
    for q in qs + [o.dlq]:
        ok(has_limit(args.get(q), LIMIT), f"{q} has x-delivery-limit {LIMIT} (max_attempts 1000)",
           detail=args.get(q))
    is_eq(o.stop(), 0, "clean stop")

# --- an existing consumed queue without a limit, or with a lower one ---------
# none: RabbitMQ 4 gives it 20, below max_attempts 25 + 10.
r = Sidecar(consumer_extra={"queue_type": "quorum", "max_attempts": 25})
declare(r.queue, exchange=r.exchange)
waiting = new_events(3)
publish_events(r.exchange, waiting)
ok(wait_until(lambda: queue_depth(r.queue) == 3, timeout=10), "three events wait in the old queue")
r.start(wait=False)
is_eq(r.wait_exit(30), 2, "a quorum queue without x-delivery-limit and max_attempts 25: start refused, exit 2")
line = refused_line(r)
msg = line[0]["msg"] if line else ""
ok(r.queue in msg and "no x-delivery-limit" in msg and "RabbitMQ 4 gives it 20" in msg
   and "max_attempts + 10 = 35" in msg and "lower max_attempts to 10" in msg
   and "new queue" in msg and msg.startswith("consumers[0]: "),
   "the error names the consumer, the queue, its limit, what it needs and the fix", detail=msg)
rc, out = run_sidecar_cmd(["check"], r.config)
ok(rc == 2 and r.queue in out and "no x-delivery-limit" in out,
   f"`sidecar check` refuses it too, exit 2 (exit {rc})", detail=out[-600:])
is_eq(queue_depth(r.queue), 3, "nothing was taken from the queue")
ok(not has_limit(arguments().get(r.queue), LIMIT), "and the queue is as it was")

# The fix the message names: max_attempts 10 fits RabbitMQ 4's 20.
r2 = Sidecar(name=r.name, exchange=r.exchange, consumer_extra={"queue_type": "quorum", "max_attempts": 10})
ok(r2.start(), "the same queue with max_attempts 10 starts")
warned = [l for l in r2.lines() if l.get("level") == "warn" and r.queue in l.get("msg", "")
          and "no x-delivery-limit" in l.get("msg", "")]
ok(warned, "and warns that the queue keeps no x-delivery-limit", detail=[l.get("msg") for l in r2.lines()][:8])
ok(wait_until(lambda: count_in("notification_job", "event_id", [e for e, _ in waiting]) == 3, timeout=30),
   "the waiting events are applied")
is_eq(r2.stop(), 0, "clean stop")

# a lower limit of its own
low = Sidecar(consumer_extra={"queue_type": "quorum", "max_attempts": 25})
declare(low.queue, 20)
low.start(wait=False)
is_eq(low.wait_exit(30), 2, "a quorum queue with x-delivery-limit 20 and max_attempts 25: exit 2")
msg = (refused_line(low) or [{}])[0].get("msg", "")
ok(low.queue in msg and "x-delivery-limit 20," in msg and "more than 20 times" in msg
   and "lower max_attempts to 10" in msg, "the error names the queue's limit 20", detail=msg)

# a limit of its own that leaves max_attempts room: taken as it is
enough = Sidecar(consumer_extra={"queue_type": "quorum", "max_attempts": 25})
declare(enough.queue, 35)
ok(enough.start(), "x-delivery-limit 35 with max_attempts 25 (+10): starts")
ok([l for l in enough.lines() if l.get("level") == "warn" and "keeps x-delivery-limit 35" in l.get("msg", "")],
   "with a warning that the queue keeps its own limit")
ok(has_limit(arguments().get(enough.queue), 35), "the queue keeps 35")
ok(has_limit(arguments().get(enough.dlq), LIMIT), "its new DLQ has the sidecar's limit")
evs = new_events(2)
publish_events(enough.exchange, evs)
ok(wait_until(lambda: count_in("notification_job", "event_id", [e for e, _ in evs]) == 2, timeout=30),
   "events flow")

# The same refusal on a later session does not end the process: the worker
# says why and retries with backoff, as for any refused declaration. The
# process is stopped while the queue is swapped (else its cancel handling
# may declare the queue again first), and its connections are closed (a
# quorum queue deleted and declared again at once keeps its consumer on
# RabbitMQ 3.10).
os.kill(enough.proc.pid, signal.SIGSTOP)
try:
    conn = amqp()
    ch = conn.channel()
    ch.queue_delete(enough.queue)
    conn.close()
    declare(enough.queue, 20)
    for line in rabbitmqctl("list_connections", "pid", "client_properties").stdout.splitlines():
        if f"sidecar consume {enough.name}" in line or f"sidecar publish {enough.name}" in line:
            rabbitmqctl("close_connection", line.split("\t")[0], "test: a new session")
finally:
    os.kill(enough.proc.pid, signal.SIGCONT)
ok(wait_until(lambda: [l for l in enough.lines() if l.get("level") == "warn"
                       and "x-delivery-limit 20," in l.get("msg", "") and "attempt" in l.get("msg", "")],
              timeout=30),
   "a queue re-declared under a running consumer with x-delivery-limit 20: its sessions are refused, "
   "retried with backoff")
ok(enough.alive(), "the process keeps running")
is_eq(enough.stop(), 0, "clean stop")

# a partition queue of an ordered consumer
part = Sidecar(handler=TEST_HANDLER, consumer_extra={
    "queue_type": "quorum", "workers": 1, "max_attempts": 25,
    "ordering": {"key": "subject", "partitions": 2}})
declare(part.queue + ".p1", 20, {"x-single-active-consumer": True})
part.start(wait=False)
is_eq(part.wait_exit(30), 2, "an ordered consumer whose partition queue has x-delivery-limit 20: exit 2")
msg = (refused_line(part) or [{}])[0].get("msg", "")
ok(part.queue + ".p1" in msg and "x-delivery-limit 20," in msg, "the error names the partition queue",
   detail=msg)

# a delay queue without a limit: nothing consumes from it, taken as it is
delay = Sidecar(consumer_extra={"queue_type": "quorum", "max_attempts": 25, "retry_delays_ms": [300]})
declare(delay.queue + ".retry.300ms", None, {"x-message-ttl": 300, "x-dead-letter-exchange": "",
                                             "x-dead-letter-routing-key": delay.queue})
ok(delay.start(), "a delay queue that exists without x-delivery-limit does not stop start-up")
ok(has_limit(arguments().get(delay.queue), LIMIT), "the new main queue has the sidecar's limit")
is_eq(delay.stop(), 0, "clean stop")

# --- a poison that kills the process, max_attempts 25 -------------------------
# 63 good events and one that ends the process, in batches of 8 under a
# prefetch of 64: every death gives back every delivery in hand, batch-mates
# and the prefetched events behind the poison alike, each return counted.
p = Sidecar(handler=TEST_HANDLER, consumer_extra={"queue_type": "quorum", "max_attempts": 25,
                                                  "prefetch": 64, "batch_max": 8})
bound_queue(p.exchange, queue=p.queue, quorum=True)
events = new_events(63, start=30000)
poison = str(uuid.uuid4())
conn = amqp()
ch = conn.channel()
ch.confirm_delivery()
for i, (eid, subject) in enumerate(events):
    if i == 32:
        publish(ch, p.exchange, "CRASH", event_body(poison, etype="CRASH", subject="1"), message_id=poison)
    publish(ch, p.exchange, "ORDER_ACCEPTED", event_body(eid, subject=subject), message_id=eid)
conn.close()
deaths = 0
for run in range(30):
    p.start(wait=False)
    code = p.wait_exit(60)
    if code != 86:
        break
    deaths += 1
is_eq(deaths, 25, "the poison took the process down 25 times (max_attempts 25), then no more")
ok(p.alive(), "the 26th start runs on")
ok(wait_until(lambda: queue_depth(p.queue) == 0, timeout=60), "the queue is drained")
dead = [l for l in p.outcomes("dead_lettered") if l.get("event_id") == poison]
ok(dead and "x-delivery-count" in dead[0]["msg"] and "max_attempts 25" in dead[0]["msg"],
   "the poison was dead-lettered by the x-delivery-count guard, unrun", detail=dead[:1])
is_eq(p.stop(), 0, "clean stop")
dlq_ids = [props.message_id for props, _ in drain(p.dlq)]
ids = [e for e, _ in events]
applied = query("SELECT event_id FROM notification_job WHERE event_id IN (%s)" % ",".join(["%s"] * len(ids)),
                ids)
applied = {r[0] for r in applied}
in_dlq = set(dlq_ids) & set(ids)
lost = set(ids) - applied - in_dlq
diag(f"{len(applied)} good events applied, {len(in_dlq)} dead-lettered with the poison "
     f"(given back with it each time), {len(lost)} missing")
ok(poison in dlq_ids, "the poison is in the DLQ")
ok(not lost, "nothing lost: every good event is applied or in the DLQ", detail=sorted(lost)[:5])
ok(not (applied & in_dlq), "none both applied and dead-lettered")
is_eq(count_in("consumed_event", "event_id", [poison]), 0, "the poison never committed")
done()
