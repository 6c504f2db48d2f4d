"""Batch mode (content_type application/cloudevents-batch+json): each
member is its own event with its own claim in the batch's transaction. The
message is acked only once every member is settled: applied, duplicate, or a
confirmed copy of that one member, as a structured message with the
x-sidecar-* headers and its index, in the retry queue (then applied) or the
DLQ. A repeat of the whole message is one duplicate per applied member and
no effect. A member whose id is not a UUID applies as the UUIDv5 of its
source and id, and its copy comes back as that event; an empty batch `[]`
(valid: JSON format 4.3) is acked with nothing to do."""
from envelope_lib import *

seen_table()
sc = Sidecar(handler=TEST_HANDLER, extra={"log": {"level": "debug"}},
             consumer_extra={"prefetch": 32, "batch_max": 8, "max_attempts": 4,
                             "retry_delays_ms": [200, 400]})
ok(sc.start(), "sidecar started")
BATCH = "application/cloudevents-batch+json"


def member(eid, etype, data='{"k": 1.50}'):
    return ('{"specversion":"1.0","id":"%s","type":"%s","source":"urn:shop","subject":"77",'
            '"data":%s}' % (eid, etype, data))


a, b, c, d = (str(uuid.uuid4()) for _ in range(4))
raw, flaky_raw = "m-" + suffix(), "f-" + suffix()
members = [member(a.upper(), "KEEP"), member(b, "KEEP", '[1, {"n": 123456789012345678901234567890}]'),
           member(c, "FLAKY"), member(d, "POISON"),
           '{"specversion":"1.0","id":"nope","type":"KEEP","source":"S","time":"yesterday"}',
           member(raw, "KEEP"), member(flaky_raw, "FLAKY")]
mapped, flaky_mapped = ce_id("urn:shop", raw), ce_id("urn:shop", flaky_raw)
body = "[\n  " + ",\n  ".join(members) + "\n]"
pub = Publisher()
pub.publish(sc.exchange, "batch", body, content_type=BATCH, message_id="batch-1", headers={"x-origin": "test"})

ok(wait_until(lambda: seen(a) and seen(b) and count_in("notification_job", "event_id", [c, flaky_mapped]) == 2
              and seen(mapped) and queue_depth(sc.dlq) >= 2, timeout=60), "every member reached an outcome")
is_eq([(r["id"], r["original_id"]) for r in seen(mapped)], [(mapped, raw)],
      "a member whose id is not a UUID applied as the UUIDv5 of its source and id")
is_eq(len([l for l in sc.outcomes("retried") if l.get("event_id") == flaky_mapped]), 2,
      "a non-UUID member retried twice: its copy (message_id its id as written) came back as itself")
is_eq(count_in("notification_job", "event_id", [flaky_mapped]), 1, "and applied once")
is_eq((len(seen(a)), len(seen(b))), (1, 1), "the good members applied once each")
is_eq(seen(b)[0]["data"], b'[1, {"n": 123456789012345678901234567890}]', "a member's data byte for byte")
is_eq(seen(a)[0]["id"], a, "a member's id canonicalised")
is_eq(count_in("notification_job", "event_id", [c]), 1, "the flaky member applied once after its retries")
retried = [l for l in sc.outcomes("retried") if l.get("event_id") == c]
is_eq(len(retried), 2, "it went through the delay queue twice")
ok(retried and retried[0].get("batch_index") == 2 and "batch_index" not in retried[-1],
   "its first attempt was member 2 of the batch, the next ones its own structured copy", detail=retried)
