"""A handler built against the handler header as it was before struct
sc_event grew the trace context (tests/integration/abi_pretrace/, a copy of
include/sidecar/handler.h from then) still loads in today's consumer and reads every
field it knows right, for events with and without trace context, structured
and binary, and for events whose data is not JSON (data_base64, a text/plain
body: data_bytes, which it does not know of): fields are only ever
appended."""
from harness import *
from envelope_lib import Publisher

OLD = os.environ.get("SC_ABI_PRETRACE_HANDLER", "")
if not OLD or not os.path.exists(OLD):
    bail("SC_ABI_PRETRACE_HANDLER does not name the built abi_pretrace_handler.so")

query("CREATE TABLE IF NOT EXISTS t_abi_old (n BIGINT AUTO_INCREMENT PRIMARY KEY, event_id CHAR(36) NOT NULL,"
      " source VARCHAR(255), subject VARCHAR(255), eventversion BIGINT, data LONGBLOB, KEY (event_id))")
query("GRANT INSERT ON app.t_abi_old TO 'sidecar_consumer'@'%'")

sc = Sidecar(handler=OLD)
rc, out = run_sidecar_cmd(["check"], sc.config)
ok(rc == 0, "sidecar check loads the handler built against the old header", detail=out[-500:])
ok(sc.start(), "the consumer starts with it")
TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
pub = Publisher()
sent = []
for i, trace in enumerate([None, TP]):
    eid = str(uuid.uuid4())
    body = {"specversion": "1.0", "id": eid, "type": "OLD_ABI", "source": "urn:shop", "subject": f"s{i}",
            "eventversion": 7 + i, "data": {"n": 123456789012345678901234567890, "i": i}}
    if trace:
        body.update(traceparent=trace, tracestate="rojo=1")
    text = json.dumps(body, separators=(",", ":"))
    pub.publish(sc.exchange, "OLD_ABI", text, content_type="application/cloudevents+json", message_id=eid)
    sent.append((eid, f"s{i}", 7 + i, json.dumps(body["data"], separators=(",", ":")).encode()))
eid = str(uuid.uuid4())
pub.publish(sc.exchange, "OLD_ABI", b'{"binary":true}', content_type="application/json", message_id=eid,
            headers={"cloudEvents:specversion": "1.0", "cloudEvents:id": eid, "cloudEvents:type": "OLD_ABI",
                     "cloudEvents:source": "urn:shop", "cloudEvents:subject": "bin", "cloudEvents:eventversion": 9,
                     "cloudEvents:traceparent": TP})
sent.append((eid, "bin", 9, b'{"binary":true}'))
# Data that is not JSON reaches today's handlers as data_bytes, a field the
# old layout does not have: the old handler sees an event without data_json
# and works on.
eid = str(uuid.uuid4())
pub.publish(sc.exchange, "OLD_ABI", json.dumps({"specversion": "1.0", "id": eid, "type": "OLD_ABI", "source": "urn:shop",
                                                "subject": "b64", "eventversion": 10, "data_base64": "AAEC"}),
            content_type="application/cloudevents+json", message_id=eid)
sent.append((eid, "b64", 10, b""))
eid = str(uuid.uuid4())
pub.publish(sc.exchange, "OLD_ABI", b"plain text", content_type="text/plain", message_id=eid,
            headers={"cloudEvents:specversion": "1.0", "cloudEvents:id": eid, "cloudEvents:type": "OLD_ABI",
                     "cloudEvents:source": "urn:shop", "cloudEvents:subject": "text", "cloudEvents:eventversion": 11})
sent.append((eid, "text", 11, b""))
pub.close()


def rows(e):
    return query("SELECT source, subject, eventversion, data FROM t_abi_old WHERE event_id = %s", (e,))


ok(wait_until(lambda: all(rows(e) for e, *_ in sent), timeout=30), "the old handler handled every event")
for e, subject, version, data in sent:
    is_eq(rows(e), (("urn:shop", subject, version, data),),
          f"{subject}: source, subject, eventversion and data read right through the old layout")
is_eq(queue_depth(sc.dlq), 0, "nothing dead-lettered")
is_eq(sc.stop(), 0, "clean stop")
done()
