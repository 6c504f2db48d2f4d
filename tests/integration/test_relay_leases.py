"""Leases: a live lease of another worker is never taken, an expired one is
reclaimed; a late confirm from an old owner cannot mark a row that a new
owner has claimed (set up deterministically by pausing the old owner at the
after-confirm point); an unroutable event is counted and left to its lease."""
from harness import *

clear_outbox()
ex = "leases-" + suffix()
q = bound_queue(ex, "ORDER_ACCEPTED")

live = insert_outbox(1, status="PUBLISHING", lease_owner="other-worker",
                     lease_until_sql="UTC_TIMESTAMP(6) + INTERVAL 1 HOUR")[0]
expired = insert_outbox(1, status="PUBLISHING", lease_owner="dead-worker",
                        lease_until_sql="UTC_TIMESTAMP(6) - INTERVAL 1 SECOND")[0]
pending = insert_outbox(1)[0]
r = Relay(ex, batch=10).start()
wait_until(lambda: count_in("outbox_event", "event_id", [expired, pending], "AND status = 'PUBLISHED'") == 2, timeout=30)
time.sleep(0.5)
is_eq(count_in("outbox_event", "event_id", [expired], "AND status = 'PUBLISHED'"), 1, "an expired lease is reclaimed and published")
is_eq(count_in("outbox_event", "event_id", [pending], "AND status = 'PUBLISHED'"), 1, "a PENDING row is published")
is_eq(query("SELECT status, lease_owner FROM outbox_event WHERE event_id = %s", (live,))[0],
      ("PUBLISHING", "other-worker"), "a live lease of another worker is left alone")
got = [json.loads(b)["id"] for _, _, b in drain_with_keys(q)]
ok(live not in got, "the leased row was not published by this relay")
r.stop()

# Unroutable: mandatory publish, basic.return, row stays PUBLISHING.
clear_outbox()
unroutable = insert_outbox(1, event_type="NOBODY_LISTENS")[0]
r = Relay(ex, batch=10, lease_ms=500).start()
wait_until(lambda: len(r.outcomes("returned")) >= 2, timeout=30)
ret = r.outcomes("returned")
ok(len(ret) >= 2 and all(l["event_id"] == unroutable for l in ret),
   f"unroutable event logged as returned, and retried after its lease ({len(ret)} times)")
is_eq(query("SELECT status FROM outbox_event WHERE event_id = %s", (unroutable,))[0][0], "PUBLISHING",
      "an unroutable event is never marked PUBLISHED")
r.stop()
ok("returned=" in r.text() and "returned=0" not in r.text(), "the stop summary counts returns")

# Late confirm from an old owner.
clear_outbox()
late = insert_outbox(1)[0]
old = Relay(ex, worker_id="relay-old", batch=10, lease_ms=500)
old.start(env={"SIDECAR_FAULT": "relay.after_confirm", "SIDECAR_FAULT_PAUSE_MS": "3000"})
ok(wait_until(lambda: "fault point reached, pausing" in old.text(), timeout=30), "old owner paused after the broker confirm")
time.sleep(0.6)  # its 500 ms lease has expired
is_eq(query("SELECT lease_owner FROM outbox_event WHERE event_id = %s AND lease_until < UTC_TIMESTAMP(6)", (late,)),
      (("relay-old",),), "the old owner's lease has expired")
# A new owner claims it, exactly as a relay's claim would.
query("UPDATE outbox_event SET lease_owner = 'relay-new', lease_until = UTC_TIMESTAMP(6) + INTERVAL 1 HOUR,"
      " publish_attempts = publish_attempts + 1 WHERE event_id = %s AND status = 'PUBLISHING'", (late,))
ok(wait_until(lambda: "fault point resumed" in old.text(), timeout=10), "old owner resumed")
wait_until(lambda: old.outcomes("lease_lost"), timeout=10)
lost = old.outcomes("lease_lost")
ok(len(lost) == 1 and lost[0]["event_id"] == late, "the old owner logged the lost lease", detail=lost)
is_eq(query("SELECT status, lease_owner FROM outbox_event WHERE event_id = %s", (late,))[0],
      ("PUBLISHING", "relay-new"), "the late confirm did not mark the new owner's row")
old.stop()
ok("lease_lost=1" in old.text(), "the stop summary counts the lost lease")
done()
