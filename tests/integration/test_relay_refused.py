"""A message the broker refuses fails its row alone. With the broker's
max_message_size at 1 MiB, 10 rows, one of 2 MiB, then 10 more, claimed in
one batch: RabbitMQ closes the channel (406 PRECONDITION_FAILED, "larger
than configured max size") at the big one. The big row is FAILED with the
broker's reason; the 20 others are PUBLISHED, each once on the queue and
claimed once, within the round: no "connection failed" loop, no lease
waited for. Then messages above one frame that the broker takes, mixed with
two it refuses; then a refused message small enough to go out pipelined
(the relay finds it by sending the unconfirmed ones again one by one)."""
import collections
import re

from harness import *

MIB = 1024 * 1024
LEASE_MS = 2000


def per_id(queue):
    return collections.Counter(json.loads(b)["id"] for _, _, b in drain_with_keys(queue))


def run(label, good, refused, broker_max):
    """Starts a relay over the rows inserted, waits for them, checks what
    every test of this file checks; returns (relay, counts per id in the
    queue)."""
    r = Relay(ex, batch=50, lease_ms=LEASE_MS).start()
    t0 = time.time()
    ok(wait_until(lambda: count_in("outbox_event", "event_id", good, "AND status = 'PUBLISHED'") == len(good)
                  and count_in("outbox_event", "event_id", refused, "AND status = 'FAILED'") == len(refused),
                  timeout=25), f"{label}: the {len(good)} good rows are PUBLISHED, the {len(refused)} refused FAILED")
    took = time.time() - t0
    time.sleep(LEASE_MS / 1000.0 + 0.5)  # a loop would show within a lease
    diag(f"{label}: after {took:.2f} s: "
         + ", ".join(f"{n} {s}" for s, n in query("SELECT status, COUNT(*) FROM outbox_event GROUP BY status")))
    ok(took < LEASE_MS / 1000.0, f"{label}: within one lease ({took:.2f} s): nothing waited for a lease")
    ids = good + refused
    is_eq(query("SELECT MAX(publish_attempts) FROM outbox_event WHERE event_id IN (%s)" % ",".join(["%s"] * len(ids)),
                tuple(ids))[0][0], 1, f"{label}: every row was claimed once")
    seen = per_id(q)
    diag(f"{label}: the queue holds {sum(seen.values())} messages for {len(seen)} ids")
    ok(set(seen) == set(good), f"{label}: the good rows reached the queue, the refused ones did not",
       detail=(set(good) - set(seen), set(seen) - set(good)))
    is_eq(len([l for l in r.lines() if "connection failed" in l.get("msg", "")]), 0,
          f"{label}: no \"connection failed\" line")
    logged = {l["event_id"]: l["msg"] for l in r.outcomes("invalid")}
    for eid in refused:
        why = logged.get(eid, "")
        ok("refused by the broker" in why and "406 PRECONDITION_FAILED" in why
           and f"larger than configured max size {broker_max}" in why,
           f"{label}: the refused row is logged FAILED with the broker's reason", detail=why)
    st, metrics = r.get("/metrics")
    m = re.search(r"^sidecar_relay_invalid_total\{[^}]*\} (\d+)$", metrics, re.M)
    is_eq(int(m.group(1)) if m else None, len(refused), f"{label}: counted in sidecar_relay_invalid_total")
    is_eq(r.stop(), 0, f"{label}: clean stop")
    return r, seen


before = broker_max_message_size()
ok(before is not None and broker_max_message_size(MIB) == MIB,
   f"the broker's max_message_size is 1 MiB for this test (it was {before})")
try:
    ex = "refused-" + suffix()
    q = bound_queue(ex)

    # --- the report: 10 rows, one of 2 MiB, 10 more --------------------------
    clear_outbox()
    good = insert_outbox(10)
    big = insert_sized(2 * MIB)
    good += insert_outbox(10)
    r, seen = run("2 MiB among 20", good, [big], MIB)
    ok(all(c == 1 for c in seen.values()), "each good row once on the queue: none was in doubt", detail=seen)

    # --- above one frame: alone on the channel, taken or refused ---------------
    clear_outbox()
    good = insert_outbox(3) + [insert_sized(300 * 1024)] + insert_outbox(2)
    refused = [insert_sized(2 * MIB)]
    good += [insert_sized(300 * 1024)]
    refused += [insert_sized(2 * MIB)]
    good += insert_outbox(3)
    r, seen = run("300 KiB taken, 2 MiB refused", good, refused, MIB)
    ok(all(c == 1 for c in seen.values()), "each good row once on the queue", detail=seen)

    # --- refused, yet pipelined: found by sending each again alone -----------
    LIMIT = 64 * 1024
    ok(broker_max_message_size(LIMIT) == LIMIT, "the broker's max_message_size is 64 KiB now")
    clear_outbox()
    before_it = insert_outbox(5)
    mid = insert_sized(100 * 1024)  # below the 128 KiB that go alone
    after_it = insert_outbox(5)
    r, seen = run("100 KiB pipelined", before_it + after_it, [mid], LIMIT)
    ok(any("each is sent again alone" in l.get("msg", "") for l in r.lines()),
       "the relay says it sends the unconfirmed ones again one by one")
    ok(all(seen[e] == 1 for e in after_it), "the rows behind the refused one are on the queue once", detail=seen)
    diag("the rows before it (sent with it, unconfirmed, sent again): "
         + ", ".join(str(seen[e]) for e in before_it) + " copies")
    clear_outbox()
finally:
    ok(broker_max_message_size(before or 134217728) == (before or 134217728),
       "the broker's max_message_size restored")
done()
