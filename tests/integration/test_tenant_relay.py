"""The relay with a `tenants` section: one process reads the outbox of every
database of tenants.list. Each row is published once with the CloudEvents
extension attribute `tenant` and marked PUBLISHED in its own database; the
consumer with tenants.key "extension:tenant" lands each event in its
tenant's database; a tenant with a backlog of 5,000 rows delays another's
first event by at most one batch; a tenant whose database is dropped is
logged once per change of its error while the other keeps publishing, and
publishes again once it is back; at most tenants.max_connections sessions
are open (three busy tenants, a cap of 2); idle tenants cost one claim each per
relay.poll_ms (counted by the relay and by the server); relay.source
"binlog" with tenants is refused at start."""
import collections
import re

from harness import *
from tenants_common import *

sfx = suffix()
A, B = "a_" + sfx, "b_" + sfx
for t in (A, B):
    make_tenant_db(t)
    grant_relay(t)
clear_outbox()
ex = "tenant-outbox-" + sfx
q = bound_queue(ex)


def tenant_relay(tenants, batch=50, poll_ms=100, mode=None, extra_tenants=None, relay_extra=None):
    r = Relay(ex, batch=batch, poll_ms=poll_ms, lease_ms=6000)
    r.config["tenants"] = {"key": "extension:tenant", "database_url": relay_tenant_url(),
                           "list": list(tenants), "max_connections": 50, "idle_close_ms": 60000}
    r.config["tenants"].update(extra_tenants or {})
    if mode:
        r.config["relay"]["content_mode"] = mode
    r.config["relay"].update(relay_extra or {})
    with open(r.config_path, "w") as f:
        json.dump(r.config, f)
    return r


def published(tenant, ids):
    """How many of ids are PUBLISHED in the tenant's database (None when it
    is gone)."""
    try:
        return tenant_query(tenant, "SELECT COUNT(*) FROM outbox_event WHERE status = 'PUBLISHED' "
                            "AND event_id IN (" + ",".join(["%s"] * len(ids)) + ")", list(ids))[0][0]
    except pymysql.err.MySQLError:
        return None


def gauge(r, name):
    """The relay's sample of name, or None (not up yet)."""
    port = r.http_port()
    return metric_sum(port, r"^" + name + r"\{[^}]*\} (\d+)$", default=None) if port else None


def claims_total(r):
    return gauge(r, "sidecar_relay_claims_total")


# --- refusals at start --------------------------------------------------------
r = tenant_relay([A, B], relay_extra={"source": "binlog"})
r.start()
is_eq(r.wait_exit(30), 2, "relay.source binlog with tenants: refused at start (exit 2)")
ok("relay.source" in r.text() and "tenants" in r.text() and "not built" in r.text(),
   "the refusal names relay.source and tenants", detail=r.text()[-400:])
r = tenant_relay([])
r.start()
is_eq(r.wait_exit(30), 2, "an empty tenants.list: refused at start (exit 2)")
ok("tenants.list" in r.text(), "the refusal names tenants.list", detail=r.text()[-400:])
r = tenant_relay([A, "Not-Allowed"])
r.start()
is_eq(r.wait_exit(30), 2, "a tenants.list name tenants.names refuses: refused at start (exit 2)")
ok("tenants.list[1]" in r.text() and "does not match tenants.names" in r.text(),
   "the refusal names the entry", detail=r.text()[-400:])
ok("relay-secret" not in "".join(open(p).read() for p in r.log_paths), "no password in the log")

# --- every row once, with its tenant, marked in its own database --------------
ia, ib = insert_tenant_outbox(A, 40, 1000), insert_tenant_outbox(B, 30, 2000)
mine = insert_outbox(3)  # mysql.url's outbox: not the relay's with tenants
r = tenant_relay([A, B]).start()
ok(wait_until(lambda: published(A, ia) == 40 and published(B, ib) == 30, timeout=60),
   "every row PUBLISHED in its own database")
