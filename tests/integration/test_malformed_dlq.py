"""Every malformed kind of the contract ends in the DLQ with its reason and
reason headers, nothing in consumed_event, nothing handed to the handler:
the envelope's own kinds and each CloudEvents rule an event can break (the
rules table of docs/contract.md), the reason naming the attribute and the
rule."""
import json
import re
import uuid

from harness import *

sc = Sidecar()
ok(sc.start(), "sidecar started")
good_id = str(uuid.uuid4())
uid = lambda: str(uuid.uuid4())
cases = []  # (label, body, message_id, reason fragment, id or None)
i1, i2, i3, i4, i5, i6, i7 = (uid() for _ in range(7))
cases.append(("not JSON", "not json {", None, "not valid JSON", None))
cases.append(("JSON array", "[1,2,3]", None, "not a JSON object", None))
cases.append(("missing specversion", json.dumps({"id": i1, "type": "T", "source": "S"}), None, "'specversion'", i1))
cases.append(("missing id", json.dumps({"specversion": "1.0", "type": "T", "source": "S"}), None, "'id'", None))
cases.append(("id empty", json.dumps({"specversion": "1.0", "id": "", "type": "T", "source": "S"}), None, "'id'", None))
cases.append(("id wrong type", json.dumps({"specversion": "1.0", "id": 7, "type": "T", "source": "S"}), None, "'id'", None))
cases.append(("missing type", json.dumps({"specversion": "1.0", "id": i2, "source": "S"}), None, "'type'", i2))
cases.append(("type wrong type", json.dumps({"specversion": "1.0", "id": i3, "type": 5, "source": "S"}), None, "'type'", i3))
cases.append(("missing source", json.dumps({"specversion": "1.0", "id": i4, "type": "T"}), None, "'source'", i4))
cases.append(("specversion wrong type", json.dumps({"specversion": 1, "id": i5, "type": "T", "source": "S"}), None, "'specversion'", i5))
cases.append(("message_id differs from id", event_body(i6), uid(), "differs from id", i6))
cases.append(("subject not an integer (handler REJECT)", event_body(i7, subject="abc"), i7, "not an integer", i7))


def broken(label, frag, **change):
    eid = uid()
    ev = json.loads(event_body(eid))
    for k, v in change.items():
        if v is None:
            ev.pop(k, None)
        else:
            ev[k] = v
    cases.append((label, json.dumps(ev), eid, frag, eid))


broken("time 'yesterday'", "attribute 'time' ('yesterday') is not an RFC 3339 timestamp", time="yesterday")
broken("time 2024-02-30T25:61:00Z", "attribute 'time' ('2024-02-30T25:61:00Z') is not an RFC 3339", time="2024-02-30T25:61:00Z")
broken("subject ''", "attribute 'subject' is empty", subject="")
broken("source 'ORDER X'", "attribute 'source' ('ORDER X') is not a URI-reference", source="ORDER X")
broken("attribute myExt", "attribute name 'myExt' is not lower-case", myExt="1")
broken("attribute my_ext", "attribute name 'my_ext' is not lower-case", my_ext="1")
broken("eventversion beyond 32 bits", "attribute 'eventversion' is 4294967296, beyond 32 bits", eventversion=4294967296)
broken("a control character", "attribute 'subject' holds U+0007, a control character", subject="10\u000701")
broken("data with data_base64", "members 'data' and 'data_base64' together", data_base64="e30=")

conn = amqp()
ch = conn.channel()
ch.confirm_delivery()
for label, body, mid, _, _ in cases:
    publish(ch, sc.exchange, "ORDER_ACCEPTED", body, message_id=mid)
publish(ch, sc.exchange, "ORDER_ACCEPTED", event_body(good_id), message_id=good_id)
conn.close()

wait_until(lambda: queue_depth(sc.dlq) >= len(cases), timeout=60)
wait_until(lambda: sc.outcomes("applied"), timeout=30)
msgs = drain(sc.dlq)
is_eq(len(msgs), len(cases), "every malformed message is in the DLQ")
by_body = {body.decode(): props for props, body in msgs}
for label, body, mid, frag, eid in cases:
    props = by_body.get(body)
    if not ok(props is not None, f"{label}: in the DLQ with its body unchanged"):
        continue
    h = props.headers or {}
    reason = h.get("x-sidecar-reason", "")
    if isinstance(reason, bytes):
        reason = reason.decode()
    ok(frag in reason, f"{label}: reason names the problem ({reason})")
    ok(h.get("x-sidecar-consumer") in (sc.name, sc.name.encode()), f"{label}: consumer header")
    ok(h.get("x-sidecar-attempts") == 1, f"{label}: attempts header")
    ok(h.get("x-sidecar-failed-at"), f"{label}: failed-at header")
    ok(h.get("x-sidecar-original-exchange") in (sc.exchange, sc.exchange.encode()), f"{label}: original exchange header")
    ok(h.get("x-sidecar-original-routing-key") in ("ORDER_ACCEPTED", b"ORDER_ACCEPTED"), f"{label}: original routing key header")
    ok(props.delivery_mode == 2, f"{label}: persistent in the DLQ")
ids = [eid for *_, eid in cases if eid]
is_eq(count_in("consumed_event", "event_id", ids), 0, "no consumed_event row for any malformed message")
is_eq(count_in("notification_job", "event_id", ids), 0, "no effect for any malformed message")
is_eq(count_in("notification_job", "event_id", [good_id]), 1, "the good event after them was applied")
is_eq(len(sc.outcomes("malformed")), len(cases) - 1, "malformed outcomes logged (the REJECT is not malformed)")
is_eq(queue_depth(sc.queue), 0, "nothing left unacked in the queue")
# Each message is counted once, under one outcome: a malformed one as
# malformed, not as a dead letter too (it was counted under both, so the
# summary said dead_lettered=12 malformed=11 for 12 messages).
n_bad = len(cases) - 1


def counts():
    st, text = sc.get("/metrics")
    c = {k: int(float(v)) for k, v in re.findall(
        r'^sidecar_messages_total\{consumer="%s",outcome="(\w+)"\} (\S+)$' % re.escape(sc.name), text, re.M)}
    return (c.get("malformed"), c.get("dead_lettered"), c.get("applied"))


want = (n_bad, 1, 1)
wait_until(lambda: counts() == want, timeout=10)
is_eq(counts(), want, "sidecar_messages_total: malformed, dead_lettered (the REJECT alone), applied")
is_eq(sc.stop(), 0, "clean stop")
summary = re.findall(r"stopped: applied=(\d+) duplicate=\d+ retried=\d+ dead_lettered=(\d+) unknown=\d+ "
                     r"malformed=(\d+)", sc.text())
is_eq(summary, [("1", "1", str(n_bad))], "the stop summary counts each message once")
done()
