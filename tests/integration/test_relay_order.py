"""relay.ordering "per_aggregate" end to end against real MariaDB and RabbitMQ:
two relays over 200 aggregates x 20 events (two of each aggregate's events
share one created_at, ordered by event_id), with a confirm timeout (one
relay's broker connection stalled in a proxy), nacks (a second queue with
x-overflow reject-publish runs full), one relay killed with -9 mid-run, and
one aggregate whose head is unroutable (basic.return on every lease). Read off
the queue with a plain AMQP client: per aggregate, the first copies come in
strictly increasing version order, none missing; every message carries
x-ordering-key = aggregate_id; the blocked aggregate holds only itself and,
once a queue is bound for its head, drains in order too."""
import datetime
import sys

from harness import *

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "nemesis"))
from proxy import Proxy  # noqa: E402

AGGS, VERSIONS = 200, 20
clear_outbox()
ex = "ex-order-" + suffix()
q = bound_queue(ex, "ORDER.#")
trap = "trap-" + suffix()  # nacks: full at TRAP_MAX, reject-publish
TRAP_MAX = 1500
conn = amqp()
ch = conn.channel()
ch.queue_declare(trap, durable=True, arguments={"x-max-length": TRAP_MAX, "x-overflow": "reject-publish"})
ch.queue_bind(trap, ex, "ORDER.#")
conn.close()

# Events, interleaved across aggregates in time; versions 10 and 11 of each
# aggregate share a created_at and are ordered by event_id.
base = datetime.datetime.utcnow() - datetime.timedelta(hours=1)
rows, version_of = [], {}
for v in range(1, VERSIONS + 1):
    for a in range(AGGS):
        t = base + datetime.timedelta(seconds=10 if v == 11 else v, milliseconds=a)
        rows.append([str(uuid.uuid4()), f"agg-{a}", v, t])
by_agg = {}
for r_ in rows:
    by_agg.setdefault(r_[1], []).append(r_)
for a, rs in by_agg.items():  # the tie: version 10 gets the smaller event_id
    e10, e11 = rs[9], rs[10]
    lo, hi = sorted([e10[0], e11[0]])
    e10[0], e11[0] = lo, hi
blocked = [[str(uuid.uuid4()), "blocked", v, base + datetime.timedelta(seconds=v)] for v in range(1, 7)]
with admin_db() as c, c.cursor() as cur:
    cur.executemany(
        "INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version, payload,"
        " status, created_at) VALUES (%s, 'ORDER', %s, %s, %s, %s, 'PENDING', %s)",
        [(e, a, "UNROUTED" if a == "blocked" and v == 1 else "ORDER.V", v, json.dumps({"v": v}),
          t.strftime("%Y-%m-%d %H:%M:%S.%f")) for e, a, v, t in rows + blocked])
for e, a, v, _ in rows + blocked:
    version_of[e] = (a, v)
total = len(rows)

amqp_port = int(os.environ["SC_TEST_AMQP_URL"].rsplit(":", 1)[1].split("/")[0])
px = Proxy("amqp-b", amqp_port)


def relay(name, via_proxy=False):
    r = Relay(ex, worker_id=name, batch=50, lease_ms=2000, poll_ms=50)
    r.config["relay"]["ordering"] = "per_aggregate"
    if via_proxy:
        r.config["amqp"]["url"] = os.environ["SC_TEST_AMQP_URL"].replace(f":{amqp_port}/", f":{px.port}/")
        r.config["amqp"]["heartbeat_s"] = 10
    with open(r.config_path, "w") as f:
        json.dump(r.config, f)
    return r


def published():
    return query("SELECT COUNT(*) FROM outbox_event WHERE status = 'PUBLISHED'")[0][0]


ra, rb = relay("order-a"), relay("order-b", via_proxy=True)
ra.start()
rb.start()
ok(wait_until(lambda: published() >= 300, timeout=60), "two per_aggregate relays publish")
px.stall(1.5)  # more than confirm_timeout_ms (666): b's batch is unconfirmed
ok(wait_until(lambda: published() >= 1000, timeout=90), "past the stall")
held_by_a = lambda: [x[0] for x in query("SELECT event_id FROM outbox_event WHERE status = 'PUBLISHING'"
                                         " AND lease_owner = 'order-a' AND aggregate_id <> 'blocked'")]
wait_until(lambda: held_by_a(), timeout=30, step=0.01)
ra.kill9()
orphans = held_by_a()  # leased to a dead relay: published again only after their lease
ok(orphans, f"relay a killed with -9 holding {len(orphans)} leased rows")
time.sleep(1)
ra.start()
nacked = wait_until(lambda: ra.outcomes("nacked") or rb.outcomes("nacked"), timeout=90)
ok(nacked, f"the full reject-publish queue nacked ({published()} published by then)")
conn = amqp()
conn.channel().queue_delete(trap)  # deleted, not purged: the repeats would fill it again
conn.close()
ok(wait_until(lambda: published() >= total + 0, timeout=180), f"every event of the 200 aggregates PUBLISHED ({published()})")
is_eq(count_in("outbox_event", "event_id", orphans, "AND status = 'PUBLISHED'"), len(orphans),
      "the killed relay's rows were taken over after their lease and published")
