"""The relay's backlog gauges with tenants count rows under another
relay's lease, and idle tenants still cost only their claims.

Tenant P holds one row PUBLISHING under another relay's unexpired lease,
made 300 s ago; tenant I is empty. Neither's claim finds anything. The
relay counts each tenant once at its first claim: P's row shows in
sidecar_relay_tenant_pending{tenant=P} (1), sidecar_relay_pending (1) and
the oldest age (>= 300 s), and P, having rows, is counted again at most
every 5 s while I, counted empty, is not counted again: over a window of
claims the server's Com_select is two per claim plus at most two per 5 s
(P's count and its watermark read), far below what counting I at each of
its claims would add. Once the lease expires the relay claims the row,
publishes it, and the gauges go back to 0; counted empty then, P costs only
its claims as I does."""
import tenants_common
from harness import *
from tenants_common import *

tenants_common.PREFIX = "tp_"
sfx = suffix()
P, I = "p_" + sfx, "i_" + sfx
for t in (P, I):
    make_tenant_db(t)
    grant_relay(t)
ex = "tenant-pending-" + sfx
q = bound_queue(ex)
eid = str(uuid.uuid4())
with tenants_common._root(tenants_common.PREFIX + P) as c, c.cursor() as cur:
    cur.execute("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version,"
                " payload, status, lease_owner, lease_until, created_at) VALUES"
                " (%s, 'ORDER', '7001', 'ORDER_ACCEPTED', 1, '{\"orderId\": 7001}', 'PUBLISHING',"
                " 'relay-other', UTC_TIMESTAMP(6) + INTERVAL 10 MINUTE,"
                " UTC_TIMESTAMP(6) - INTERVAL 300 SECOND)", (eid,))

POLL = 100
r = Relay(ex, batch=50, poll_ms=POLL, lease_ms=6000)
r.config["tenants"] = {"key": "extension:tenant", "database_url": relay_tenant_url(),
                       "list": [P, I], "max_connections": 10, "idle_close_ms": 600000}
with open(r.config_path, "w") as f:
    json.dump(r.config, f)
r.start()


def sample(name, tenant=None):
    """name's value on the relay's /metrics (a float), or None."""
    import re
    import urllib.request
    port = r.http_port()
    if not port:
        return None
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    lab = r'\{[^}]*tenant="' + tenant + r'"[^}]*\}' if tenant else r'\{[^}]*\}'
    m = re.search(r"^" + name + lab + r" ([0-9.]+)$", text, re.M)
    return float(m.group(1)) if m else None


def com_select():
    return int(query("SHOW GLOBAL STATUS LIKE 'Com_select'")[0][1])


ok(wait_until(lambda: sample("sidecar_relay_tenant_pending", P) == 1, timeout=30),
   "the row under another relay's lease counts in sidecar_relay_tenant_pending of its tenant")
is_eq(sample("sidecar_relay_pending"), 1, "and in the total sidecar_relay_pending")
age = sample("sidecar_relay_oldest_pending_age_seconds") or 0
ok(age >= 300, f"the oldest age is the row's: {age:.1f} s")
is_eq(sample("sidecar_relay_tenant_pending", I), None, "the empty tenant has no series")


def window(claims_wanted):
    """Claims and Com_select over the time the relay takes for claims_wanted
    more claims: (claims, selects, seconds)."""
    c0, s0, t0 = sample("sidecar_relay_claims_total"), com_select(), time.time()
    wait_until(lambda: sample("sidecar_relay_claims_total") >= c0 + claims_wanted, timeout=60, step=0.05)
    c1, s1, t1 = sample("sidecar_relay_claims_total"), com_select(), time.time()
    return int(c1 - c0), s1 - s0, t1 - t0


# Two tenants claimed from once per poll_ms each: 120 claims in about 6 s.
claims, selects, secs = window(120)
counts_allowed = 2 * (int(secs / 5) + 1)  # P's count and watermark read, every 5 s
diag(f"{claims} claims in {secs:.2f} s, server Com_select {selects} (2 per claim = {2 * claims}; "
     f"P's counts at most {counts_allowed}; counting I at each claim would add about {claims})")
# +-2 either side: a claim's counter and its SELECTs are not read at one instant.
ok(2 * claims - 2 <= selects <= 2 * claims + counts_allowed + 2,
   f"Com_select {selects} within 2 x {claims} - 2 and 2 x {claims} + {counts_allowed} + 2: only the "
   "tenant with rows is counted, at most every 5 s")

with tenants_common._root(tenants_common.PREFIX + P) as c, c.cursor() as cur:
    cur.execute("UPDATE outbox_event SET lease_until = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND "
                "WHERE event_id = %s", (eid,))
ok(wait_until(lambda: tenant_query(P, "SELECT status FROM outbox_event WHERE event_id = %s", (eid,))[0][0]
              == "PUBLISHED", timeout=30),
   "its lease expired, the row is claimed and PUBLISHED")
ok(wait_until(lambda: sample("sidecar_relay_pending") == 0 and sample("sidecar_relay_tenant_pending", P) is None,
              timeout=15),
   "the gauges go back to 0 (the tenant's series gone)")
claims, selects, secs = window(120)
diag(f"then: {claims} claims in {secs:.2f} s, server Com_select {selects}")
ok(abs(selects - 2 * claims) <= 2,
   f"both tenants counted empty cost only their claims: Com_select {selects} vs 2 x {claims}")
is_eq(r.stop(), 0, "clean exit")
evs = [json.loads(b) for _, _, b in drain_with_keys(q)]
is_eq([(e["id"], e.get("tenant")) for e in evs], [(eid, P)], "the row published once, with its tenant")
for t in (P, I):
    drop_tenant_db(t)
done()
