"""The consumer's repeat windows in every envelope mode: the process dies
after COMMIT and before the ack (SIDECAR_FAULT=consumer.after_commit), and a
COMMIT's reply is lost on the wire (a TCP proxy cuts the connection right
after COMMIT: outcome unknown). Either way the delivery comes back, each of
its events (each member of a batch) meets its claim and is acked as a
duplicate, and every effect exists once."""
from envelope_lib import *

seen_table()
BATCH = "application/cloudevents-batch+json"
PLAIN = {"envelope": "plain", "plain_subject": "/id"}


def structured_member(eid):
    return json.dumps({"specversion": "1.0", "id": eid, "type": "KEEP", "source": "S", "data": {"id": 1}})


def message(mode):
    """(consumer settings, publish kwargs, the event ids it carries)"""
    if mode == "binary":
        eid = str(uuid.uuid4())
        return {}, dict(body='{"id": 1}', content_type="application/json",
                        headers={"ce-specversion": "1.0", "ce-id": eid, "ce-type": "KEEP", "ce-source": "S"}), [eid]
    if mode == "batch":
        ids = [str(uuid.uuid4()) for _ in range(3)]
        return {}, dict(body="[" + ",".join(structured_member(e) for e in ids) + "]", content_type=BATCH), ids
    mid = "repeat-" + suffix()
    return PLAIN, dict(body='{"id": 7}', message_id=mid, type_="KEEP"), [plain_id(mid)]


def effects(ids):
    return [len(seen(e)) for e in ids]


for mode in ("binary", "batch", "plain"):
    # Window 1: dies after COMMIT, before the ack.
    settings, kw, ids = message(mode)
    sc = Sidecar(handler=TEST_HANDLER, consumer_extra=settings)
    ok(sc.start(env={"SIDECAR_FAULT": "consumer.after_commit"}), f"{mode}: sidecar started to die after COMMIT")
    pub = Publisher()
    pub.publish(sc.exchange, "KEEP", **kw)
    pub.close()
    is_eq(sc.wait_exit(30), 86, f"{mode}: it died at consumer.after_commit")
    is_eq((count_in("consumed_event", "event_id", ids), effects(ids)), (len(ids), [1] * len(ids)),
          f"{mode}: claims and effects committed")
    ok(wait_until(lambda: queue_depth(sc.queue) == 1, timeout=10), f"{mode}: the unacked delivery is back in the queue")
    ok(sc.start(), f"{mode}: restarted")
    ok(wait_until(lambda: sorted(outcome_ids(sc, "duplicate")) == sorted(ids), timeout=30),
       f"{mode}: the redelivery is one duplicate per event ({len(ids)})", detail=sc.outcomes("duplicate"))
    is_eq(effects(ids), [1] * len(ids), f"{mode}: no second effect")
    is_eq(queue_depth(sc.queue), 0, f"{mode}: acked")
    is_eq(sc.stop(), 0, f"{mode}: clean stop")

    # Window 2: the COMMIT's reply is lost.
    settings, kw, ids = message(mode)
    proxy = CommitCuttingProxy(int(os.environ["SC_TEST_MYSQL_PORT"]))
    sc = Sidecar(handler=TEST_HANDLER, mysql_url=proxy.url(), consumer_extra=settings)
    ok(sc.start(), f"{mode}: sidecar started through the COMMIT-cutting proxy")
    proxy.armed = 1
    pub = Publisher()
    pub.publish(sc.exchange, "KEEP", **kw)
    pub.close()
    ok(wait_until(lambda: sorted(outcome_ids(sc, "duplicate")) == sorted(ids), timeout=60),
       f"{mode}: after the cut, each event's redelivery is a duplicate", detail=sc.lines()[-10:])
    is_eq(proxy.cuts, 1, f"{mode}: one COMMIT reply was cut")
    is_eq(sorted(outcome_ids(sc, "unknown")), sorted(ids), f"{mode}: its events were logged unknown")
    is_eq(effects(ids), [1] * len(ids), f"{mode}: one effect each")
    is_eq(sc.stop(), 0, f"{mode}: clean stop")
done()