unconfirmed = ra.outcomes("unconfirmed") + rb.outcomes("unconfirmed")
ok(unconfirmed, f"the stall made confirm timeouts ({len(unconfirmed)})")
ret = ra.outcomes("returned") + rb.outcomes("returned")
ok(ret, f"the blocked aggregate's head was returned ({len(ret)} times)")
st = dict(query("SELECT status, COUNT(*) FROM outbox_event WHERE aggregate_id = 'blocked' GROUP BY status"))
is_eq(st, {"PUBLISHING": 1, "PENDING": 5}, "the blocked aggregate: head left PUBLISHING, the rest held PENDING")


def check_order(msgs, aggs, label):
    first, seq_bad, hdr_bad, repeats = {}, [], [], 0
    for _, props, body in msgs:
        eid = props.message_id
        a, v = version_of[eid]
        if (props.headers or {}).get("x-ordering-key") != a:
            hdr_bad.append(eid)
        if eid in first.setdefault(a, {}):
            repeats += 1
            continue
        seen = first[a]
        if seen and max(seen.values()) >= v:
            seq_bad.append((a, sorted(seen.values())[-3:], v))
        seen[eid] = v
    missing = [a for a in aggs if sorted(first.get(a, {}).values()) != list(range(1, len(version_of_by_agg[a]) + 1))]
    ok(not seq_bad, f"{label}: per aggregate, first copies in strictly increasing version order", detail=seq_bad[:10])
    ok(not missing, f"{label}: none missing", detail=missing[:10])
    ok(not hdr_bad, f"{label}: every message has x-ordering-key = its aggregate_id", detail=hdr_bad[:5])
    return repeats


version_of_by_agg = {}
for e, (a, v) in version_of.items():
    version_of_by_agg.setdefault(a, []).append(v)
msgs = drain_with_keys(q)
got_blocked = [m for m in msgs if version_of[m[1].message_id][0] == "blocked"]
is_eq(len(got_blocked), 0, "nothing of the blocked aggregate reached the queue")
repeats = check_order(msgs, [f"agg-{a}" for a in range(AGGS)], "200 x 20")
diag(f"{len(msgs)} messages for {total} events: {repeats} repeats (confirm timeouts, nacks, the kill),"
     f" {len(ra.outcomes('nacked')) + len(rb.outcomes('nacked'))} nacked, {len(unconfirmed)} unconfirmed,"
     f" {len(ret)} returned")

# The operator binds a queue for the head's routing key: the aggregate drains, in order.
conn = amqp()
conn.channel().queue_bind(q, ex, "UNROUTED")
conn.close()
ok(wait_until(lambda: query("SELECT COUNT(*) FROM outbox_event WHERE aggregate_id = 'blocked'"
                            " AND status = 'PUBLISHED'")[0][0] == 6, timeout=30),
   "once its head is routable, the blocked aggregate is published")
check_order(drain_with_keys(q), ["blocked"], "the blocked aggregate")
# A FAILED row holds its aggregate: said in the log and the gauge; repaired,
# the aggregate goes on in order.
pois = [str(uuid.uuid4()) for _ in range(3)]
with admin_db() as c, c.cursor() as cur:
    for v, (eid, payload) in enumerate(zip(pois, ['{"v":1}', '{"a":1,"a":2}', '{"v":3}']), 1):
        version_of[eid] = ("poisoned", v)
        cur.execute("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version,"
                    " payload, status, created_at) VALUES (%s, 'ORDER', 'poisoned', 'ORDER.V', %s, %s, 'PENDING',"
                    " UTC_TIMESTAMP(6) + INTERVAL %s SECOND)", (eid, v, payload, v))
version_of_by_agg["poisoned"] = [1, 2, 3]
st = lambda: [query("SELECT status FROM outbox_event WHERE event_id = %s", (e,))[0][0] for e in pois]
ok(wait_until(lambda: st() == ["PUBLISHED", "FAILED", "PENDING"], timeout=30),
   f"a row breaking an envelope rule is FAILED, the event behind it held PENDING ({st()})")
held_lines = [l for l in ra.lines() + rb.lines() if l.get("event_id") == pois[1] and "held" in l.get("msg", "")]
ok(held_lines and "ORDER/poisoned" in held_lines[0]["msg"], "the FAILED row's log line says its aggregate is held",
   detail=held_lines)
gauge = lambda: max(metric_sum(x.http_port(), r"^sidecar_relay_held_aggregates\{[^}]*\} (\d+)$", -1) for x in (ra, rb))
ok(wait_until(lambda: gauge() == 1, timeout=20), f"sidecar_relay_held_aggregates counts it ({gauge()})")
time.sleep(1)  # a claim or two more: the event behind the FAILED row stays held
is_eq(st()[2], "PENDING", "still held")
query("UPDATE outbox_event SET payload = '{\"v\":2}', status = 'PENDING' WHERE event_id = %s", (pois[1],))
ok(wait_until(lambda: st() == ["PUBLISHED"] * 3, timeout=30), "repaired and set PENDING: the aggregate goes on")
check_order(drain_with_keys(q), ["poisoned"], "the repaired aggregate")
ok(wait_until(lambda: gauge() == 0, timeout=20), "and the gauge goes back to 0")
is_eq(ra.stop(), 0, "relay a stops cleanly")
is_eq(rb.stop(), 0, "relay b stops cleanly")
conn = amqp()
ch = conn.channel()
ch.queue_delete(q)
conn.close()
clear_outbox()
done()
