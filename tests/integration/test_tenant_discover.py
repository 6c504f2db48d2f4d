"""tenants.discover and the bounded per-tenant metrics.

The relay with tenants.discover lists the databases whose name matches
tenants.database_url's (td_{tenant}) and that hold an outbox_event table:
two at start, a third made while it runs joins the round and its rows are
published with its `tenant` attribute, a dropped one leaves the round while
the others go on, and a database whose tenant part tenants.names refuses is
ignored and logged once. tenants.discover with tenants.list is refused.

With tenants.metrics_top 2 and four tenants holding backlogs of different
sizes, /metrics has sidecar_relay_tenant_pending and its oldest-age series
for exactly the two largest, the totals over all four, and valid text
(promtool check metrics); when another tenant grows past them, the one it
passes is gone from the next scrapes. The consumer's
sidecar_tenant_waiting_by_tenant does the same for deliveries waiting for
tenants whose database is missing."""
import collections
import shutil
import subprocess

import tenants_common
from harness import *
from tenants_common import *

tenants_common.PREFIX = "td_"  # a prefix of its own: discovery lists whatever matches
sfx = suffix()
A, B, C = "a_" + sfx, "b_" + sfx, "c_" + sfx
BAD = "BAD" + sfx  # upper case: the default tenants.names refuses it
for t in (A, B, BAD):
    make_tenant_db(t)
    grant_relay(t)
ex = "tenant-discover-" + sfx
q = bound_queue(ex)


def discover_relay(extra_tenants=None, relay_extra=None, batch=50):
    r = Relay(ex, batch=batch, poll_ms=100, lease_ms=6000)
    r.config["tenants"] = {"key": "extension:tenant", "database_url": relay_tenant_url(),
                           "discover": True, "discover_ms": 1000, "max_connections": 50}
    r.config["tenants"].update(extra_tenants or {})
    r.config["relay"].update(relay_extra or {})
    with open(r.config_path, "w") as f:
        json.dump(r.config, f)
    return r


def published(tenant, ids):
    try:
        return tenant_query(tenant, "SELECT COUNT(*) FROM outbox_event WHERE status = 'PUBLISHED' "
                            "AND event_id IN (" + ",".join(["%s"] * len(ids)) + ")", list(ids))[0][0]
    except pymysql.err.MySQLError:
        return None


def gauge(r, name):
    port = r.http_port()
    return metric_sum(port, r"^" + name + r"\{[^}]*\} (\d+)$", default=None) if port else None


def log_count(r, text):
    return sum(1 for l in r.lines() if text in l.get("msg", ""))


def tenants_of(evs):
    return collections.Counter(e.get("tenant") for e in evs)


# --- refusal ------------------------------------------------------------------
r = discover_relay({"list": [A]})
r.start()
is_eq(r.wait_exit(30), 2, "tenants.discover with tenants.list: refused at start (exit 2)")
ok("tenants.discover" in r.text() and "tenants.list" in r.text(), "the refusal names both keys",
   detail=r.text()[-400:])

# --- discovery: two at start, one joins, one leaves, a refused name ------------
ia, ib = insert_tenant_outbox(A, 20, 1000), insert_tenant_outbox(B, 15, 2000)
ibad = insert_tenant_outbox(BAD, 3, 9000)
r = discover_relay().start()
ok(wait_until(lambda: published(A, ia) == 20 and published(B, ib) == 15, timeout=60),
   "the two discovered tenants' rows PUBLISHED")
is_eq(gauge(r, "sidecar_relay_tenants"), 2, "sidecar_relay_tenants 2 (the refused name not counted)")
bad_line = f"database td_{BAD} ignored"
ok(wait_until(lambda: log_count(r, bad_line) >= 1, timeout=10), "the refused name is logged",
   detail=r.text()[-600:])
make_tenant_db(C)
grant_relay(C)
ic = insert_tenant_outbox(C, 12, 3000)
t0 = time.time()
ok(wait_until(lambda: published(C, ic) == 12, timeout=30), "a tenant made while the relay runs: its rows PUBLISHED")
diag(f"the new tenant's 12 rows published {time.time() - t0:.1f} s after it was made (discover_ms 1000)")
ok(log_count(r, f"relay: tenant {C}: database found, joins the round") == 1, "and its joining logged once")
ok(wait_until(lambda: gauge(r, "sidecar_relay_tenants") == 3, timeout=10), "sidecar_relay_tenants 3")
evs = [json.loads(b) for _, _, b in drain_with_keys(q)]
is_eq(tenants_of(evs), collections.Counter({A: 20, B: 15, C: 12}),
      "every message carries its database's tenant: 20 A, 15 B, 12 C, none of the refused database")
