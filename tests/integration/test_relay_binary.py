"""relay.content_mode "binary": the payload as the body exactly as stored
(content_type application/json), every other attribute a cloudEvents:
header, message_id the id, persistent, mandatory, routed by event type.
The sidecar's own consumer applies each event once and recognises the
relay's repeats; the official CloudEvents JavaScript SDK, given the
messages as amqplib reads them (headers mapped to its HTTP binding), reads
every attribute and the data."""
import subprocess

from envelope_lib import *
from node_deps import node_modules

HERE = os.path.dirname(os.path.abspath(__file__))
NODE = node_modules()

rc, out = run_sidecar_cmd(["check"], {"amqp": {"url": os.environ["SC_TEST_AMQP_URL"]},
                                      "mysql": {"url": os.environ["SC_TEST_MYSQL_RELAY_URL"]},
                                      "relay": {"exchange": "x", "content_mode": "binay"}})
ok(rc == 2 and "relay.content_mode" in out, "an unknown content_mode is refused, naming the key", detail=out)

seen_table()
ex = "relaybin-" + suffix()
sc = Sidecar(handler=TEST_HANDLER, exchange=ex)
ok(sc.start(), "a consumer on the relay's exchange started")
raw = bound_queue(ex)

PAYLOADS = ['{"orderId":1,"price":19.90,"note":"it\'s \\"quoted\\" \\u00e9"}',
            '{"n":123456789012345678901234567890,"e":1.5e-7}',
            '[1, 2.50, {"nested": [true, false, null]}]',
            '"just a string"']
clear_outbox()
ids = []
for i, p in enumerate(PAYLOADS):
    eid = str(uuid.uuid4())
    ids.append(eid)
    query("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version,"
          " payload, status, created_at) VALUES (%s, 'ORDER', %s, 'KEEP_RELAY_BINARY', %s, %s, 'PENDING',"
          " UTC_TIMESTAMP(6))", (eid, str(7000 + i), i + 2, p))
stored = dict(query("SELECT event_id, payload FROM outbox_event"))
created = dict(query("SELECT event_id, DATE_FORMAT(created_at, '%Y-%m-%dT%H:%i:%s.%fZ') FROM outbox_event"))

r = Relay(ex)
r.config["relay"]["content_mode"] = "binary"
with open(r.config_path, "w") as f:
    json.dump(r.config, f)
r.start()
ok(wait_until(lambda: count_in("outbox_event", "event_id", ids, "AND status = 'PUBLISHED'") == len(ids),
              timeout=30), "the relay published every row in binary mode")
ok(wait_until(lambda: all(seen(e) for e in ids), timeout=30), "the consumer applied every event")
for i, eid in enumerate(ids):
    rows = seen(eid)
    ok(len(rows) == 1 and rows[0]["data"] == stored[eid].encode() and rows[0]["type"] == "KEEP_RELAY_BINARY"
       and rows[0]["source"] == "ORDER" and rows[0]["subject"] == str(7000 + i)
       and rows[0]["time"] == created[eid] and rows[0]["eventversion"] == i + 2,
       f"consumer: event {i} applied once with every attribute and data byte for byte", detail=(rows, stored[eid]))

p = subprocess.run(["node", os.path.join(HERE, "test_relay_binary.js")],
                   input=json.dumps({"url": os.environ["SC_TEST_AMQP_URL"], "queue": raw, "n": len(ids)}),
                   env=dict(os.environ, NODE_PATH=NODE), capture_output=True, text=True, timeout=60)
if p.returncode != 0:
    bail("node failed: " + p.stderr[-800:])
got = {x["message_id"]: x for x in map(json.loads, p.stdout.splitlines())}
is_eq(sorted(got), sorted(ids), "one message per row, message_id the id")
for i, eid in enumerate(ids):
    x = got.get(eid, {})
    is_eq(bytes.fromhex(x.get("body_hex", "")), stored[eid].encode(),
          f"message {i}: the body is the payload byte for byte")
    ok(x.get("content_type") == "application/json" and x.get("delivery_mode") == 2
       and x.get("routing_key") == "KEEP_RELAY_BINARY", f"message {i}: application/json, persistent, routed by type",
       detail=x)
    is_eq(sorted(x.get("header_types", {})),
          sorted(["x-ordering-key"] + ["cloudEvents:" + a for a in ["specversion", "id", "type", "source", "subject",
                                                                   "time", "eventversion"]]),
          f"message {i}: the attributes are cloudEvents: headers, beside x-ordering-key, no others")
    is_eq(x.get("header_types", {}).get("cloudEvents:eventversion"), "number", f"message {i}: eventversion an integer")
    ok(x.get("ok") and x.get("id") == eid and x.get("type") == "KEEP_RELAY_BINARY" and x.get("source") == "ORDER"
       and x.get("subject") == str(7000 + i) and x.get("time") == created[eid][:23] + "Z"
       and x.get("specversion") == "1.0" and str(x.get("eventversion")) == str(i + 2)
       and x.get("datacontenttype") == "application/json",
       f"message {i}: the CloudEvents SDK reads every attribute", detail=x)
    if i != 1:  # beyond 2^53 the SDK's default JSON parser rounds; the bytes above are exact
        is_eq(json.loads(x.get("data", "null")), json.loads(stored[eid]), f"message {i}: the SDK's data is the payload")

# The relay's repeats (rows set back to PENDING are published again) meet
# each event's claim.
query("UPDATE outbox_event SET status = 'PENDING' WHERE event_id IN (%s)" % ",".join(["%s"] * len(ids)), ids)
ok(wait_until(lambda: sorted(e for e in outcome_ids(sc, "duplicate") if e in ids) == sorted(ids), timeout=30),
   "each republished event is one duplicate at the consumer")
ok(all(len(seen(e)) == 1 for e in ids), "and none applied twice")
is_eq(queue_depth(sc.dlq), 0, "nothing dead-lettered")
is_eq((r.stop(), sc.stop()), (0, 0), "clean stops")
clear_outbox()
done()