is_eq(published(A, ia), 40, "tenant A: 40 rows PUBLISHED")
is_eq(published(B, ib), 30, "tenant B: 30 rows PUBLISHED")
is_eq(tenant_query(A, "SELECT COUNT(*) FROM outbox_event WHERE lease_owner IS NOT NULL OR published_at IS NULL")[0][0],
      0, "tenant A: leases cleared, published_at set")
time.sleep(0.5)
msgs = drain_with_keys(q)
seen = collections.Counter()
wrong = []
for _, props, body in msgs:
    ev = json.loads(body)
    seen[ev["id"]] += 1
    want = A if ev["id"] in ia else B if ev["id"] in ib else None
    if ev.get("tenant") != want:
        wrong.append((ev["id"], ev.get("tenant"), want))
is_eq(len(msgs), 70, "70 messages for 70 rows")
is_eq(sum(1 for c in seen.values() if c == 1), 70, "each event published exactly once")
is_eq(wrong, [], "each message's tenant attribute is its database's tenant")
is_eq(count_in("outbox_event", "event_id", mine, "AND status = 'PENDING'"), 3,
      "mysql.url's outbox untouched (3 rows still PENDING)")
is_eq(gauge(r, "sidecar_relay_tenants"), 2, "sidecar_relay_tenants 2")
is_eq(gauge(r, "sidecar_relay_tenant_sessions"), 2, "two tenant sessions open")
is_eq(r.get("/readyz")[0], 200, "/readyz 200")
is_eq(r.stop(), 0, "SIGTERM: clean exit 0")
ok("published=70" in r.text(), "the stop summary counts 70 published")
clear_outbox()

# --- fairness: B's one row behind A's backlog of 5,000 ------------------------
BATCH = 50
backlog = insert_tenant_outbox(A, 5000, 10000)
late = insert_tenant_outbox(B, 1, 20000)[0]
r = tenant_relay([A, B], batch=BATCH).start()
ok(wait_until(lambda: published(A, backlog) == 5000 and published(B, [late]) == 1, timeout=120),
   "the backlog and the late row PUBLISHED")
time.sleep(0.5)
order = [json.loads(b)["id"] for _, _, b in drain_with_keys(q)]
is_eq(len(order), 5001, "5001 messages")
pos = order.index(late) if late in order else None
diag(f"B's row published at position {pos} of {len(order)} (batch {BATCH})")
ok(pos is not None and pos <= BATCH, f"B's row within the first round: position {pos} <= batch {BATCH} "
   "(5000 if A's backlog went first)")
is_eq(order.index(late) if late in order else None, BATCH,
      "exactly behind A's first batch (the list's order: A claimed first, then B)")
is_eq(r.stop(), 0, "clean exit")

# --- one tenant's database dropped: the other goes on -------------------------
r = tenant_relay([A, B], poll_ms=100).start()
ok(wait_until(lambda: gauge(r, "sidecar_relay_tenant_sessions") == 2, timeout=30), "both sessions open")
drop_tenant_db(B)
ia2 = insert_tenant_outbox(A, 20, 3000)
ok(wait_until(lambda: published(A, ia2) == 20, timeout=30), "A publishes while B's database is gone")
ok(wait_until(lambda: gauge(r, "sidecar_relay_tenants_down") == 1, timeout=30), "sidecar_relay_tenants_down 1")
is_eq(r.get("/readyz")[0], 200, "/readyz 200: one tenant's outage is not the relay's")
time.sleep(8)  # backoff 100 ms doubling: several attempts
fails = [l for l in r.lines() if l.get("msg", "").startswith(f"relay: tenant {B}:") and "failed" in l["msg"]]
codes = [re.search(r"error (\d+)", l["msg"]).group(1) for l in fails]
diag(f"tenant B failure lines: {codes}")
ok(1 <= len(codes) <= 2 and all(codes[i] != codes[i + 1] for i in range(len(codes) - 1)),
   f"B's failure logged once per state change ({codes}), not per retry")
