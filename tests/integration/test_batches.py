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
# Done when all 24 deliveries have their outcome (20 + flaky applied, the
# repeat a duplicate, poison and the malformed one dead-lettered).
ok(wait_until(lambda: len(sc.outcomes("applied")) >= 21 and len(sc.outcomes("duplicate")) >= 1
              and len(sc.outcomes("dead_lettered")) >= 2, timeout=30), "every delivery reached its outcome")
# consumer.c's debug line: "batch of N: transaction <name>, applied=A
# duplicate=D retry=R dead=X requeue=Q", <name> one of the names below.
TXN_NAMES = ("committed", "open", "nothing", "empty", "deadlock", "lost", "unknown", "broken")
pat = re.compile(r"batch of (?P<n>\d+): transaction (?P<txn>[a-z]+), applied=(?P<applied>\d+)"
                 r" duplicate=(?P<duplicate>\d+) retry=(?P<retry>\d+) dead=(?P<dead>\d+) requeue=(?P<requeue>\d+)$")
batches = [l["msg"] for l in sc.lines() if l.get("msg", "").startswith("batch of")]
parsed = [pat.match(m) for m in batches]
ok(batches and all(parsed), "every batch line has the documented form", detail="\n".join(batches[:20]))
parsed = [m.groupdict() for m in parsed if m]
for p in parsed:
    for key in ("n", "applied", "duplicate", "retry", "dead", "requeue"):
        p[key] = int(p[key])
ok(all(p["txn"] in TXN_NAMES for p in parsed), f"transactions by name: {sorted(set(p['txn'] for p in parsed))}")
sums = [sum(p[k] for p in parsed) for k in ("applied", "duplicate", "retry", "dead")]
# The broker pushes the waiting deliveries in bursts: how they split into
# batches depends on timing, what each one became does not.
is_eq(sums, [21, 1, 2, 2], "over all batches: 21 applied (20 + flaky), 1 duplicate, 2 retries, 2 dead-lettered")
ok(any(p["n"] > 1 for p in parsed), f"waiting deliveries were batched (sizes {[p['n'] for p in parsed][:12]})")
mixed = [p for p in parsed if p["n"] > 1 and p["applied"] > 0 and (p["duplicate"] + p["retry"] + p["dead"]) > 0]
ok(len(mixed) >= 1, f"{len(mixed)} batch(es) mixed applied deliveries with a duplicate/retry/reject",
   detail="\n".join(batches[:20]))
ok(mixed and all(p["txn"] == "committed" for p in mixed), "and each such batch committed its applied part")
is_eq(count_in("notification_job", "event_id", good), 20, "the failures rolled back only their own part")
is_eq(count_in("consumed_event", "event_id", [poison]), 0, "the rejected delivery left no consumed_event row")
is_eq(count_in("notification_job", "event_id", [flaky]), 1, "the flaky one applied once after its retries")
is_eq(queue_depth(sc.dlq), 2, "reject and malformed in the DLQ")
is_eq(queue_depth(sc.queue), 0, "queue drained")
ok(any(p["n"] == 1 for p in parsed[1:]),
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
ok(wait_until(lambda: len(sc.outcomes("applied")) >= 2, timeout=30), "both lock events reached an outcome")
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
# Outcomes are logged after the ack: done when every delivery of the stream
# (N events and 300 repeats) has one, in whichever process took it.
ok(wait_until(lambda: sum(len(p.outcomes("applied")) + len(p.outcomes("duplicate")) for p in procs) >= N + 300,
              timeout=120), "every delivery of the stream reached an outcome")
is_eq(queue_depth(name), 0, "the shared queue is drained")
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
