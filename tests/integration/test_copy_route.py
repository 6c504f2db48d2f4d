"""Every copy the consumer or `sidecar dlq replay` publishes keeps the route
the event was first published with (x-sidecar-original-exchange and
-routing-key), and the consumer reads a copy back as the same event: a plain
message takes its type from that routing key and its source from that
exchange. Run for each envelope mode (structured, binary, plain) against each
kind of copy: a retry through a delay queue, a dead letter (of the original,
of a retry copy, of a copy sent behind a replay), the copy sent behind a
key's replay, and the replays (--all, --key), ordered with one partition and
with two. (The copy sent behind a replay once went without the route: a
plain one came back "malformed: no source" (or "no type" through the
partitions' exchange), and the key stayed held behind it for good.)"""
import os
import tempfile

from envelope_lib import *
from ordering_common import held_row

seen_table()
SOURCE = "urn:route-test"


def message(mode, etype, eid, key, version):
    """(routing key, body, content_type, type property, headers) of one event."""
    h = {"x-ordering-key": key}
    if mode == "structured":
        body = json.dumps({"specversion": "1.0", "id": eid, "type": etype, "source": SOURCE,
                           "subject": key, "eventversion": version, "data": {"k": key}})
        return etype, body, "application/cloudevents+json", etype, h
    if mode == "binary":
        h.update({"ce-specversion": "1.0", "ce-id": eid, "ce-type": etype, "ce-source": SOURCE,
                  "ce-subject": key, "ce-eventversion": version})
        return etype, json.dumps({"k": key}), "application/json", None, h
    # plain: no type property, so the type is the routing key; the source is the exchange
    h["eventversion"] = version
    return etype, json.dumps({"k": key}), "application/json", None, h


def send(sc, mode, etype, key, version):
    eid = str(uuid.uuid4())
    rk, body, ct, t, h = message(mode, etype, eid, key, version)
    pub = Publisher()
    pub.publish(sc.exchange, rk, body, content_type=ct, message_id=eid, type_=t, headers=h)
    pub.close()
    return eid


def expect(sc, mode, etype, key, version):
    return (etype, sc.exchange if mode == "plain" else SOURCE, key, version)


def applied_as(eid):
    rows = seen(eid)
    return [(r["type"], r["source"], r["subject"], r["eventversion"]) for r in rows]


def peek(queue):
    """Every message of queue as (properties, body), left in the queue."""
    conn = amqp()
    ch = conn.channel()
    got = []
    while True:
        m, p, b = ch.basic_get(queue, auto_ack=False)
        if m is None:
            break
        got.append((p, b))
    conn.close()  # unacked: back in the queue
    return got


def route_of(props):
    return (header(props, "x-sidecar-original-exchange"),
            header(props, "x-sidecar-original-routing-key"))


def dlq_copy(sc, eid, n=1):
    """The DLQ copy of eid once the DLQ holds n messages (waited for)."""
    wait_until(lambda: queue_depth(sc.dlq) >= n, timeout=60)
    for p, b in peek(sc.dlq):
        if p.message_id == eid:
            return p
    return None


def consumer_config(mode, **extra):
    cfg = {"max_attempts": 2, "retry_delays_ms": [200]}
    if mode == "plain":
        cfg.update({"envelope": "plain", "plain_subject": "/k"})
    cfg.update(extra)
    return cfg


def unordered(mode):
    tag = f"{mode}, unordered"
    sc = Sidecar(handler=TEST_HANDLER, consumer_extra=consumer_config(mode))
    ok(sc.start(), f"{tag}: consumer started")
    k = "u-" + suffix()
    once = send(sc, mode, "KEEP_FLAKY1", k, 1)    # a retry copy, then applied
    twice = send(sc, mode, "KEEP_FLAKY2", k, 2)   # a retry copy, dead-lettered from it
    ok(wait_until(lambda: seen(once), timeout=60), f"{tag}: the retry copy applied")
    is_eq(applied_as(once), [expect(sc, mode, "KEEP_FLAKY1", k, 1)],
          f"{tag}, retry copy: read back as the same event (type, source, subject, version)")
    p = dlq_copy(sc, twice)
    is_eq(route_of(p) if p else None, (sc.exchange, "KEEP_FLAKY2"),
          f"{tag}, dead letter of a retry copy: the original exchange and routing key")
    rc, out = run_sidecar_cmd(["dlq", "replay", sc.name, "--all"], sc.config)
    ok(rc == 0 and "replayed 1 of 1" in out, f"{tag}: dlq replay --all", (rc, out))
    ok(wait_until(lambda: seen(twice), timeout=60), f"{tag}: the replayed copy applied")
    is_eq(applied_as(twice), [expect(sc, mode, "KEEP_FLAKY2", k, 2)],
          f"{tag}, replay --all copy: read back as the same event")
    malformed = [l for l in sc.lines() if l.get("outcome") == "malformed"]
    ok(not malformed, f"{tag}: no copy malformed", malformed)
    sc.stop()


