"""`sidecar dlq replay` goes back to the dead-lettering consumer's own queue
(default exchange, routing key = queue), never to the original exchange:
another consumer bound to the same exchange, whose consumed_event rows were
purged, must not see the replay and apply its effect a second time. And a
dead-lettered copy keeps no per-message TTL: a publisher's `expiration` does
not make it vanish from the dead-letter queue. A binary-mode dead letter is
listed, shown and replayed by its cloudEvents:id header, never by the "id"
of its data (the body)."""
import uuid

from harness import *
from envelope_lib import ce_id

# A dead-letters FLAKY events (its handler retries them twice; max_attempts
# 2), B consumes every event of the same exchange with the sample handler
# (no effect for other types than ORDER_ACCEPTED, but an applied outcome and
# a consumed_event row).
a = Sidecar(handler=TEST_HANDLER, consumer_extra={"max_attempts": 2, "retry_delays_ms": [200]})
b = Sidecar(exchange=a.exchange)
ok(a.start(), "consumer A started")
ok(b.start(), "consumer B started on the same exchange and binding")
admin = {"url": os.environ["SC_TEST_MYSQL_ADMIN_URL"]}


def applied(sc, eid):
    return [l for l in sc.outcomes("applied") if l.get("event_id") == eid]


def consumed_rows(sc, eid):
    return query("SELECT COUNT(*) FROM consumed_event WHERE consumer_name = %s AND event_id = %s",
                 (sc.name, eid))[0][0]


eid = str(uuid.uuid4())
conn = amqp()
ch = conn.channel()
ch.confirm_delivery()
publish(ch, a.exchange, "FLAKY", event_body(eid, etype="FLAKY", subject="42"), message_id=eid)
conn.close()
ok(wait_until(lambda: queue_depth(a.dlq) == 1 and applied(b, eid), timeout=30),
   "A dead-lettered the event after its attempts, B applied it")
ok(wait_until(lambda: any(l.get("event_id") == eid for l in a.outcomes("dead_lettered")), timeout=10),
   "A logged the dead-letter")
is_eq(consumed_rows(b, eid), 1, "B has its consumed_event row")
# B's bookkeeping is purged (its retention passed); A's DLQ still holds the event.
query("DELETE FROM consumed_event WHERE consumer_name = %s AND event_id = %s", (b.name, eid))

rc, out = run_sidecar_cmd(["dlq", "replay", a.name, "--id", eid], dict(a.config, mysql=admin))
ok(rc == 0 and "replayed 1 of 1" in out, f"dlq replay --id ({out.strip()[-300:]})")
ok(f"queue '{a.queue}'" in out, f"the replay names A's own queue as its target ({out.strip()[-300:]})")
ok(wait_until(lambda: applied(a, eid), timeout=30), "A applied the replayed event")
# A marker published after the replay reaches B through the exchange; B
# takes its queue in order, so once the marker is applied, a replayed copy
# in B's queue would have been applied before it.
marker = str(uuid.uuid4())
conn = amqp()
ch = conn.channel()
ch.confirm_delivery()
publish(ch, a.exchange, "MARKER", event_body(marker, etype="MARKER", subject="1"), message_id=marker)
conn.close()
ok(wait_until(lambda: applied(b, marker) and applied(a, marker), timeout=30), "both consumers applied the marker")
is_eq(len(applied(b, eid)), 1, "B applied the event once: the replay did not reach it")
is_eq(consumed_rows(b, eid), 0, "B has no new consumed_event row for it")
is_eq(len(applied(a, eid)), 1, "A applied it once")
is_eq(count_in("notification_job", "event_id", [eid]), 1, "one effect in all (A's)")
is_eq(applied(a, eid)[0].get("attempt"), 1, "the replay started again at attempt 1")
is_eq(queue_depth(a.dlq), 0, "A's dead-letter queue is empty")

