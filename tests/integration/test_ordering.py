"""Per-key order (consumers[].ordering) against the real servers: the
topology (single active consumer queues, the consistent-hash exchange and its
partitions, no delay queues); keys x versions through workers 2 and
partitions 2 with one key failing for a while (retried in place: only that
key waits); kill -9 of the active consumer with a standby in another process
taking over (per key strictly in order, none missing, none doubled; the
failover time measured); a key whose held events fill the prefetch stalls
the stream until its head resolves; skip; events without a key."""
import json
import os
import tempfile
import threading
import time
import uuid

from harness import *
from ordering_common import seen

block = os.path.join(tempfile.mkdtemp(prefix="sc-order-"), "block")
ENV = {"SC_TEST_BLOCK_FILE": block}


def ordered_consumer(name=None, partitions=2, workers=2, prefetch=64, on_dead_letter="skip",
                     max_attempts=1000):
    return Sidecar(name=name, handler=TEST_HANDLER, env=ENV, consumer_extra={
        "workers": workers, "prefetch": prefetch, "max_attempts": max_attempts,
        "retry_delays_ms": [100], "batch_max": 16,
        "ordering": {"key": "subject", "partitions": partitions,
                     "on_dead_letter": on_dead_letter}})


def publish_versions(exchange, keys, versions, etype=lambda k, v: "ORDERED", pace_s=0.0,
                     header=True, sent=None):
    """Every key's versions 1..versions, interleaved across keys (version
    by version). Returns {event_id: (key, version)}, filled as it goes into
    sent when given."""
    sent = {} if sent is None else sent
    conn = amqp()
    ch = conn.channel()
    ch.confirm_delivery()
    for v in range(1, versions + 1):
        for k in keys:
            eid = str(uuid.uuid4())
            sent[eid] = (k, v)
            t = etype(k, v)
            publish(ch, exchange, t, event_body(eid, etype=t, subject=k, version=v),
                    message_id=eid, headers={"x-ordering-key": k} if header else None)
            if pace_s:
                time.sleep(pace_s)
    conn.close()
    return sent


def order_problems(sent):
    """What breaks 'per key strictly in version order, none missing, none
    doubled' for the events sent."""
    rows = seen(sent)
    per_key, problems, count = {}, [], {}
    for _, eid, subject, version, _ in rows:
        per_key.setdefault(subject, []).append(version)
        count[eid] = count.get(eid, 0) + 1
    want = {}
    for k, v in sent.values():
        want.setdefault(k, []).append(v)
    for k, vs in want.items():
        got = per_key.get(k, [])
        if got != sorted(vs):
            problems.append(f"key {k}: applied {got}, want {sorted(vs)}")
    doubled = [e for e, c in count.items() if c > 1]
    if doubled:
        problems.append(f"{len(doubled)} events applied twice")
    return problems


# ---- topology ------------------------------------------------------------
sc = ordered_consumer()
ok(sc.start(), "an ordered consumer with partitions 2 and workers 2 starts")
qs = rabbitmqctl("list_queues", "name", "arguments").stdout
mine = {l.split("\t")[0]: l for l in qs.splitlines() if l.startswith(sc.queue)}
ok(set(mine) == {sc.queue + ".p0", sc.queue + ".p1", sc.dlq},
   "its queues: the partitions <queue>.p0, <queue>.p1 and the DLQ, no delay queue", sorted(mine))
ok(all("x-single-active-consumer" in mine.get(sc.queue + f".p{i}", "") for i in range(2)),
   "each partition queue is declared with x-single-active-consumer", mine)
ex = rabbitmqctl("list_exchanges", "name", "type").stdout
ok(f"{sc.queue}.ordering\tx-consistent-hash" in ex,
   "the consistent-hash exchange <queue>.ordering feeds them")
cons = rabbitmqctl("list_consumers", "queue_name", "active").stdout
active = [l for l in cons.splitlines() if l.startswith(sc.queue + ".p") and l.endswith("true")]
ok(len(active) == 2, "each partition has its active consumer (one per worker)", cons)