def ordered(mode, partitions):
    tag = f"{mode}, ordered, partitions {partitions}"
    block = os.path.join(tempfile.mkdtemp(prefix="sc-route-"), "block")
    open(block, "w").close()
    # prefetch 1: an event held while its key's replay is in flight cannot
    # wait in hand for the replay's copies, so it is sent behind them.
    cfg = consumer_config(mode, workers=1, prefetch=1, max_attempts=1,
                          ordering={"key": "subject", "partitions": partitions})
    sc = Sidecar(handler=TEST_HANDLER, env={"SC_TEST_BLOCK_FILE": block}, consumer_extra=cfg)
    ok(sc.start(), f"{tag}: consumer started")
    k = "o-" + suffix()
    v1 = send(sc, mode, "KEEP_BLOCKED", k, 1)
    ok(wait_until(lambda: held_row(sc.name, k), timeout=60), f"{tag}: v1 dead-lettered, the key held")
    p = dlq_copy(sc, v1)
    is_eq(route_of(p) if p else None, (sc.exchange, "KEEP_BLOCKED"),
          f"{tag}, dead letter: the original exchange and routing key")
    os.unlink(block)
    sc.stop()
    v2 = send(sc, mode, "KEEP_FLAKY1", k, 2)
    rc, out = run_sidecar_cmd(["dlq", "replay", sc.name, "--key", k], sc.config)
    ok(rc == 0 and "replayed 1 of 1" in out, f"{tag}: replay --key names a replay of v1", (rc, out))
    # v2 comes first, is held while the replay is in flight and goes behind
    # v1's copy; v1' is applied; v2' fails once and is dead-lettered.
    ok(sc.start(), f"{tag}: consumer restarted")
    ok(wait_until(lambda: seen(v1), timeout=60), f"{tag}: the replayed v1 applied")
    is_eq(applied_as(v1), [expect(sc, mode, "KEEP_BLOCKED", k, 1)],
          f"{tag}, replay --key copy: read back as the same event")
    ok(wait_until(lambda: any(l.get("outcome") == "held" and l.get("event_id") == v2
                              for l in sc.lines()), timeout=30),
       f"{tag}: v2 sent behind the replay")
    p = dlq_copy(sc, v2)
    is_eq(route_of(p) if p else None, (sc.exchange, "KEEP_FLAKY1"),
          f"{tag}, dead letter of the copy sent behind the replay: the original route")
    ok(p is not None and "held behind" not in (header(p, "x-sidecar-reason") or "")
       and "malformed" not in (header(p, "x-sidecar-reason") or ""),
       f"{tag}: that copy ran (its handler's answer dead-lettered it)",
       header(p, "x-sidecar-reason") if p else None)
    rc, out = run_sidecar_cmd(["dlq", "replay", sc.name, "--key", k], sc.config)
    ok(rc == 0 and "replayed 1 of 1" in out, f"{tag}: replay --key of v2", (rc, out))
    ok(wait_until(lambda: seen(v2) and held_row(sc.name, k) is None, timeout=60),
       f"{tag}: v2 applied, the key free", (applied_as(v2), held_row(sc.name, k)))
    is_eq(applied_as(v2), [expect(sc, mode, "KEEP_FLAKY1", k, 2)],
          f"{tag}, replay of a copy sent behind a replay: read back as the same event")
    malformed = [l for l in sc.lines() if l.get("outcome") == "malformed"]
    ok(not malformed, f"{tag}: no copy malformed", malformed)
    sc.stop()


for mode in ("structured", "binary", "plain"):
    unordered(mode)
    for partitions in (1, 2):
        ordered(mode, partitions)
done()