# --- a binary-mode dead letter is named by its cloudEvents:id header -------
# Its body is its data, whose own "id" is no event id: list, show and
# replay --id go by the header (and an id that is not a UUID by the UUIDv5
# the consumer logs, or as written).
bin_id, data_id, raw = str(uuid.uuid4()), str(uuid.uuid4()), "dl-" + suffix()
conn = amqp()
ch = conn.channel()
ch.confirm_delivery()
for hid in (bin_id, raw):
    ch.basic_publish(a.exchange, "FLAKY", json.dumps({"id": data_id, "orderId": 42}).encode(),
                     pika.BasicProperties(content_type="application/json", delivery_mode=2, headers={
                         "cloudEvents:specversion": "1.0", "cloudEvents:id": hid, "cloudEvents:type": "FLAKY",
                         "cloudEvents:source": "urn:shop:orders", "cloudEvents:subject": "43"}))
conn.close()
mapped = ce_id("urn:shop:orders", raw)
ok(wait_until(lambda: queue_depth(a.dlq) == 2, timeout=30), "A dead-lettered both binary-mode events")
rc, out = run_sidecar_cmd(["dlq", "list", a.name], a.config)
ok(rc == 0 and bin_id in out and mapped in out and data_id not in out,
   "dlq list names them by their header ids (a non-UUID one by its UUIDv5), not by their data's id", detail=out)
rc, out = run_sidecar_cmd(["dlq", "show", a.name, "--id", data_id], a.config)
is_eq(rc, 1, "dlq show --id <the data's id> finds nothing")
rc, out = run_sidecar_cmd(["dlq", "show", a.name, "--id", bin_id], a.config)
ok(rc == 0 and out.count("event " + bin_id) == 1, "dlq show --id <the header's id> finds it", detail=out)
rc, out = run_sidecar_cmd(["dlq", "show", a.name, "--id", raw], a.config)
ok(rc == 0 and out.count("event " + mapped) == 1, "dlq show --id <a non-UUID id as written> finds it", detail=out)
for want in (bin_id, mapped):
    rc, out = run_sidecar_cmd(["dlq", "replay", a.name, "--id", want], dict(a.config, mysql=admin))
    ok(rc == 0 and "replayed 1 of 1" in out, f"dlq replay --id {want[:8]}: that one", detail=out)
ok(wait_until(lambda: applied(a, bin_id) and applied(a, mapped), timeout=30), "A applied both replayed events")
is_eq(queue_depth(a.dlq), 0, "A's dead-letter queue is empty again")

# --- a publisher's expiration does not follow the message into the DLQ ---
poison = str(uuid.uuid4())
conn = amqp()
ch = conn.channel()
ch.confirm_delivery()
ch.basic_publish(a.exchange, "POISON", event_body(poison, etype="POISON", subject="9"),
                 pika.BasicProperties(content_type="application/cloudevents+json", delivery_mode=2,
                                      message_id=poison, type="POISON", expiration="2000"))
conn.close()
ok(wait_until(lambda: queue_depth(a.dlq) == 1, timeout=10), "A dead-lettered the expiring message")
t_dead = time.time()
# Watch the DLQ for well past the 2 s the publisher allowed: it must never empty.
vanished = wait_until(lambda: queue_depth(a.dlq) == 0, timeout=3.5, step=0.2)
ok(not vanished and time.time() - t_dead >= 3.0,
   f"still in the DLQ {time.time() - t_dead:.1f} s later, past the publisher's 2 s expiration")
conn = amqp()
ch = conn.channel()
m, props, body = ch.basic_get(a.dlq, auto_ack=False)
ok(m is not None and props.expiration is None and json.loads(body)["id"] == poison,
   f"the DLQ copy carries no expiration (got {props.expiration if m else 'no message in the DLQ'!r})")
conn.close()  # not acked: it stays in the DLQ
is_eq(queue_depth(a.dlq), 1, "the DLQ copy is still there")
is_eq(a.stop(), 0, "A: clean stop")
is_eq(b.stop(), 0, "B: clean stop")
done()