ok(codes and codes[-1] == "1049", "the last state: unknown database (1049)")
ia3 = insert_tenant_outbox(A, 5, 3100)
ok(wait_until(lambda: published(A, ia3) == 5, timeout=30), "A still publishing 8 s later")
is_eq(len([l for l in r.lines() if l.get("msg", "").startswith(f"relay: tenant {B}:") and "failed" in l["msg"]]),
      len(codes), "no new line for B while its error stays the same")
make_tenant_db(B)
grant_relay(B)
ib2 = insert_tenant_outbox(B, 7, 4000)
ok(wait_until(lambda: published(B, ib2) == 7, timeout=60), "B publishes again once its database is back")
ok(any(l.get("msg", "").startswith(f"relay: tenant {B}: database works again") for l in r.lines()),
   "and says it works again")
is_eq(gauge(r, "sidecar_relay_tenants_down"), 0, "sidecar_relay_tenants_down 0")
is_eq(r.stop(), 0, "clean exit")
ok("relay-secret" not in r.text(), "no password in the log of the failures")
got = collections.Counter(json.loads(b)["id"] for _, _, b in drain_with_keys(q))
is_eq(sorted(k for k in got if got[k] != 1), [], "every event of this part published once")
is_eq((len(got), set(got) ^ set(ia2 + ia3 + ib2)), (32, set()), "exactly A's 25 and B's 7")

# --- sessions bounded: three tenants, max_connections 2 ------------------------
C = "c_" + sfx
make_tenant_db(C)
grant_relay(C)
lots = {t: insert_tenant_outbox(t, 300, 8000) for t in (A, B, C)}
r = tenant_relay([A, B, C], batch=20, extra_tenants={"max_connections": 2}).start()
most = [0]


def all_published():
    most[0] = max(most[0], gauge(r, "sidecar_relay_tenant_sessions") or 0)
    return all(published(t, ids) == 300 for t, ids in lots.items())


ok(wait_until(all_published, timeout=90, step=0.05), "max_connections 2: three tenants' 900 rows PUBLISHED")
# The 900 rows can go out between two samples (the relay publishes some
# 20,000 a second): that the cap is reached is read once they are out,
# while the relay's rounds keep going over the three tenants.
ok(wait_until(lambda: all_published() and most[0] >= 2 and gauge(r, "sidecar_relay_tenant_sessions") == 2,
              timeout=15, step=0.05), "2 sessions open while three tenants are read: the cap is used")
ok(most[0] <= 2, f"never more than 2 sessions open (the least recently used closed first; most seen {most[0]})")
is_eq(r.stop(), 0, "clean exit")
got = collections.Counter(json.loads(b)["id"] for _, _, b in drain_with_keys(q))
is_eq((len(got), sum(got.values())), (900, 900), "900 events, each published once")
drop_tenant_db(C)

# --- per_aggregate, per tenant: one aggregate of 30 events in each ------------
oa, ob = insert_tenant_outbox(A, 30, 7000, one_aggregate=True), insert_tenant_outbox(B, 30, 7000, one_aggregate=True)
r = tenant_relay([A, B], relay_extra={"ordering": "per_aggregate"}).start()
t0 = time.time()
ok(wait_until(lambda: published(A, oa) == 30 and published(B, ob) == 30, timeout=60),
   "per_aggregate: both aggregates PUBLISHED")
diag(f"per_aggregate: 2 tenants x 30 events of one aggregate in {time.time() - t0:.2f} s "
     "(one event per aggregate per round)")
time.sleep(0.5)
evs = [json.loads(b) for _, _, b in drain_with_keys(q)]
is_eq([e["id"] for e in evs if e["tenant"] == A], oa, "per_aggregate: A's aggregate in version order")
is_eq([e["id"] for e in evs if e["tenant"] == B], ob, "per_aggregate: B's in version order, the same "
      "aggregate id in another database not held by A's")
is_eq(r.stop(), 0, "clean exit")