is_eq(len({e["id"] for e in evs}), 47, "47 distinct events")
drop_tenant_db(B)
ok(wait_until(lambda: log_count(r, f"relay: tenant {B}: its database is no longer found") == 1, timeout=15),
   "the dropped tenant leaves the round (logged)", detail=r.text()[-600:])
ok(wait_until(lambda: gauge(r, "sidecar_relay_tenants") == 2, timeout=10), "sidecar_relay_tenants 2 again")
ia2, ic2 = insert_tenant_outbox(A, 10, 1100), insert_tenant_outbox(C, 10, 3100)
ok(wait_until(lambda: published(A, ia2) == 10 and published(C, ic2) == 10, timeout=30),
   "the others go on publishing")
ok(wait_until(lambda: gauge(r, "sidecar_relay_tenants_down") == 0, timeout=10),
   "sidecar_relay_tenants_down 0: a tenant gone is not a tenant down")
is_eq(log_count(r, bad_line), 1, "the refused name logged once over many listings")
is_eq(published(BAD, ibad), 0, "the refused database's rows untouched")
is_eq(r.get("/readyz")[0], 200, "/readyz 200")
is_eq(r.stop(), 0, "clean exit")
evs = [json.loads(b) for _, _, b in drain_with_keys(q)]
is_eq(tenants_of(evs), collections.Counter({A: 10, C: 10}), "after the drop: 10 A, 10 C")
ok("relay-secret" not in r.text(), "no password in the log")

# --- the tools go over the same listing ----------------------------------------
OWNER, OWNER_PW = "td_owner_" + sfx, "owner-" + sfx
with admin_db() as c, c.cursor() as cur:
    cur.execute(f"CREATE USER '{OWNER}'@'%' IDENTIFIED BY '{OWNER_PW}'")
    cur.execute(f"GRANT ALL ON `td%`.* TO '{OWNER}'@'%'")
owner_cfg = {"amqp": {"url": os.environ["SC_TEST_AMQP_URL"]},
             "mysql": {"url": os.environ["SC_TEST_MYSQL_URL"]}, "consumers": [],
             "tenants": {"key": "extension:tenant", "discover": True,
                         "database_url": f"mysql://{OWNER}:{OWNER_PW}@127.0.0.1:"
                                         f"{os.environ['SC_TEST_MYSQL_PORT']}/td_{{tenant}}"}}
rc, out = run_sidecar_cmd(["migrate", "--all", "--schema", os.path.join(ROOT, "sql", "schema")], owner_cfg)
is_eq(rc, 0, "migrate --all with tenants.discover: exit 0")
ok(f"migrate: 2 tenants, 2 brought current, 0 failed" in out and f"tenant {A}:" in out and
   f"tenant {C}:" in out, "it went over the two discovered tenants (A, C)", detail=out)
ok(f"database td_{BAD} ignored" in out and f"tenant {BAD}" not in out,
   "and said it ignored the refused one", detail=out)
rc, out = run_sidecar_cmd(["purge", "--older-than", "30d", "--dry-run"], owner_cfg)
is_eq(rc, 0, "purge --dry-run with tenants.discover: exit 0")
ok("purge: 3 databases (mysql.url and 2 tenants), none failed" in out, "purge went over them", detail=out)
with admin_db() as c, c.cursor() as cur:
    cur.execute(f"DROP USER '{OWNER}'@'%'")
for t in (A, C, BAD):
    drop_tenant_db(t)

# --- metrics_top 2 of four backlogs --------------------------------------------
# Under per_aggregate a FAILED head holds its aggregate's rows behind it: a
# backlog that stays while the relay runs.
W, X, Y, Z = ("w_" + sfx, "x_" + sfx, "y_" + sfx, "z_" + sfx)
sizes = {W: 400, X: 300, Y: 200, Z: 100}
for t, n in sizes.items():
    make_tenant_db(t)
    grant_relay(t)
    insert_tenant_outbox(t, n + 1, 5000, one_aggregate=True)
    tenant_query(t, "UPDATE outbox_event SET status = 'FAILED' WHERE event_version = 1")
r = discover_relay({"metrics_top": 2}, relay_extra={"ordering": "per_aggregate"}).start()


