"""Issue 10.9: a claim error that only shows when the statement runs (1290:
the server went read only, as after a failover) makes the relay back off,
not spin reconnecting; it logs the state change once, not every retry, and
publishes again once the server accepts writes."""
import re

from harness import *

clear_outbox()
ex = "readonly-" + suffix()
q = bound_queue(ex)
r = Relay(ex, batch=20, lease_ms=2000, poll_ms=50).start()
first = insert_outbox(1)
ok(wait_until(lambda: count_in("outbox_event", "event_id", first, "AND status = 'PUBLISHED'") == 1, timeout=30),
   "the relay publishes while the server is writable")


def claim_failures():
    st, body = r.get("/metrics")
    m = re.search(r"^sidecar_relay_claim_failed_total\{[^}]*\} (\d+)$", body, re.M) if st == 200 else None
    return int(m.group(1)) if m else None


is_eq(claim_failures(), 0, "no claim has failed yet")
try:
    query("SET GLOBAL read_only = 1")  # the relay's user has no READ ONLY ADMIN; root has
    ids = insert_outbox(5)
    ok(wait_until(lambda: (claim_failures() or 0) >= 3, timeout=30), "claims fail under read_only, and are retried")
    a = claim_failures()
    time.sleep(3)  # a window to count retries in: the measurement itself, not synchronisation
    b = claim_failures()
    diag(f"claim attempts in 3 s while read only: {b - a}")
    ok(1 <= b - a <= 8, f"retries back off: {b - a} attempts in 3 s (a reconnect storm makes hundreds)")
    is_eq(count_in("outbox_event", "event_id", ids, "AND status = 'PENDING'"), 5, "nothing was claimed meanwhile")
    warns = [l for l in r.lines() if l.get("msg", "").startswith("relay: claim failed")]
    is_eq(len(warns), 1, "the failing state is logged once, not per retry")
    ok(warns and "1290" in warns[0]["msg"], "the line names error 1290", detail=warns)
    ok(r.alive(), "the relay keeps running")
finally:
    query("SET GLOBAL read_only = 0")
ok(wait_until(lambda: count_in("outbox_event", "event_id", ids, "AND status = 'PUBLISHED'") == 5, timeout=60),
   "writable again: the rows are published")
back = [l for l in r.lines() if l.get("msg", "").startswith("relay: database works again")]
is_eq(len(back), 1, "the recovery is logged once")
d = [json.loads(b)["id"] for _, _, b in drain_with_keys(q)]
is_eq(sorted(d), sorted(first + ids), "every event delivered once")
is_eq(r.stop(), 0, "clean stop")
done()
