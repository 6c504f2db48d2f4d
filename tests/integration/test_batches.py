"""Batches: one transaction for what is waiting, each delivery under its own
savepoint, so a duplicate, a retry, a reject or a malformed message in the
batch costs only its own part; a deadlock rolls the whole batch back and it
is retried; several sidecar processes on one queue keep exact counts."""
import collections
import re
import uuid

from harness import *

# --- a mixed batch: everything is waiting before the sidecar starts ---
sc = Sidecar(handler=TEST_HANDLER, extra={"log": {"level": "debug"}},
             consumer_extra={"prefetch": 256, "batch_max": 64})
conn = amqp()
ch = conn.channel()
ch.exchange_declare(sc.exchange, "topic", durable=True)
ch.queue_declare(sc.queue, durable=True)
ch.queue_bind(sc.queue, sc.exchange, "#")
ch.confirm_delivery()
good = [str(uuid.uuid4()) for _ in range(20)]
flaky, poison = str(uuid.uuid4()), str(uuid.uuid4())
for i, eid in enumerate(good):
    publish(ch, sc.exchange, "ORDER_ACCEPTED", event_body(eid, subject=str(100 + i)), message_id=eid)
    if i == 5:
        publish(ch, sc.exchange, "ORDER_ACCEPTED", event_body(good[0], subject="100"), message_id=good[0])
        publish(ch, sc.exchange, "FLAKY", event_body(flaky, etype="FLAKY", subject="7"), message_id=flaky)
        publish(ch, sc.exchange, "POISON", event_body(poison, etype="POISON", subject="8"), message_id=poison)
        publish(ch, sc.exchange, "ORDER_ACCEPTED", "{broken json")
conn.close()
ok(sc.start(), "sidecar started on a full queue")
wait_until(lambda: any(l.get("event_id") == flaky for l in sc.outcomes("applied")), timeout=30)
batches = [l for l in sc.lines() if l.get("msg", "").startswith("batch of")]
pat = r"batch of (\d+): transaction (\d+), applied=(\d+) duplicate=(\d+) retry=(\d+) dead=(\d+)"
parsed = [tuple(int(x) for x in re.match(pat, l["msg"]).groups()) for l in batches]
sums = [sum(p[i] for p in parsed) for i in (2, 3, 4, 5)]
# The broker pushes the waiting deliveries in bursts: how they split into
# batches depends on timing, what each one became does not.
is_eq(sums, [21, 1, 2, 2], "over all batches: 21 applied (20 + flaky), 1 duplicate, 2 retries, 2 dead-lettered")
ok(any(p[0] > 1 for p in parsed), f"waiting deliveries were batched (sizes {[p[0] for p in parsed][:12]})")
mixed = [p for p in parsed if p[0] > 1 and p[2] > 0 and (p[3] + p[4] + p[5]) > 0]
diag(f"batches mixing applied deliveries with a duplicate/retry/reject: {len(mixed)}")
is_eq(count_in("notification_job", "event_id", good), 20, "the failures rolled back only their own part")
is_eq(count_in("consumed_event", "event_id", [poison]), 0, "the rejected delivery left no consumed_event row")
is_eq(count_in("notification_job", "event_id", [flaky]), 1, "the flaky one applied once after its retries")
is_eq(queue_depth(sc.dlq), 2, "reject and malformed in the DLQ")
is_eq(queue_depth(sc.queue), 0, "queue drained")
ok(any(int(re.match(r"batch of (\d+)", l["msg"]).group(1)) == 1 for l in batches[1:]),
   "under low load (the retries trickling back) a batch closes at once with one delivery")
is_eq(sc.stop(), 0, "clean stop")

# --- a deadlock between two workers: the victim's batch is retried ---
query("CREATE TABLE IF NOT EXISTS t_locks (id INT PRIMARY KEY)")
query("INSERT IGNORE INTO t_locks VALUES (1), (2)")
query("GRANT SELECT, UPDATE ON app.t_locks TO 'sidecar_consumer'@'%'")
sc = Sidecar(handler=TEST_HANDLER, extra={"log": {"level": "debug"}},
             consumer_extra={"prefetch": 1, "batch_max": 8, "workers": 2})
ok(sc.start(), "two workers started")
a, b = str(uuid.uuid4()), str(uuid.uuid4())
conn = amqp()
ch = conn.channel()
publish(ch, sc.exchange, "LOCK_AB", event_body(a, etype="LOCK_AB", subject="1"), message_id=a)
publish(ch, sc.exchange, "LOCK_BA", event_body(b, etype="LOCK_BA", subject="2"), message_id=b)
conn.close()
wait_until(lambda: len(sc.outcomes("applied")) >= 2, timeout=30)
ok(any("deadlock: retrying the batch" in l.get("msg", "") for l in sc.lines()),
   "a deadlock was detected and the batch retried")
is_eq(sorted(l["event_id"] for l in sc.outcomes("applied")), sorted([a, b]), "both applied exactly once")
is_eq(count_in("notification_job", "event_id", [a, b]), 2, "one effect each")
is_eq(sc.stop(), 0, "clean stop")

# --- three sidecar processes, two workers each, on one queue ---
N = 3000
name = "multi-" + suffix()
procs = [Sidecar(name=name, consumer_extra={"prefetch": 128, "batch_max": 32, "workers": 2}) for _ in range(3)]
for p in procs:
    ok(p.start(), "a sidecar process started on the shared queue")
events = new_events(N)
ids = [e for e, _ in events]
stream = events + events[:300]  # 300 repeats
publish_events(procs[0].exchange, stream)
wait_until(lambda: count_in("consumed_event", "event_id", ids) >= N and queue_depth(name) == 0, timeout=120)
time.sleep(0.5)
applied = collections.Counter(l["event_id"] for p in procs for l in p.outcomes("applied"))
dups = sum(len(p.outcomes("duplicate")) for p in procs)
is_eq(len(applied), N, "every event applied")
is_eq(max(applied.values()), 1, "none applied twice across processes")
is_eq(dups, 300, "every repeat recognised as a duplicate, whichever process got it")
is_eq(count_in("notification_job", "event_id", ids), N, "exactly one effect per event")
ok(all(len(p.outcomes("applied")) > 0 for p in procs), "all three processes took a share: "
   + ", ".join(str(len(p.outcomes("applied"))) for p in procs))
for p in procs:
    is_eq(p.stop(), 0, "clean stop")
done()