def series(name):
    port = r.http_port()
    text = r.get("/metrics")[1] if port else ""
    if isinstance(text, bytes):
        text = text.decode()
    out = {}
    for m in re.finditer(r"^" + name + r'\{[^}]*tenant="([^"]+)"\} ([0-9.]+)$', text, re.M):
        out[m.group(1)] = float(m.group(2))
    return out, text


want = {W: 400.0, X: 300.0}
ok(wait_until(lambda: series("sidecar_relay_tenant_pending")[0] == want, timeout=30),
   "sidecar_relay_tenant_pending: exactly the two largest (W 400, X 300)",
   detail=str(series("sidecar_relay_tenant_pending")[0]))
pend, text = series("sidecar_relay_tenant_pending")
ages, _ = series("sidecar_relay_tenant_oldest_pending_age_seconds")
is_eq(sorted(ages), sorted(want), "the oldest-age series for the same two tenants")
ok(all(v > 0 for v in ages.values()), f"their ages are above 0 ({ages})")
is_eq(gauge(r, "sidecar_relay_pending"), 1000, "sidecar_relay_pending: the total over all four (1000)")
is_eq(gauge(r, "sidecar_relay_tenants"), 4, "sidecar_relay_tenants 4")
if shutil.which("promtool"):
    p = subprocess.run(["promtool", "check", "metrics"], input=text.encode(), capture_output=True)
    # promtool's lint also reports style points (counters' _total and the like)
    # with exit 1 and "problems"; a parse error is "error while linting".
    out = (p.stdout + p.stderr).decode()
    ok("error while linting" not in out and "parse" not in out.lower(), "promtool check metrics parses the text",
       detail=out[-400:])
    ok("sidecar_relay_tenant" not in out, "and finds nothing to say of the tenant series", detail=out[-400:])
else:
    ok(True, "# SKIP promtool not installed")
    ok(True, "# SKIP promtool not installed")
# Z grows past both: X leaves the top and must be gone, not left stale.
# Behind the same FAILED head (aggregate 5000), so they are held too.
tenant_query(Z, "INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, "
             "event_version, payload, status, created_at) SELECT UUID(), 'ORDER', '5000', "
             "'ORDER_ACCEPTED', 1000 + seq, '{\"orderId\": 5000}', 'PENDING', UTC_TIMESTAMP(6) "
             "FROM seq_1_to_500")
want = {Z: 600.0, W: 400.0}
ok(wait_until(lambda: series("sidecar_relay_tenant_pending")[0] == want, timeout=30),
   "Z passes them: the series are Z 600 and W 400, X gone from /metrics",
   detail=str(series("sidecar_relay_tenant_pending")[0]))
is_eq(sorted(series("sidecar_relay_tenant_oldest_pending_age_seconds")[0]), sorted(want),
      "the oldest-age series follow")
is_eq(gauge(r, "sidecar_relay_pending"), 1500, "the total 1500")
is_eq(r.stop(), 0, "clean exit")
for t in sizes:
    drop_tenant_db(t)
drain(q)

# --- the consumer: waiting deliveries by tenant, the top 1 ----------------------
P, Q = "p_" + sfx, "q_" + sfx  # no database: their deliveries wait in hand
sc = Sidecar(exchange=ex, consumer_extra={"prefetch": 64, "batch_max": 16, "db_outage_hold_ms": 60000},
             extra={"tenants": {"key": "extension:tenant", "database_url": tenant_url(),
                                "max_connections": 4, "metrics_top": 1}})
ok(sc.start(), "consumer with tenants started")
conn = amqp()
ch = conn.channel()
ch.confirm_delivery()
for t, n in ((P, 3), (Q, 5)):
    for _ in range(n):
        eid = str(uuid.uuid4())
        d = json.loads(event_body(eid))
        d["tenant"] = t
        publish(ch, ex, "ORDER_ACCEPTED", json.dumps(d), message_id=eid)
conn.close()
port = sc.http_port()


def waiting():
    text = sc.get("/metrics")[1]
    if isinstance(text, bytes):
        text = text.decode()
    return ({m.group(1): int(m.group(2)) for m in re.finditer(
        r'^sidecar_tenant_waiting_by_tenant\{consumer="[^"]*",tenant="([^"]+)"\} (\d+)$', text, re.M)},
        metric_sum(port, r"^sidecar_tenant_waiting\{[^}]*\} (\d+)$"))


ok(wait_until(lambda: waiting() == ({Q: 5}, 8), timeout=30),
   "sidecar_tenant_waiting_by_tenant: only Q's 5 (the top 1), sidecar_tenant_waiting the total 8",
   detail=str(waiting()))
sc.stop()
drain(q)
done()