dl = drain(sc.dlq)
by_index = {header(p, "x-sidecar-batch-index"): (p, bo) for p, bo in dl}
is_eq(sorted(k for k in by_index if k is not None), [3, 4], "the rejected and the malformed member in the DLQ, by index")
p, bo = by_index.get(3, (None, None))
if ok(p is not None, "the rejected member's copy"):
    is_eq(bo.decode(), members[3], "its body is that member's JSON text exactly")
    is_eq((p.content_type, p.message_id, p.type), ("application/cloudevents+json", d, "POISON"),
          "a structured message of its own: content type, message_id and type its own")
    ok("poison event" in header(p, "x-sidecar-reason") and header(p, "x-sidecar-consumer") == sc.name
       and header(p, "x-sidecar-attempts") == 1 and header(p, "x-sidecar-original-exchange") == sc.exchange
       and header(p, "x-sidecar-original-routing-key") == "batch" and header(p, "x-origin") == "test",
       "with the usual x-sidecar-* headers and the batch's own", detail=p.headers)
p, bo = by_index.get(4, (None, None))
if ok(p is not None, "the malformed member's copy"):
    is_eq(bo.decode(), members[4], "its body is that member exactly")
    ok("attribute 'time' ('yesterday') is not an RFC 3339 timestamp" in header(p, "x-sidecar-reason")
       and p.message_id is None, "reason named, no message_id (it was not read)", detail=p.headers)
is_eq(count_in("consumed_event", "event_id", [d]), 0, "no claim for the rejected member")
ok(wait_until(lambda: queue_depth(sc.queue) == 0, timeout=10), "the batch message was acked")

# The whole message again: a duplicate per applied member, no effect.
dups_before = outcome_ids(sc, "duplicate")
pub.publish(sc.exchange, "batch", body, content_type=BATCH, message_id="batch-1")
ok(wait_until(lambda: queue_depth(sc.dlq) >= 2 and all(outcome_ids(sc, "duplicate").count(x) > dups_before.count(x)
                                                       for x in (a, b, c)), timeout=30),
   "the repeat reached its outcomes")
is_eq((len(seen(a)), len(seen(b)), count_in("notification_job", "event_id", [c])), (1, 1, 1),
      "no second effect for any member")
is_eq(sorted(x for x in outcome_ids(sc, "duplicate") if x in (a, b, c)), sorted([a, b, c]),
      "one duplicate per applied member")
drain(sc.dlq)

# Two copies of one batch at once: in one transaction each member once.
e = [str(uuid.uuid4()) for _ in range(3)]
twice = "[" + ",".join(member(x, "KEEP") for x in e) + "]"
pub.publish(sc.exchange, "batch", twice, content_type=BATCH)
pub.publish(sc.exchange, "batch", twice, content_type=BATCH)
ok(wait_until(lambda: all(outcome_ids(sc, "duplicate").count(x) == 1 for x in e), timeout=30),
   "both copies settled")
is_eq([len(seen(x)) for x in e], [1, 1, 1], "each member applied once over both copies")

# An empty batch: nothing to do, acked, nothing dead-lettered.
pub.publish(sc.exchange, "batch", " [ ] ", content_type=BATCH)
ok(wait_until(lambda: sc.outcomes("empty"), timeout=20), "an empty batch is logged as one with nothing to do")
ok(wait_until(lambda: queue_depth(sc.queue) == 0, timeout=10) and queue_depth(sc.dlq) == 0,
   "and acked, not dead-lettered")

# Whole messages that are not a batch: to the DLQ whole, body intact.
for label, text, frag in [("object", '{"specversion":"1.0"}', "not a JSON array"),
                          ("cut", "[" + member(str(uuid.uuid4()), "KEEP"), "not a JSON array")]:
    pub.publish(sc.exchange, "batch", text, content_type=BATCH)
    ok(wait_until(lambda: queue_depth(sc.dlq) >= 1, timeout=20), f"{label} batch dead-lettered")
    got = drain(sc.dlq)
    ok(len(got) == 1 and got[0][1].decode() == text and frag in header(got[0][0], "x-sidecar-reason")
       and header(got[0][0], "x-sidecar-batch-index") is None and got[0][0].content_type == BATCH,
       f"{label} batch: the whole message, its reason ({frag})", detail=[(p.headers, bo) for p, bo in got])
pub.close()
is_eq(queue_depth(sc.queue), 0, "nothing left in the queue")
is_eq(sc.stop(), 0, "clean stop")
done()
