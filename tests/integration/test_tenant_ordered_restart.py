"""Per-key order per tenant across a restart while a tenant's deliveries are
out through the delay queue. An ordered consumer with tenants sends a down
tenant's deliveries round, each copy with its rank; a process that died with
copies out used to leave the next one nothing to go by: the key's later
events, published meanwhile, reached the queue before the copies came back
and ran first (6..10 then 1..5).

Here: tenant B's database down (its grants revoked), B's key K versions 1..5
sent round; each copy out has its row in mysql.url's database
(consumer_tenant_copy). kill -9. Versions 6..10 published while no consumer
runs (queued ahead of the copies as they expire). B's database back, a new
process: it reads the rows back, and K is applied 1..10, each once; no row
is left. Tenant A's same key went on throughout. Then a standby: two
processes, the active one killed with copies out, the standby takes over
and keeps the order too."""
import os

from harness import *
from tenants_common import *

sfx = suffix()
A, B = "ra_" + sfx, "rb_" + sfx
name = "t-tordr-" + sfx
make_seen_db(A)
make_seen_db(B)
K = "k-" + sfx


def consumer():
    return Sidecar(name=name, exchange="ex-" + name, handler=TEST_HANDLER,
                   consumer_extra={"workers": 1, "max_attempts": 5, "retry_delays_ms": [1500],
                                   "batch_max": 8, "prefetch": 32, "db_outage_hold_ms": 1500,
                                   "ordering": {"key": "subject", "partitions": 1}},
                   extra={"tenants": {"key": "extension:tenant", "database_url": tenant_url(),
                                      "max_connections": 4, "idle_close_ms": 60000}})


def rows(tenant=None):
    sql = "SELECT COUNT(*) FROM consumer_tenant_copy WHERE consumer_name = %s"
    args = [name]
    if tenant:
        sql += " AND tenant = %s"
        args.append(tenant)
    return query(sql, args)[0][0]


def copies_out(sc, tenant, n):
    """n of tenant's copies out: their rows written, and sent round."""
    return wait_until(lambda: rows(tenant) >= n and any(
        "sent round" in l.get("msg", "") and tenant in l.get("msg", "") for l in sc.lines()),
        timeout=30)


def run_case(label, kill_active, start_after):
    """B down, K 1..5 out; kill_active() kills the process holding them;
    6..10 published; B back; start_after() runs the process that goes on.
    Returns the processes to stop."""
    revoke(B)
    send_ordered(procs[0].exchange, [(t, K, v, "ORDERED") for v in range(base + 1, base + 6)
                                     for t in (A, B)])
    ok(copies_out(procs[0] if len(procs) == 1 else procs[0], B, 5),
       f"{label}: B's database down, its 5 events of K out through the delay queue, a row "
       f"each in mysql.url's database ({rows(B)} rows)")
    ok(wait_until(lambda: seen_versions(A, K)[-5:] == list(range(base + 1, base + 6)), timeout=30),
       f"{label}: A's same key goes on meanwhile ({seen_versions(A, K)[-5:]})")
    kill_active()
    send_ordered(procs[0].exchange, [(B, K, v, "ORDERED") for v in range(base + 6, base + 11)])
    grant(B)
    grant_seen(B)
    start_after()


procs = []
base = 0
# ---- a restart ----------------------------------------------------------------
sc = consumer()
procs.append(sc)
ok(sc.start(), "an ordered consumer with tenants starts")


def restart():
    sc.kill9()
    ok(not sc.alive(), "kill -9 of the consumer with B's copies out")


def again():
    ok(sc.start(), "the consumer starts again")


run_case("restart", restart, again)
want = list(range(1, 11))
ok(wait_until(lambda: len(seen_versions(B, K)) >= 10, timeout=60),
   f"B's key: all 10 events applied ({seen_versions(B, K)})")
is_eq(seen_versions(B, K), want, "B's key applied in order, 1..10, each once (not 6..10 first)")
ok(any("read back" in l.get("msg", "") and B in l.get("msg", "") for l in sc.lines()),
   "the new process read B's copies back", detail="\n".join(
       l.get("msg", "") for l in sc.lines() if "copies" in l.get("msg", ""))[-1500:])
ok(wait_until(lambda: rows() == 0, timeout=30), f"no row left once they are applied ({rows()})")
is_eq(seen_versions(A, K), list(range(1, 6)), "A's key applied 1..5, once each")
sc.stop()

# ---- a standby taking over -------------------------------------------------------
base = 10
active = consumer()
procs[:] = [active]
ok(active.start(), "the active consumer starts")
standby = consumer()
ok(standby.start(), "a standby in another process starts (single active consumer)")


def kill_active():
    active.kill9()
    ok(not active.alive(), "kill -9 of the active consumer with B's copies out")


run_case("standby", kill_active, lambda: None)
want = list(range(1, 21))
ok(wait_until(lambda: len(seen_versions(B, K)) >= 20, timeout=60),
   f"the standby took over: B's key has all 20 events ({seen_versions(B, K)})")
is_eq(seen_versions(B, K), want, "B's key applied in order across the takeover, each once")
ok(any("read back" in l.get("msg", "") and B in l.get("msg", "") for l in standby.lines()),
   "the standby read B's copies back")
ok(wait_until(lambda: rows() == 0, timeout=30), f"no row left ({rows()})")
is_eq(queue_depth(active.dlq), 0, "nothing dead-lettered")
standby.stop()
drop_tenant_db(A)
drop_tenant_db(B)
done()