quorum = Sidecar(handler=TEST_HANDLER, env=ENV, consumer_extra={
    "queue_type": "quorum", "ordering": {"key": "data/orderId", "on_dead_letter": "skip"}})
ok(quorum.start(), "an ordered consumer on a quorum queue (partitions 1) starts")
qs = rabbitmqctl("list_queues", "name", "type", "arguments").stdout
line = next((l for l in qs.splitlines() if l.split("\t")[0] == quorum.queue), "")
ok("quorum" in line and "x-single-active-consumer" in line,
   "its queue is a quorum queue with x-single-active-consumer", line)
qsent = publish_versions(quorum.exchange, ["q1", "q2"], 3)
ok(wait_until(lambda: len(seen(qsent)) == 6, timeout=30) and not order_problems(qsent),
   "keyed by a data pointer: both keys applied in order")
quorum.stop()

# ---- one key failing for a while delays only that key ---------------------
open(block, "w").close()
keys = [f"k{i}" for i in range(20)]
sent = publish_versions(sc.exchange, keys, 10,
                        etype=lambda k, v: "ORDERED_BLOCKED" if (k, v) == ("k7", 1) else "ORDERED")
others = {e: kv for e, kv in sent.items() if kv[0] != "k7"}
ok(wait_until(lambda: len(seen(others)) == len(others), timeout=90),
   f"the other 19 keys x 10 versions are applied while key k7's first event fails "
   f"({len(seen(others))} of {len(others)})")
k7 = {e: kv for e, kv in sent.items() if kv[0] == "k7"}
in_place = [l for l in sc.lines() if l.get("outcome") == "retried" and
            "retry in place" in l.get("msg", "")]
ok(len(seen(k7)) == 0 and len(in_place) >= 2,
   f"key k7 waits behind its failing head, retried in place ({len(in_place)} retries, "
   f"{len(seen(k7))} of its events applied)")
ok(queue_depth(sc.dlq) == 0, "nothing dead-lettered meanwhile")
os.unlink(block)
ok(wait_until(lambda: len(seen(sent)) == len(sent), timeout=60),
   "once the handler succeeds, key k7 follows")
problems = order_problems(sent)
ok(not problems, "every key strictly in version order, none missing, none doubled", problems)

# ---- kill -9 of the active consumer; a standby in another process ---------
standby = ordered_consumer(name=sc.name)
ok(standby.start(), "a second process with the same consumer starts as a standby")
cons = rabbitmqctl("list_consumers", "queue_name", "active").stdout
waiting = [l for l in cons.splitlines() if l.startswith(sc.queue + ".p") and l.endswith("false")]
ok(len(waiting) == 2, "its workers wait (single active consumer: not active)", cons)
keys2 = [f"f{i}" for i in range(30)]
stream = {}
pub = threading.Thread(target=lambda: publish_versions(sc.exchange, keys2, 20, pace_s=0.004,
                                                      sent=stream))
pub.start()
wait_until(lambda: len(seen(dict(stream))) >= 150, timeout=60)
killed_at = time.time()
sc.kill9()
pub.join()
ok(len(stream) == 600, "600 events published, the kill in the middle")
ok(wait_until(lambda: len(seen(stream)) >= len(stream), timeout=90),
   f"after kill -9 of the active consumer the standby applies the rest "
   f"({len(seen(stream))} of {len(stream)})")
problems = order_problems(stream)
ok(not problems, "30 keys x 20 versions across the failover: strictly in order, none missing, "
   "none doubled", problems)
rows = seen(stream)
gaps = [(b[4] - a[4]).total_seconds() for a, b in zip(rows, rows[1:])]
took = [l for l in standby.lines() if l.get("outcome") == "applied"]
by_standby = {l.get("event_id") for l in took}
last_killed = max((r[4] for r in rows if r[1] not in by_standby), default=None)
first_standby = min((r[4] for r in rows if r[1] in by_standby), default=None)
if last_killed and first_standby:
    diag(f"failover: {(first_standby - last_killed).total_seconds():.3f} s from the killed "
         f"consumer's last effect to the standby's first; the longest pause between two effects "
         f"{max(gaps):.3f} s (publishing one event every 4 ms plus its confirm)")
