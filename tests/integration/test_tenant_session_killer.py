"""A delivery that ends every database session it runs in (here a handler
statement the server kills its own session for) is the delivery's fault,
not the tenant's: with tenants it is blamed on the second loss under it, its
retries spend attempts, and it is dead-lettered at max_attempts with the
reason, while its tenant's other events (in the same batches) are applied
once each and the other tenant never waits. Before the fix such a delivery
waited in hand with its tenant counted as down, came back, ended the next
session too, and held its tenant down for good, attempts unchanged."""

from harness import *
from tenants_common import *

sfx = suffix()
A, B = "ka_" + sfx, "kb_" + sfx
make_tenant_db(A)
make_tenant_db(B)


sc = Sidecar(handler=TEST_HANDLER,
             consumer_extra={"prefetch": 32, "batch_max": 8, "max_attempts": 2, "retry_delays_ms": [300],
                             "db_outage_hold_ms": 60000},
             extra={"tenants": {"key": "extension:tenant", "database_url": tenant_url(),
                                "max_connections": 4, "idle_close_ms": 60000}})
ok(sc.start(), "consumer with tenants and the test handler started")

killer = str(uuid.uuid4())
a_ids = [str(uuid.uuid4()) for _ in range(10)]
b_ids = [str(uuid.uuid4()) for _ in range(10)]
# The killer in the middle of A's events, B's interleaved: they share batches.
triples = [(e, A, "ORDER_ACCEPTED") for e in a_ids[:5]] + [(killer, A, "KILL_SESSION")]
triples += [(e, A, "ORDER_ACCEPTED") for e in a_ids[5:]]
triples = [x for pair in zip(triples, [(e, B, "ORDER_ACCEPTED") for e in b_ids] + [None]) for x in pair if x]
send_tenant_events(sc.exchange, triples)

ok(wait_until(lambda: tenant_count(B, "notification_job", b_ids) == 10, timeout=30),
   "the other tenant's 10 events are applied", detail=sc.text()[-2000:])
ok(wait_until(lambda: tenant_count(A, "notification_job", a_ids) == 10, timeout=60),
   "the killer's own tenant's 10 other events are applied too", detail=sc.text()[-3000:])
dead = []
ok(wait_until(lambda: dead.extend(drain(sc.dlq)) or any(p.message_id == killer for p, _ in dead), timeout=60),
   "the session killer is dead-lettered", detail=sc.text()[-3000:])
reason = next(((p.headers or {}).get("x-sidecar-reason", b"") for p, _ in dead if p.message_id == killer), b"")
reason = reason.decode() if isinstance(reason, bytes) else reason
ok("again for this delivery on a new database session" in reason, f"with the reason naming it ({reason[:160]})")

lines = sc.lines()
blamed = [l for l in lines if l.get("event_id") == killer and "counted as an attempt" in l.get("msg", "")]
ok(len(blamed) >= 1, f"blamed on the second loss under it ({len(blamed)} times)")
retried = [l for l in lines if l.get("event_id") == killer and l.get("outcome") == "retried"]
is_eq(len(retried), 1, "its retry spent an attempt (max_attempts 2: one retry, then the DLQ)")
is_eq(tenant_count(A, "consumed_event", [killer]), 0, "and it has no claim in its tenant's database")
is_eq(tenant_count(A, "consumed_event", a_ids), 10, "each of A's others claimed once")
is_eq(tenant_count(B, "consumed_event", b_ids), 10, "each of B's claimed once")
down_b = [l for l in lines if B in l.get("msg", "") and "down" in l.get("msg", "")]
is_eq(len(down_b), 0, "the other tenant never counted as down")
is_eq(sc.stop(), 0, "stops cleanly")
drop_tenant_db(A)
drop_tenant_db(B)
done()
