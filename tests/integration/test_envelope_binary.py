"""Binary content mode on the same queue as structured: a `specversion`
header under one prefix (cloudEvents:, cloudEvents_, ce-, ce_) makes the
headers the attributes and the body `data`, handed on byte for byte; each
event applies once and its repeat is a duplicate. Mixed prefixes, non-JSON
data and the structured mode's own malformed kinds are dead-lettered with
the reason, the copy keeping the original headers and body."""
from envelope_lib import *

seen_table()
sc = Sidecar(handler=TEST_HANDLER, consumer_extra={"prefetch": 32, "batch_max": 8})
ok(sc.start(), "sidecar started")

DATA = b'{"n":123456789012345678901234567890,"price":19.90,"s":"a\\u0000b","deep":[[[{"x":1e400}]]]}'
pub = Publisher()
cases = []  # (prefix, event id as published, headers)
for prefix, version in [("cloudEvents:", 3), ("cloudEvents_", "4"), ("ce-", "5"), ("ce_", 6)]:
    eid = str(uuid.uuid4())
    h = {prefix + "specversion": "1.0", prefix + "id": eid.upper(), prefix + "type": "KEEP_BINARY",
         prefix + "source": "urn:shop:orders", prefix + "subject": "1001",
         prefix + "time": "2026-11-29T10:00:00.123456Z", prefix + "eventversion": version,
         prefix + "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    cases.append((prefix, eid, h))
    for _ in range(2):  # the publisher repeats itself
        pub.publish(sc.exchange, "KEEP_BINARY", DATA, content_type="application/json; charset=utf-8",
                    message_id=eid, headers=h)
# A structured event on the same queue, as before.
structured = str(uuid.uuid4())
pub.publish(sc.exchange, "KEEP", json.dumps({"specversion": "1.0", "id": structured, "type": "KEEP",
                                             "source": "S", "data": {"a": 1}}),
            content_type="application/cloudevents+json", message_id=structured)
# A +json type and no data at all.
vendor, nodata = str(uuid.uuid4()), str(uuid.uuid4())
base = lambda eid: {"ce-specversion": "1.0", "ce-id": eid, "ce-type": "KEEP", "ce-source": "S"}
pub.publish(sc.exchange, "KEEP", b'{"v":1}', content_type="application/vnd.shop.v1+json", headers=base(vendor))
pub.publish(sc.exchange, "KEEP", b"", headers=base(nodata))

bad = []  # (label, body, content type, headers, reason fragment)
m1 = str(uuid.uuid4())
bad.append(("mixed prefixes", b"{}", "application/json",
            dict(base(m1), **{"cloudEvents:subject": "1"}), "mix CloudEvents prefixes 'ce-' and 'cloudEvents:'"))
bad.append(("text data", b"hello", "text/plain", base(str(uuid.uuid4())),
            "content type 'text/plain' is not JSON"))
bad.append(("id not a UUID", b"{}", "application/json", dict(base("x"), **{"ce-id": "order-1"}), "not a UUID"))
bad.append(("no source", b"{}", "application/json",
            {"ce-specversion": "1.0", "ce-id": str(uuid.uuid4()), "ce-type": "KEEP"}, "'source'"))
bad.append(("body not JSON", b"{oops", "application/json", base(str(uuid.uuid4())), "not valid JSON"))
for label, body, ct, h, _ in bad:
    pub.publish(sc.exchange, "KEEP", body, content_type=ct, headers=h)
pub.close()

ids = [eid for _, eid, _ in cases] + [structured, vendor, nodata]
ok(wait_until(lambda: all(seen(e) for e in ids) and queue_depth(sc.dlq) >= len(bad)
              and len(sc.outcomes("duplicate")) >= len(cases), timeout=60),
   "every event reached an outcome")
for prefix, eid, h in cases:
    rows = seen(eid)
    if not is_eq(len(rows), 1, f"{prefix}: applied once, the repeat without effect"):
        continue
    r = rows[0]
    is_eq(r["data"], DATA, f"{prefix}: data is the body byte for byte (big number, 19.90, \\u0000, depth)")
    is_eq((r["id"], r["type"], r["source"], r["subject"], r["time"]),
          (eid, "KEEP_BINARY", "urn:shop:orders", "1001", "2026-11-29T10:00:00.123456Z"),
          f"{prefix}: id canonical lowercase, type, source, subject, time from the headers")
    is_eq(r["eventversion"], int(h[prefix + "eventversion"]), f"{prefix}: eventversion (an integer or a string of digits)")
    is_eq(outcome_ids(sc, "duplicate").count(eid), 1, f"{prefix}: its repeat is one duplicate")
is_eq(len(seen(structured)), 1, "a structured event on the same queue still applies")
is_eq([r["data"] for r in seen(vendor)], [b'{"v":1}'], "a +json content type is JSON data")
is_eq([r["data"] for r in seen(nodata)], [None], "an empty body is an event without data")

msgs = drain(sc.dlq)
is_eq(len(msgs), len(bad), "each malformed binary message is in the DLQ once")
for label, body, ct, h, frag in bad:
    got = [(p, b) for p, b in msgs if b == body and all(header(p, k) == v for k, v in h.items())]
    if not ok(got, f"{label}: in the DLQ with its body and every original header unchanged"):
        continue
    p, _ = got[0]
    ok(frag in (header(p, "x-sidecar-reason") or ""), f"{label}: reason names it ({header(p, 'x-sidecar-reason')})")
    is_eq(p.content_type, ct, f"{label}: content type kept")
is_eq(count_in("consumed_event", "event_id", [m1]), 0, "nothing claimed for a malformed one")
is_eq(queue_depth(sc.queue), 0, "nothing left in the queue")
is_eq(sc.stop(), 0, "clean stop")
done()
