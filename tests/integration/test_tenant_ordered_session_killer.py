"""The session killer on the ordered path: an ordered consumer (ordering,
on_dead_letter skip) with two tenant databases. A delivery whose handler
statement makes the server kill its own session is the delivery's fault,
not its tenant's: blamed on the second loss under it, its in-place retry
spends an attempt and it is dead-lettered at max_attempts with the reason,
while its tenant's other keys (and its own key's later events) are applied
once each, in order, and the other tenant never counts as down. Without the
rule the ordered path kept such a delivery in hand with its tenant counted
as down: it came back, ended the next session too, and held its tenant
down for good, attempts unchanged."""
import json

from harness import *
from tenants_common import *

sfx = suffix()
A, B = "sa_" + sfx, "sb_" + sfx
name = "t-tosk-" + sfx
SEEN = ("CREATE TABLE t_order_seen (seq BIGINT AUTO_INCREMENT PRIMARY KEY, event_id CHAR(36) "
        "NOT NULL, subject VARCHAR(100) NOT NULL, version BIGINT NOT NULL, at DATETIME(6) NOT "
        "NULL DEFAULT CURRENT_TIMESTAMP(6))")
for t in (A, B):
    make_tenant_db(t)
    tenant_query(t, SEEN)
    tenant_query(t, f"GRANT INSERT ON `{PREFIX + t}`.t_order_seen TO 'sidecar_consumer'@'%'")

sc = Sidecar(name=name, handler=TEST_HANDLER,
             consumer_extra={"workers": 1, "prefetch": 32, "batch_max": 8, "max_attempts": 2,
                             "retry_delays_ms": [300], "db_outage_hold_ms": 60000,
                             "ordering": {"key": "subject", "on_dead_letter": "skip"}},
             extra={"tenants": {"key": "extension:tenant", "database_url": tenant_url(),
                                "max_connections": 4, "idle_close_ms": 60000}})
ok(sc.start(), "an ordered consumer with tenants and the test handler started")

keys = ["k1-" + sfx, "k2-" + sfx, "k3-" + sfx]
K = keys[0]
conn = amqp()
ch = conn.channel()
ch.confirm_delivery()
killer = None
ids = {}
# Versions 1..5 of three keys in both tenants, interleaved: they share
# batches. A's key K at version 3 is the session killer.
for v in range(1, 6):
    for k in keys:
        for t in (A, B):
            eid = str(uuid.uuid4())
            etype = "KILL_SESSION" if (t, k, v) == (A, K, 3) else "ORDERED"
            if etype == "KILL_SESSION":
                killer = eid
            d = json.loads(event_body(eid, etype=etype, subject=k, version=v))
            d["tenant"] = t
            publish(ch, sc.exchange, etype, json.dumps(d), message_id=eid)
            ids[eid] = (t, k, v)
conn.close()


def versions(tenant, key):
    return [r[0] for r in tenant_query(tenant, "SELECT version FROM t_order_seen WHERE subject = %s "
                                               "ORDER BY seq", (key,))]


ok(wait_until(lambda: all(versions(B, k) == [1, 2, 3, 4, 5] for k in keys), timeout=30),
   f"the other tenant's keys applied in order ({[versions(B, k) for k in keys]})",
   detail=sc.text()[-2000:])
want = {K: [1, 2, 4, 5], keys[1]: [1, 2, 3, 4, 5], keys[2]: [1, 2, 3, 4, 5]}
ok(wait_until(lambda: all(versions(A, k) == want[k] for k in keys), timeout=60),
   f"the killer's tenant: its other keys and its own key's later events applied in order "
   f"({[versions(A, k) for k in keys]})", detail=sc.text()[-3000:])
dead = []
ok(wait_until(lambda: dead.extend(drain(sc.dlq)) or any(p.message_id == killer for p, _ in dead),
              timeout=30),
   "the session killer is dead-lettered", detail=sc.text()[-3000:])
hdrs = next(((p.headers or {}) for p, _ in dead if p.message_id == killer), {})
reason = hdrs.get("x-sidecar-reason", b"")
reason = reason.decode() if isinstance(reason, bytes) else reason
ok("again for this delivery on a new database session" in reason,
   f"with the reason naming it ({reason[:160]})")
tenant = hdrs.get("x-sidecar-tenant", b"")
is_eq(tenant.decode() if isinstance(tenant, bytes) else tenant, A, "its dead letter names its tenant")
is_eq(len(dead), 1, "nothing else dead-lettered")

lines = sc.lines()
blamed = [l for l in lines if l.get("event_id") == killer and "counted as an attempt" in l.get("msg", "")]
ok(len(blamed) >= 1, f"blamed on the second loss under it ({len(blamed)} times)")
is_eq(tenant_count(A, "consumed_event", [killer]), 0, "it has no claim in its tenant's database")
others_a = [e for e, (t, k, v) in ids.items() if t == A and e != killer]
ids_b = [e for e, (t, k, v) in ids.items() if t == B]
is_eq(tenant_count(A, "consumed_event", others_a), 14, "each of A's 14 others claimed once")
is_eq(tenant_count(B, "consumed_event", ids_b), 15, "each of B's 15 claimed once")
down_b = [l for l in lines if B in l.get("msg", "") and "cannot be used" in l.get("msg", "")]
is_eq(len(down_b), 0, "the other tenant never counted as down")
is_eq(sc.stop(), 0, "stops cleanly")
drop_tenant_db(A)
drop_tenant_db(B)
done()