ok(len(took) > 0 and len(seen(stream)) - len(took) >= 150,
   f"the killed one applied {len(seen(stream)) - len(took)}, the standby the other {len(took)}")
dups = [l for l in standby.lines() if l.get("outcome") == "duplicate"]
diag(f"the standby met {len(dups)} events the killed one had committed but not acked")
standby.stop()

# ---- one key's held events fill the prefetch: the stream stalls -----------
small = ordered_consumer(partitions=1, workers=1, prefetch=4)
ok(small.start(), "an ordered consumer with partitions 1, prefetch 4")
open(block, "w").close()
a = publish_versions(small.exchange, ["a"], 6,
                     etype=lambda k, v: "ORDERED_BLOCKED" if v == 1 else "ORDERED")
b = publish_versions(small.exchange, ["b"], 3)
ok(wait_until(lambda: len([l for l in small.lines() if "retry in place" in l.get("msg", "")]) >= 5,
              timeout=30), "key a's head is retried in place")
ok(len(seen(b)) == 0 and queue_depth(small.queue) == 5,
   f"with 4 of key a in hand the broker sends nothing more: key b waits in the queue "
   f"(depth {queue_depth(small.queue)}, key b applied {len(seen(b))})")
os.unlink(block)
ok(wait_until(lambda: len(seen(a)) + len(seen(b)) == 9, timeout=60),
   "once the head resolves the stream moves on")
problems = order_problems({**a, **b})
ok(not problems, "both keys in order", problems)
small.stop()

# ---- skip: only the failing event is dead-lettered; no key: dead-lettered --
skip = ordered_consumer(partitions=1, workers=1, on_dead_letter="skip", max_attempts=2)
ok(skip.start(), "an ordered consumer with on_dead_letter skip")
s = publish_versions(skip.exchange, ["s"], 3,
                     etype=lambda k, v: "POISON" if v == 2 else "ORDERED")
nokey = str(uuid.uuid4())
conn = amqp()
ch = conn.channel()
ch.confirm_delivery()
body = json.loads(event_body(nokey, etype="ORDERED"))
del body["subject"]
publish(ch, skip.exchange, "ORDERED", json.dumps(body), message_id=nokey)
conn.close()
ok(wait_until(lambda: len(seen(s)) == 2 and queue_depth(skip.dlq) == 2, timeout=30),
   "skip: versions 1 and 3 applied, the rejected version 2 and the keyless event dead-lettered")
applied = [r[3] for r in seen(s)]
ok(applied == [1, 3], f"in order around the skipped one ({applied})")
dead = drain(skip.dlq)
reasons = sorted((p.headers or {}).get("x-sidecar-reason", "") for p, _ in dead)
ok(any(r.startswith("no ordering key") for r in reasons),
   "the event without a subject is dead-lettered: no ordering key", reasons)
# eventversion per key: a gap and a regression are applied, logged and counted.
vv = {}
conn = amqp()
ch = conn.channel()
ch.confirm_delivery()
for v in (1, 2, 4, 3):
    eid = str(uuid.uuid4())
    vv[eid] = ("v", v)
    publish(ch, skip.exchange, "ORDERED", event_body(eid, etype="ORDERED", subject="v", version=v),
            message_id=eid)
conn.close()
ok(wait_until(lambda: len(seen(vv)) == 4, timeout=30), "versions 1, 2, 4, 3 of one key applied")
ok([r[3] for r in seen(vv)] == [1, 2, 4, 3], "in arrival order")
port = skip.http_port()
gap = metric_sum(port, r'^sidecar_consumer_version_breaks_total\{[^}]*kind="gap"\} (\d+)$')
reg = metric_sum(port, r'^sidecar_consumer_version_breaks_total\{[^}]*kind="regression"\} (\d+)$')
warned = [l for l in skip.lines() if "eventversion" in l.get("msg", "")]
ok(gap == 2 and reg == 1 and len(warned) == 3,
   f"gaps (key v: 4 after 2; key s: 3 after 1, its 2 skipped) and one regression (3 after 4) "
   f"counted ({gap}, {reg}) and logged",
   [l["msg"] for l in warned])
skip.stop()
sc.stop()
done()
