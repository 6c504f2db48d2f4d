"""relay.ordering per_aggregate and a message the broker refuses (its
max_message_size at 1 MiB, the message 2 MiB): the row is FAILED with the
broker's reason and holds the rest of its aggregate, as any FAILED row
does (the log line says so, sidecar_relay_held_aggregates counts it); the
other aggregates flow, each event once. Repaired (a smaller payload) and
set PENDING, it is published, then the rest of its aggregate, in order."""
import collections
import re

from harness import *

MIB = 1024 * 1024


def insert(aggregate_id, n):
    """n small events of one aggregate, in created_at order."""
    ids = []
    for _ in range(n):
        ids.append(insert_sized(40, aggregate_id=aggregate_id))
        time.sleep(0.002)  # created_at apart
    return ids


def status(ids):
    return [dict(query("SELECT event_id, status FROM outbox_event WHERE event_id IN (%s)"
                       % ",".join(["%s"] * len(ids)), tuple(ids))).get(e) for e in ids]


before = broker_max_message_size()
ok(before is not None and broker_max_message_size(MIB) == MIB,
   f"the broker's max_message_size is 1 MiB for this test (it was {before})")
try:
    clear_outbox()
    ex = "refused-order-" + suffix()
    q = bound_queue(ex)
    a = insert("held", 1)
    big = insert_sized(2 * MIB, aggregate_id="held")
    time.sleep(0.002)
    behind = insert("held", 3)
    others = {agg: insert(agg, 4) for agg in ("flow-1", "flow-2")}
    flowing = a + [e for ids in others.values() for e in ids]

    r = Relay(ex, batch=50, lease_ms=2000, poll_ms=50)
    r.config["relay"]["ordering"] = "per_aggregate"
    with open(r.config_path, "w") as f:
        json.dump(r.config, f)
    r.start()
    ok(wait_until(lambda: count_in("outbox_event", "event_id", flowing, "AND status = 'PUBLISHED'") == len(flowing)
                  and status([big]) == ["FAILED"], timeout=30),
       "the other aggregates and the event before the refused one are PUBLISHED; the refused one FAILED")
    time.sleep(2.5)  # a lease: nothing behind it moves
    is_eq(status(behind), ["PENDING"] * 3, "the 3 events behind it are held PENDING")
    is_eq(query("SELECT MAX(publish_attempts) FROM outbox_event WHERE event_id = %s", (big,))[0][0], 1,
          "the refused row was claimed once")
    logged = {l["event_id"]: l["msg"] for l in r.outcomes("invalid")}
    why = logged.get(big, "")
    ok("refused by the broker" in why and "406 PRECONDITION_FAILED" in why
       and "larger than configured max size" in why and "aggregate ORDER/held is held" in why,
       "logged FAILED with the broker's reason, saying its aggregate is held", detail=why)
    ok(not [l for l in r.lines() if "connection failed" in l.get("msg", "")], "no \"connection failed\" line")
    port = r.http_port()
    ok(wait_until(lambda: metric_sum(port, r"^sidecar_relay_held_aggregates\{[^}]*\} (\d+)$") == 1, timeout=15),
       "sidecar_relay_held_aggregates counts the held aggregate")
    seen = [json.loads(b) for _, _, b in drain_with_keys(q)]
    counts = collections.Counter(m["id"] for m in seen)
    ok(set(counts) == set(flowing) and all(c == 1 for c in counts.values()),
       "every flowing event once on the queue, nothing of the held aggregate after the refused one",
       detail=counts)
    for agg, ids in others.items():
        is_eq([m["id"] for m in seen if m["subject"] == agg], ids, f"aggregate {agg} in order")

    # --- the FAILED-row procedure: repair, set PENDING ----------------------
    query("UPDATE outbox_event SET payload = '{\"blob\":\"repaired\"}', status = 'PENDING' "
          "WHERE event_id = %s AND status = 'FAILED'", (big,))
    ok(wait_until(lambda: status([big] + behind) == ["PUBLISHED"] * 4, timeout=30),
       "repaired and set PENDING: it is published, then the 3 behind it")
    is_eq([json.loads(b)["id"] for _, _, b in drain_with_keys(q)], [big] + behind,
          "the held aggregate's events reach the queue in order, once each")
    is_eq(r.stop(), 0, "clean stop")
    clear_outbox()
finally:
    ok(broker_max_message_size(before or 134217728) == (before or 134217728),
       "the broker's max_message_size restored")
done()
