"""Interop with code that is not ours: the official CloudEvents JavaScript
SDK's binary output (HTTP's ce- headers and Kafka's ce_ headers, put on AMQP
headers as a publisher would) and its structured events as a batch, and
amqplib publishing plain JSON with UUID and non-UUID message_ids, each sent
more than once. Every event applies once, with the attributes the SDK set and
data byte for byte; every repeat is a duplicate; nothing is dead-lettered."""
import subprocess

from envelope_lib import *
from node_deps import node_modules

HERE = os.path.dirname(os.path.abspath(__file__))
NODE = node_modules()
seen_table()
ce = Sidecar(handler=TEST_HANDLER, consumer_extra={"prefetch": 64, "batch_max": 16})
plain = Sidecar(handler=TEST_HANDLER, consumer_extra={"envelope": "plain", "plain_subject": "/order/id"})
ok(ce.start() and plain.start(), "a cloudevents and a plain consumer started")
p = subprocess.run(["node", os.path.join(HERE, "test_envelope_interop.js")],
                   input=json.dumps({"url": os.environ["SC_TEST_AMQP_URL"], "ce_exchange": ce.exchange,
                                     "plain_exchange": plain.exchange, "tag": suffix()}),
                   env=dict(os.environ, NODE_PATH=NODE), capture_output=True, text=True, timeout=120)
if p.returncode != 0:
    bail("node failed: " + p.stderr[-800:])
sent = json.loads(p.stdout)
ce_ids = [x["id"] for x in sent["binary"] + sent["kafka"] + sent["batch"]]
plain_ids = [str(uuid.UUID(x["message_id"])) if x["message_id"].count("-") == 4 and len(x["message_id"]) == 36
             else plain_id(x["message_id"]) for x in sent["plain"]]
ok(wait_until(lambda: all(seen(e) for e in ce_ids + plain_ids)
              and len(ce.outcomes("duplicate")) >= len(ce_ids) and len(plain.outcomes("duplicate")) >= 2 * len(plain_ids),
              timeout=60), "every event reached its outcomes")

for x in sent["binary"]:
    rows = seen(x["id"])
    ok(len(rows) == 1 and rows[0]["data"] == x["body"].encode() and rows[0]["type"] == "KEEP_SDK_BINARY"
       and rows[0]["source"] == "/shop/orders" and rows[0]["subject"] == x["headers"]["ce-subject"]
       and rows[0]["time"] == x["time"] and rows[0]["eventversion"] == int(x["headers"]["ce-eventversion"]),
       f"SDK HTTP binary {x['id'][:8]}: applied once, attributes from its ce- headers, data byte for byte",
       detail=(rows, x))
for x in sent["kafka"]:
    rows = seen(x["id"])
    ok(len(rows) == 1 and rows[0]["data"] == x["body"].encode() and rows[0]["subject"] == x["headers"]["ce_subject"],
       f"SDK Kafka binary (ce_ headers) {x['id'][:8]}: applied once", detail=(rows, x))
is_eq(sent["batch_parsed"], 3, "the SDK reads the batch body back as 3 events")
for x in sent["batch"]:
    rows = seen(x["id"])
    want = json.dumps(json.loads(x["member"])["data"], separators=(",", ":")).encode()
    ok(len(rows) == 1 and rows[0]["data"] == want and rows[0]["type"] == "KEEP_SDK_BATCH",
       f"SDK batch member {x['id'][:8]}: applied once, data as the SDK wrote it", detail=(rows, x))
dups = outcome_ids(ce, "duplicate")
is_eq(sorted(e for e in dups if e in ce_ids), sorted(ce_ids), "each SDK event's repeat (binary, and the whole batch) is one duplicate")
for x, eid in zip(sent["plain"], plain_ids):
    rows = seen(eid)
    ok(len(rows) == 1 and rows[0]["data"] == x["body"].encode() and rows[0]["type"] == "KEEP.order.placed"
       and rows[0]["source"] == plain.exchange and rows[0]["subject"].isdigit() and rows[0]["eventversion"] >= 1,
       f"amqplib plain, message_id {x['message_id']}: applied once as {eid}", detail=(rows, x))
    is_eq(outcome_ids(plain, "duplicate").count(eid), 2, f"its two repeats are duplicates ({x['message_id']})")
is_eq((queue_depth(ce.dlq), queue_depth(plain.dlq)), (0, 0), "nothing dead-lettered")
is_eq((ce.stop(), plain.stop()), (0, 0), "clean stops")
done()
