"""Binary content mode on the same queue as structured: a `specversion`
header under one prefix (cloudEvents:, cloudEvents_, ce-, ce_) makes the
headers the attributes and the body `data`, handed on byte for byte; each
event applies once and its repeat is a duplicate. Data of a type that is not
JSON reaches the handler as bytes (data_bytes), an id that is not a UUID as
the UUIDv5 of its source and id. Mixed prefixes, application/json without
CloudEvents headers (binary mode by the AMQP binding, with no attributes)
and the attribute rules' refusals are dead-lettered with the reason, the
copy keeping the original headers and body, the log line naming the event
whenever its id header can be read."""
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
# Data that is not JSON (AMQP binding 3.1.2: opaque application data of its
# datacontenttype), and an id that is not a UUID (CloudEvents: a non-empty
# string), sent twice: its repeat meets the same UUIDv5.
text, raw = str(uuid.uuid4()), "order-" + suffix()
pub.publish(sc.exchange, "KEEP", b"hello \x00 bytes", content_type="text/plain; charset=utf-8", headers=base(text))
for _ in range(2):
    pub.publish(sc.exchange, "KEEP", b'{"k":1}', content_type="application/json", message_id=raw,
                headers=dict(base(raw), **{"ce-source": "urn:shop"}))
mapped = ce_id("urn:shop", raw)

bad = []  # (label, body, content type, headers, reason fragment)
m1 = str(uuid.uuid4())
bad.append(("mixed prefixes", b"{}", "application/json",
            dict(base(m1), **{"cloudEvents:subject": "1"}), "mix CloudEvents prefixes 'ce-' and 'cloudEvents:'"))
bad.append(("no CloudEvents headers", json.dumps({"specversion": "1.0", "id": str(uuid.uuid4()), "type": "KEEP",
                                                  "source": "S"}).encode(), "application/json", {"x-app": "1"},
            "no CloudEvents specversion header"))
bad.append(("no source", b"{}", "application/json",
            {"ce-specversion": "1.0", "ce-id": str(uuid.uuid4()), "ce-type": "KEEP"}, "'source'"))
bad.append(("body not JSON", b"{oops", "application/json", base(str(uuid.uuid4())), "not valid JSON"))
bad.append(("time not RFC 3339", b"{}", "application/json", dict(base(str(uuid.uuid4())), **{"ce-time": "yesterday"}),
            "attribute 'time' ('yesterday') is not an RFC 3339 timestamp"))
bad.append(("attribute name myExt", b"{}", "application/json",
            {"cloudEvents:specversion": "1.0", "cloudEvents:id": str(uuid.uuid4()), "cloudEvents:type": "KEEP",
             "cloudEvents:source": "S", "cloudEvents:myExt": "v"}, "attribute name 'myExt' is not lower-case"))
bad.append(("eventversion beyond 32 bits", b"{}", "application/json",
            dict(base(str(uuid.uuid4())), **{"ce-eventversion": 4294967296}), "beyond 32 bits"))
for label, body, ct, h, _ in bad:
    pub.publish(sc.exchange, "KEEP", body, content_type=ct, headers=h)
pub.close()

ids = [eid for _, eid, _ in cases] + [structured, vendor, nodata, text, mapped]
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
is_eq([(r["data"], r["data_bytes"], r["datacontenttype"]) for r in seen(text)],
      [(None, b"hello \x00 bytes", "text/plain; charset=utf-8")],
      "text/plain data: no data_json, the body as data_bytes, the content type as datacontenttype")
is_eq([(r["data"], r["data_bytes"]) for r in seen(vendor)], [(b'{"v":1}', b'{"v":1}')],
      "JSON data: data_json and the same bytes")
is_eq([(r["source"], r["original_id"]) for r in seen(mapped)], [("urn:shop", raw)],
      f"id '{raw}' applied once as the UUIDv5 of source and id, the id as sent kept")
is_eq(outcome_ids(sc, "duplicate").count(mapped), 1, "its repeat is a duplicate")
ok(any(l.get("ce_id") == raw for l in sc.outcomes("applied") if l.get("event_id") == mapped),
   "its log line carries the id as sent (ce_id)")

msgs = drain(sc.dlq)
is_eq(len(msgs), len(bad), "each malformed binary message is in the DLQ once")
for label, body, ct, h, frag in bad:
    got = [(p, b) for p, b in msgs if b == body and all(header(p, k) == v for k, v in h.items())]
    if not ok(got, f"{label}: in the DLQ with its body and every original header unchanged"):
        continue
    p, _ = got[0]
    ok(frag in (header(p, "x-sidecar-reason") or ""), f"{label}: reason names it ({header(p, 'x-sidecar-reason')})")
    is_eq(p.content_type, ct, f"{label}: content type kept")
    hid = h.get("ce-id") or h.get("cloudEvents:id")
    if hid:
        lines = [l for l in sc.outcomes("malformed") if frag in l.get("msg", "")]
        is_eq([l.get("event_id") for l in lines], [hid], f"{label}: the malformed line names the id of its header")
is_eq(count_in("consumed_event", "event_id", [m1]), 0, "nothing claimed for a malformed one")
is_eq(queue_depth(sc.queue), 0, "nothing left in the queue")
ADMIN = {"url": os.environ["SC_TEST_MYSQL_ADMIN_URL"]}
rc, out = run_sidecar_cmd(["inspect", raw, "--source", "urn:shop", "--json"], dict(sc.config, mysql=ADMIN))
info = json.loads(out[out.index("{"):]) if "{" in out else {}
ok(rc == 0 and info.get("event_id") == mapped and info.get("ce_id") == raw and
   any(c.get("consumer") == sc.name for c in info.get("consumed", [])),
   "inspect --source takes a CloudEvents id that is not a UUID", detail=out)
is_eq(sc.stop(), 0, "clean stop")
done()