# --- relay -> consumer: each event in its tenant's consumed_event -------------
for k, mode in enumerate(("structured", "binary")):
    ea, eb = insert_tenant_outbox(A, 15, 50000 + 100 * k), insert_tenant_outbox(B, 12, 60000 + 100 * k)
    sc = Sidecar(exchange=ex, consumer_extra={"prefetch": 64, "batch_max": 16},
                 extra={"tenants": {"key": "extension:tenant", "database_url": tenant_url(),
                                    "max_connections": 4}})
    ok(sc.start(), f"{mode}: consumer with tenants started")
    r = tenant_relay([A, B], mode=mode).start()
    ok(wait_until(lambda: tenant_count(A, "consumed_event", ea) == 15 and
                  tenant_count(B, "consumed_event", eb) == 12, timeout=60),
       f"{mode}: every event consumed in its tenant's database")
    time.sleep(0.5)
    is_eq((tenant_count(A, "consumed_event", ea), tenant_count(B, "consumed_event", eb)), (15, 12),
          f"{mode}: 15 in A's consumed_event, 12 in B's")
    is_eq(tenant_count(A, "consumed_event", eb) + tenant_count(B, "consumed_event", ea), 0,
          f"{mode}: none in the other tenant's database")
    is_eq((tenant_count(A, "notification_job", ea), tenant_count(B, "notification_job", eb)), (15, 12),
          f"{mode}: each effect in its tenant's database")
    is_eq(queue_depth(sc.dlq), 0, f"{mode}: nothing dead-lettered")
    is_eq(r.stop(), 0, f"{mode}: relay exits 0")
    sc.stop()
drain(q)

# --- idle tenants: one claim each per poll_ms ---------------------------------
# SC_TENANT_RELAY_IDLE=200 for the figure of docs/performance.md.
N_IDLE, POLL, W = int(os.environ.get("SC_TENANT_RELAY_IDLE", "20")), 200, 6.0
idle = [f"i{i:02d}_{sfx}" for i in range(N_IDLE)]
t0 = time.time()
for t in idle:
    make_tenant_db(t)
    grant_relay(t)
diag(f"{N_IDLE} tenant databases made in {time.time() - t0:.1f} s")


def cpu_s(pid):
    """utime + stime of pid, in seconds."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def com_select():
    return int(query("SHOW GLOBAL STATUS LIKE 'Com_select'")[0][1])


r = tenant_relay(idle, poll_ms=POLL, extra_tenants={"max_connections": N_IDLE + 10}).start()
ok(wait_until(lambda: gauge(r, "sidecar_relay_tenant_sessions") == N_IDLE, timeout=60),
   f"{N_IDLE} sessions open")
time.sleep(1)
c0, s0, t0, u0 = claims_total(r), com_select(), time.time(), cpu_s(r.proc.pid)
time.sleep(W)
c1, s1, t1, u1 = claims_total(r), com_select(), time.time(), cpu_s(r.proc.pid)
elapsed = t1 - t0
claims = c1 - c0
per_s = claims / elapsed
want = N_IDLE / (POLL / 1000)
diag(f"idle: {claims} claims in {elapsed:.2f} s = {per_s:.1f}/s for {N_IDLE} idle tenants at poll_ms "
     f"{POLL} (formula N_idle / (poll_ms/1000) = {want:.1f}/s); server Com_select {s1 - s0}; "
     f"relay CPU {100 * (u1 - u0) / elapsed:.1f} %")
# A tenant is claimed from at most once per poll_ms: in a window of W s at
# most floor(W / poll) + 1 times.
hi = N_IDLE * (int(elapsed * 1000 // POLL) + 1)
lo = N_IDLE * int(elapsed * 1000 // (POLL + 50))
ok(lo <= claims <= hi, f"claims {claims} within [{lo}, {hi}] (formula {want * elapsed:.0f})")
# Each idle claim is two SELECTs (expired leases, then PENDING) and a
# rollback; nothing else runs on the server meanwhile but this test's own
# SHOW STATUS and the relay's metric reads.
ok(abs((s1 - s0) - 2 * claims) <= 2 * N_IDLE, f"the server counts 2 SELECTs per claim: Com_select "
   f"{s1 - s0} vs 2 x {claims}")
is_eq(r.stop(), 0, "clean exit")
for t in idle:
    drop_tenant_db(t)
drop_tenant_db(A)
drop_tenant_db(B)
done()
