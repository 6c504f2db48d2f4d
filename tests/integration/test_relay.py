"""The relay publishes every PENDING row as the contract's CloudEvents message
and marks it PUBLISHED; three relays at once, one killed -9 and one crashing
after the confirm, still publish everything, with the repeats counted."""
import collections

from harness import *

clear_outbox()
ex = "outbox-" + suffix()
q = bound_queue(ex)

# --- hundreds of rows, each message checked field by field against its row ---
N = 300
ids = insert_outbox(N)
rows = {r[0]: r for r in query(
    "SELECT event_id, aggregate_type, aggregate_id, event_type, event_version, payload,"
    " DATE_FORMAT(created_at, '%Y-%m-%dT%H:%i:%s.%fZ') FROM outbox_event")}
r1 = Relay(ex, batch=40).start()
wait_until(lambda: count_in("outbox_event", "event_id", ids, "AND status = 'PUBLISHED'") == N, timeout=60)
is_eq(count_in("outbox_event", "event_id", ids, "AND status = 'PUBLISHED'"), N, "every row PUBLISHED")
is_eq(count_in("outbox_event", "event_id", ids, "AND published_at IS NOT NULL AND lease_owner IS NULL AND lease_until IS NULL"),
      N, "published_at set, lease cleared")
msgs = drain_with_keys(q)
is_eq(len(msgs), N, "one message per row")
bad = []
for rk, props, body in msgs:
    ev = json.loads(body)
    row = rows.get(ev.get("id"))
    if row is None:
        bad.append(("unknown id", ev.get("id")))
        continue
    eid, atype, aid, etype, ver, payload, created = row
    want = {"specversion": "1.0", "id": eid, "type": etype, "source": atype, "subject": aid,
            "time": created, "eventversion": ver, "datacontenttype": "application/json",
            "data": json.loads(payload)}
    if ev != want:
        bad.append(("body", ev, want))
    if rk != etype:
        bad.append(("routing key", rk))
    if (props.content_type, props.delivery_mode, props.message_id, props.type) != \
            ("application/cloudevents+json", 2, eid, etype):
        bad.append(("properties", props))
ok(not bad, "every message matches its row field by field (body, routing key, properties)", detail=bad[:5])
ok(r1.alive(), "the relay keeps running when idle")
is_eq(r1.stop(), 0, "SIGTERM: clean exit 0")
ok("published=300" in r1.text(), "the stop summary counts 300 published")

# --- three relays over thousands of rows; one killed -9, one crashes after a confirm ---
clear_outbox()
q2 = bound_queue(ex)
drain(q)
N2 = 3000
ids2 = insert_outbox(N2)
relays = [Relay(ex, batch=50, lease_ms=1500) for _ in range(3)]
relays[0].start()
relays[1].start(env={"SIDECAR_FAULT": "relay.after_confirm:4"})
# The victim stops right after committing its 3rd claim (a pause at the
# after-claim point), so the kill -9 provably hits a relay holding a lease.
relays[2].start(env={"SIDECAR_FAULT": "relay.after_claim:3", "SIDECAR_FAULT_PAUSE_MS": "120000"})
ok(wait_until(lambda: "fault point reached, pausing" in relays[2].text(), timeout=60),
   "the victim committed a claim and stopped before publishing it")
victim_rows = [r[0] for r in query("SELECT event_id FROM outbox_event WHERE status = 'PUBLISHING' AND lease_owner = %s",
                                    (relays[2].worker_id,))]
ok(len(victim_rows) > 0, f"the victim holds a lease on {len(victim_rows)} rows when it is killed")
relays[2].kill9()
is_eq(relays[1].wait_exit(60), 86, "one relay crashed after a broker confirm, before marking")
wait_until(lambda: count_in("outbox_event", "event_id", ids2, "AND status = 'PUBLISHED'") == N2, timeout=120)
is_eq(count_in("outbox_event", "event_id", ids2, "AND status = 'PUBLISHED'"), N2, "every row PUBLISHED by the survivor")
is_eq(count_in("outbox_event", "event_id", victim_rows, "AND status = 'PUBLISHED' AND publish_attempts >= 2"),
      len(victim_rows), "the killed relay's leased rows were reclaimed after their lease and published")
deliveries = collections.Counter(json.loads(b)["id"] for _, _, b in drain_with_keys(q2))
missing = [i for i in ids2 if deliveries[i] == 0]
is_eq(len(missing), 0, "every event delivered at least once")
repeats = sum(c - 1 for c in deliveries.values() if c > 1)
diag(f"deliveries {sum(deliveries.values())} for {N2} events: {repeats} repeats")
ok(repeats >= 1, f"the crash after the confirm produced repeats ({repeats}), delivered again by event id")
is_eq(set(deliveries) - set(ids2), set(), "no message for an unknown id")
is_eq(relays[0].stop(), 0, "survivor stops cleanly")

# --- crash after the claim, before any publish: the rows wait out their lease ---
clear_outbox()
q3 = bound_queue(ex)
ids3 = insert_outbox(30)
crasher = Relay(ex, batch=10, lease_ms=1000).start(env={"SIDECAR_FAULT": "relay.after_claim"})
is_eq(crasher.wait_exit(30), 86, "a relay died right after committing its claim")
claimed = count_in("outbox_event", "event_id", ids3, "AND status = 'PUBLISHING'")
is_eq(claimed, 10, "its 10 rows are PUBLISHING under its lease, nothing published")
t0 = time.time()
survivor = Relay(ex, batch=10, lease_ms=1000).start()
wait_until(lambda: count_in("outbox_event", "event_id", ids3, "AND status = 'PUBLISHED'") == 30, timeout=30)
is_eq(count_in("outbox_event", "event_id", ids3, "AND status = 'PUBLISHED'"), 30,
      "after the lease expired another relay reclaimed and published them")
d3 = collections.Counter(json.loads(b)["id"] for _, _, b in drain_with_keys(q3))
ok(all(d3[i] == 1 for i in ids3), "each delivered exactly once (nothing was published before the crash)")
survivor.stop()
done()
