"""Per-key order per tenant, against the real servers: an ordered consumer
(on_dead_letter hold, two partitions) with two tenant databases, the same
keys in both.

- A's key fails in place and is held (its row in A's database), its later
  events held behind it, while B's same key is applied and never held;
  `sidecar dlq replay --key K --tenant A` releases A's key in order.
- B's database down (its grants revoked): A's keys keep their order, B's
  events wait in hand, then go round (db_outage_hold_ms) with their turns
  kept; once B's database is back each of B's events is applied once, in
  order."""
import json
import os
import tempfile

from harness import *
from tenants_common import *

sfx = suffix()
A, B = "oa_" + sfx, "ob_" + sfx
name = "t-tord-" + sfx
block = os.path.join(tempfile.mkdtemp(prefix="sc-tord-"), "block")
SEEN = ("CREATE TABLE t_order_seen (seq BIGINT AUTO_INCREMENT PRIMARY KEY, event_id CHAR(36) "
        "NOT NULL, subject VARCHAR(100) NOT NULL, version BIGINT NOT NULL, at DATETIME(6) NOT "
        "NULL DEFAULT CURRENT_TIMESTAMP(6))")


def grant_seen(tenant):
    tenant_query(tenant, f"GRANT INSERT ON `{PREFIX + tenant}`.t_order_seen TO 'sidecar_consumer'@'%'")


def make(tenant):
    make_tenant_db(tenant)
    tenant_query(tenant, SEEN)
    grant_seen(tenant)


make(A)
make(B)


def send(events):
    """events: [(tenant, key, version, type)], published in that order."""
    conn = amqp()
    ch = conn.channel()
    ch.confirm_delivery()
    ids = {}
    for tenant, k, v, t in events:
        eid = str(uuid.uuid4())
        d = json.loads(event_body(eid, etype=t, subject=k, version=v))
        d["tenant"] = tenant
        publish(ch, sc.exchange, t, json.dumps(d), message_id=eid, headers={"x-ordering-key": k})
        ids[eid] = (tenant, k, v)
    conn.close()
    return ids


def versions(tenant, key):
    return [r[0] for r in tenant_query(tenant, "SELECT version FROM t_order_seen WHERE subject = %s "
                                               "ORDER BY seq", (key,))]


def held(tenant, key):
    """The key's held events not consumed yet, in the tenant's database."""
    return tenant_query(tenant, "SELECT e.event_id FROM consumer_held_event e WHERE "
                        "e.consumer_name = %s AND e.order_key = %s AND NOT EXISTS (SELECT 1 FROM "
                        "consumed_event c WHERE c.consumer_name = e.consumer_name AND c.event_id "
                        "= e.event_id)", (name, key))


open(block, "w").close()
sc = Sidecar(name=name, handler=TEST_HANDLER, env={"SC_TEST_BLOCK_FILE": block},
             consumer_extra={"workers": 1, "max_attempts": 2, "retry_delays_ms": [300],
                             "batch_max": 8, "prefetch": 16, "db_outage_hold_ms": 3000,
                             "ordering": {"key": "subject", "partitions": 2}},
             extra={"tenants": {"key": "extension:tenant", "database_url": tenant_url(),
                                "max_connections": 4, "idle_close_ms": 60000}})
ok(sc.start(), "an ordered consumer with tenants starts (no longer refused)")

# --- a held key is one tenant's --------------------------------------------
K = "k-" + sfx
send([(A, K, 1, "ORDERED_BLOCKED")] +
     [(t, K, v, "ORDERED") for v in range(2, 5) for t in (A, B)] + [(B, K, 1, "ORDERED")])
ok(wait_until(lambda: queue_depth(sc.dlq) == 4 and len(versions(B, K)) == 4, timeout=60),
   f"A's failing event and the 3 behind it dead-lettered, B's same key applied "
   f"(dlq {queue_depth(sc.dlq)}, B {versions(B, K)})")
is_eq(sorted(versions(B, K)), [1, 2, 3, 4], "B's key: every event applied once")
ok(versions(A, K) == [] and held(A, K) and not held(B, K),
   f"A's key held in A's database, B's same key not held (A {versions(A, K)}, "
   f"held A {held(A, K)}, held B {held(B, K)})")
rc, out = run_sidecar_cmd(["dlq", "list", name], sc.config)
ok(out.count("held behind") == 3, "3 of A's dead letters 'held behind' its first", out[-2000:])
send([(B, K, 5, "ORDERED"), (A, K, 5, "ORDERED")])
ok(wait_until(lambda: versions(B, K)[-1:] == [5] and queue_depth(sc.dlq) == 5, timeout=30),
   f"while A's key is held, B's same key goes on (B {versions(B, K)}); A's next is held")

os.unlink(block)
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", K, "--tenant", B], sc.config)
ok(rc != 0 and queue_depth(sc.dlq) == 5,
   f"replay --key --tenant B: B has no dead letter of the key (rc {rc})", out[-1000:])
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", K, "--tenant", A], sc.config)
ok(rc == 0, f"dlq replay --key K --tenant A (rc {rc})", out[-2000:])
ok(wait_until(lambda: versions(A, K) == [1, 2, 3, 4, 5] and not held(A, K), timeout=60),
   f"A's key released, its events applied in order (A {versions(A, K)}, held {held(A, K)})")
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--all", "--tenant", A], sc.config)
ok(rc == 2 and "--tenant goes with --key" in out, f"--tenant goes with --key only (rc {rc})", out)

# --- one tenant's database down ---------------------------------------------
keys = ["d1-" + sfx, "d2-" + sfx, "d3-" + sfx]
revoke(B)
evs = [(t, k, v, "ORDERED") for v in range(1, 16) for k in keys for t in (A, B)]
sent = send(evs)
ok(wait_until(lambda: all(versions(A, k) == list(range(1, 16)) for k in keys), timeout=60),
   f"B's database down: A's 3 keys applied in order ({[versions(A, k) for k in keys]})")
ok(wait_until(lambda: any("sent round" in l.get("msg", "") and B in l.get("msg", "")
                          for l in sc.lines()), timeout=30),
   "B's deliveries in hand sent round once db_outage_hold_ms passed",
   detail="\n".join(l.get("msg", "") for l in sc.lines() if B in l.get("msg", ""))[-2000:])
ok(all(versions(B, k) == [] for k in keys), "nothing of B's applied while its database is down")
grant(B)
grant_seen(B)
ok(wait_until(lambda: all(len(versions(B, k)) >= 15 for k in keys), timeout=90),
   f"B's database back: its events come through ({[len(versions(B, k)) for k in keys]})")
is_eq([versions(B, k) for k in keys], [list(range(1, 16))] * 3,
      "B's keys applied in order, each event once, none lost")
ids_b = [e for e, (t, k, v) in sent.items() if t == B]
is_eq(tenant_count(B, "consumed_event", ids_b), 45, "B's 45 events consumed once each")
is_eq(queue_depth(sc.dlq), 0, "nothing dead-lettered by the outage")

sc.stop()
drop_tenant_db(A)
drop_tenant_db(B)
done()
