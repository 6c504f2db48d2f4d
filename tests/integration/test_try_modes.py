"""Every envelope mode through `sidecar try`: a file is a structured event
(`{`), a batch body (`[`), or a message file (field lines, a blank line, the
body byte for byte: content_type, message_id, type, timestamp, exchange,
routing_key, `header NAME: VALUE`, `int-header NAME: VALUE`). Each event of
a file runs claim and handler in the one transaction that is rolled back."""
import tempfile

from envelope_lib import *

DIR = tempfile.mkdtemp(prefix="sc-try-modes-")
DEAD_AMQP = "amqp://guest:guest@127.0.0.1:1/%2f"  # try never needs the broker


def config(**extra):
    k = {"name": "try-modes", "queue": "try-modes", "handler": HANDLER,
         "bindings": [{"exchange": "orders", "routing_key": "#"}]}
    k.update(extra)
    return {"amqp": {"url": DEAD_AMQP}, "mysql": {"url": os.environ["SC_TEST_MYSQL_CONSUMER_URL"]},
            "consumers": [k]}


def write(text):
    path = os.path.join(DIR, suffix())
    with open(path, "w") as f:
        f.write(text)
    return path


def try_(cfg, *files):
    return run_sidecar_cmd(["try", "--consumer", "try-modes", *files], cfg, timeout=60)


CE = config()
b1, b2 = str(uuid.uuid4()), str(uuid.uuid4())
binary = write("# the JS SDK's binary mode, its ce- headers put on AMQP headers\n"
               "content_type: application/json\n"
               f"header ce-specversion: 1.0\nheader ce-id: {b1}\nheader ce-type: ORDER_ACCEPTED\n"
               "header ce-source: ORDER\nheader ce-subject: 1001\nheader ce-eventversion: 2\n"
               "\n{\"orderId\": 1001}\n")
amqp_binding = write("content_type: application/json\n"
                     f"header cloudEvents:specversion: 1.0\nheader cloudEvents:id: {b2}\n"
                     "header cloudEvents:type: ORDER_ACCEPTED\nheader cloudEvents:source: ORDER\n"
                     "header cloudEvents:subject: 1002\nint-header cloudEvents:eventversion: 3\n\n{}")
rc, out = try_(CE, binary, amqp_binding)
ok(rc == 0 and out.count("binary mode, 1 event") == 2 and out.count("outcome: applied") == 2,
   "binary mode: ce- and cloudEvents: headers, both applied (exit 0)", detail=out)
ok(f"id {b1}, type ORDER_ACCEPTED" in out and f"id {b2}, type ORDER_ACCEPTED" in out, "their ids read from the headers")
is_eq(count_in("notification_job", "event_id", [b1, b2]), 0, "and rolled back")

m = [str(uuid.uuid4()) for _ in range(2)]
member = lambda eid, subj: json.dumps({"specversion": "1.0", "id": eid, "type": "ORDER_ACCEPTED", "source": "ORDER",
                                       "subject": subj, "eventversion": 1, "data": {}})
batch = write("[" + ", ".join([member(m[0], "1"), member(m[1], "2"), member(m[0], "1")]) + "]")
rc, out = try_(CE, batch)
ok(rc == 1 and "batch mode, 3 events" in out and "member 2:" in out, "a batch body: each member its own event", detail=out)
ok(out.count("outcome: applied") == 2 and "outcome: duplicate" in out,
   "two applied, the repeated member a duplicate (exit 1)", detail=out)
raw = "nope-" + suffix()
batch_file = write("content_type: application/cloudevents-batch+json\n\n[" + member(str(uuid.uuid4()), "3") +
                   ', {"specversion": "1.0", "id": "%s", "type": "T", "source": "S"}' % raw +
                   ', {"specversion": "1.0", "id": "late", "type": "T", "source": "S", "time": "yesterday"}]')
rc, out = try_(CE, batch_file)
ok(rc == 1 and out.count("outcome: applied") == 2 and
   "outcome: malformed: attribute 'time' ('yesterday') is not an RFC 3339 timestamp" in out,
   "a batch message file with a malformed member: the others apply", detail=out)
ok(f"id {ce_id('S', raw)} (UUIDv5 of source 'S' and id '{raw}'), type T" in out,
   "an id that is not a UUID: shown as the UUIDv5 of its source and id", detail=out)
rc, out = try_(CE, write("content_type: application/cloudevents-batch+json\n\n[]"))
ok(rc == 0 and "batch mode, 0 events" in out, "an empty batch: nothing to do, exit 0", detail=out)
text = write("content_type: text/plain\nheader ce-specversion: 1.0\nheader ce-id: %s\n"
             "header ce-type: T\nheader ce-source: S\n\nhello" % uuid.uuid4())
rc, out = try_(CE, text)
ok(rc == 0 and "binary mode, 1 event" in out and "outcome: applied" in out,
   "binary data that is not JSON (text/plain): an event all the same, its data bytes", detail=out)
rc, out = try_(CE, write("content_type: application/json\n\n" + member(str(uuid.uuid4()), "4")))
ok(rc == 1 and "binary mode, 1 event" in out and "outcome: malformed: no CloudEvents specversion header" in out,
   "application/json without CloudEvents headers: binary mode (AMQP binding 3), no attributes", detail=out)
rc, out = try_(CE, write("content-type application/json\n\n{}"))
ok(rc == 1 and "outcome: malformed: line 1: expected 'NAME: VALUE'" in out, "a message file that does not parse", detail=out)
rc, out = try_(CE, write("colour: blue\n\n{}"))
ok(rc == 1 and "unknown field 'colour'" in out, "an unknown field is named", detail=out)

PLAIN = config(envelope="plain", plain_subject="/orderId")
mid = "order-" + suffix()
plain = write(f"message_id: {mid}\ntype: ORDER_ACCEPTED\ntimestamp: 1764410400\nint-header eventversion: 2\n"
              "\n{\"orderId\": 1001, \"big\": 123456789012345678901234567890}")
rc, out = try_(PLAIN, plain, plain)
ok(rc == 1 and out.count("plain mode, 1 event") == 2, "plain mode", detail=out)
ok(f"id {plain_id(mid)} (UUIDv5 of message_id '{mid}'), type ORDER_ACCEPTED" in out,
   "the id is the message_id's UUIDv5, shown with it", detail=out)
ok(out.count("outcome: applied") == 1 and "outcome: duplicate" in out, "the second time a duplicate", detail=out)
routed = write(f"message_id: {uuid.uuid4()}\nrouting_key: ORDER_ACCEPTED\nint-header eventversion: 1\n\n{{\"orderId\": 7}}")
rc, out = try_(PLAIN, routed)
ok(rc == 0 and "type ORDER_ACCEPTED" in out and "outcome: applied" in out,
   "type from routing_key, source from the first binding's exchange", detail=out)
rc, out = try_(PLAIN, write("type: ORDER_ACCEPTED\n\n{}"))
ok(rc == 1 and "outcome: malformed: no message_id property" in out, "plain without message_id", detail=out)
rc, out = try_(PLAIN, write('{"orderId": 1}'))
ok(rc == 1 and "no message_id property" in out, "a bare JSON file is a body without properties", detail=out)
done()
