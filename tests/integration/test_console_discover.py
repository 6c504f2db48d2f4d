"""`sidecar console` with tenants.discover: the tenants it shows are the
databases whose name matches tenants.database_url's (cd_{tenant}) and that
hold an outbox_event table, listed by the relay's own listing
(tenant_discover.c) on the console's tenants sampler, every
tenants.discover_ms.

The two tenant databases present at start are in the selector and the
backlog table with their counts; ?tenant=NAME reads a discovered tenant's
database (overview, history, lists, Find); a database made while the
console runs appears within discover_ms + one sample, and one dropped
leaves the selector and the table (and ?tenant= for it is a 404); a
database whose tenant part tenants.names refuses is never shown and is
logged once; requests cost no listing (one per discover_ms, none per
request)."""
import re

import tenants_common
from console_common import Console
from harness import *
from tenants_common import ROOT, _root, _statements, drop_tenant_db, insert_tenant_outbox, \
    make_tenant_db, tenant_query

tenants_common.PREFIX = "cd_"  # a prefix of its own: discovery lists whatever matches
sfx = suffix()
A, B, C = "a_" + sfx, "b_" + sfx, "c_" + sfx
BAD = "BAD" + sfx  # upper case: the default tenants.names refuses it
SAMPLE_MS, DISCOVER_MS = 1000, 2000


def grant_admin(tenant):
    """sql/grants/admin.sql's grants on the tenant's database."""
    with _root() as c, c.cursor() as cur:
        for g in _statements(os.path.join(ROOT, "sql", "grants", "admin.sql")):
            if g.strip().upper().startswith("GRANT"):
                cur.execute(re.sub(r"\bON app\.", f"ON `{tenants_common.PREFIX + tenant}`.", g))


def overview(con, tenant=None):
    return con.request("/api/overview" + (f"?tenant={tenant}" if tenant else ""))


def mine(names):
    """The names of this run's tenants (other runs' cd_ databases may exist)."""
    return sorted(n for n in (names or []) if n.endswith(sfx))


def shown():
    """(the selector's names, {tenant: PENDING} of the table's rows that answered)."""
    status, _, ov = overview(con)
    if status != 200:
        return None, {}
    rows = (ov.get("tenants") or {}).get("rows", [])
    return mine(ov.get("tenants_list")), {r["tenant"]: r["counts"]["PENDING"]["n"] for r in rows
                                          if r["tenant"].endswith(sfx) and r["state"] == "ok"}


for t in (A, B, BAD):
    make_tenant_db(t)
    grant_admin(t)
a_ids = insert_tenant_outbox(A, 4)
b_ids = insert_tenant_outbox(B, 2, base=2000)

admin_url = os.environ["SC_TEST_MYSQL_ADMIN_URL"]
con = Console({"amqp": {"url": os.environ["SC_TEST_AMQP_URL"], "heartbeat_s": 5},
               "mysql": {"url": admin_url},
               "consumers": [{"name": "cd-" + sfx, "queue": "cd-" + sfx, "handler": HANDLER,
                              "bindings": [{"exchange": "ex-cd-" + sfx, "routing_key": "#"}]}],
               "console": {"listen": "127.0.0.1:0", "sample_ms": SAMPLE_MS},
               "tenants": {"key": "extension:tenant", "discover": True, "discover_ms": DISCOVER_MS,
                           "database_url": re.sub(r"/app$", "/cd_{tenant}", admin_url)}},
              env={"SIDECAR_LOG_LEVEL": "debug"})
if not con.start():
    bail("the console with tenants.discover did not start: " + con.text()[-1500:])

# The tenants present at start.
ok(wait_until(lambda: shown() == ([A, B], {A: 4, B: 2}), timeout=15),
   f"the selector and the table: the two tenant databases present at start, with their PENDING ({shown()})",
   detail=con.text()[-1500:])
status, _, ov = overview(con)
table = ov.get("tenants") or {"rows": [], "total": {"counts": {"PENDING": {"n": None}}}}
ok(BAD not in (ov.get("tenants_list") or []) and all(r["tenant"] != BAD for r in table["rows"]),
   "the database whose tenant part tenants.names refuses is not shown", detail=ov.get("tenants_list"))
ok(ov.get("scope") == "totals" and (table["total"]["counts"]["PENDING"]["n"] or 0) >= 6
   and (ov.get("tenants_discover") or {}).get("listed") is True,
   "without ?tenant the overview is the totals of the tenants found", detail=ov)

# ?tenant=NAME for a discovered tenant.
status, _, a = overview(con, A)
ok(status == 200 and a.get("scope") == "tenant" and a.get("tenant") == A
   and a.get("outbox", {}).get("counts", {}).get("PENDING", {}).get("n") == 4, f"?tenant={A}: its overview, 4 PENDING", detail=a)
status, _, page = con.request(f"/api/outbox?status=PENDING&limit=200&tenant={A}")
ok(status == 200 and {r["event_id"] for r in page.get("rows", [])} == set(a_ids),
   f"?tenant={A}: its 4 PENDING rows, none of {B}'s", detail=page)
status, _, ev = con.request(f"/api/event?id={b_ids[0]}&tenant={B}")
ok(status == 200 and (ev.get("outbox") or {}).get("status") == "PENDING", f"Find with ?tenant={B}: its event",
   detail=ev)
status, _, h = con.request(f"/api/history?tenant={A}")
ok(status == 200 and 4 in [v for v in (h.get("database") or {}).get("backlog", []) if v is not None],
   f"?tenant={A}: its backlog chart", detail=h)
status, _, r = overview(con, BAD)
is_eq(status, 404, "?tenant= the refused name: 404 (it is no tenant of this console)")

# A tenant database made while the console runs appears within
# discover_ms + one sample.
make_tenant_db(C)
grant_admin(C)
insert_tenant_outbox(C, 3, base=3000)
t0 = time.time()
ok(wait_until(lambda: shown() == ([A, B, C], {A: 4, B: 2, C: 3}), timeout=30),
   f"a tenant database made while it runs: in the selector and the table with its 3 PENDING ({shown()})",
   detail=con.text()[-1500:])
took = time.time() - t0
ok(took <= (DISCOVER_MS + SAMPLE_MS) / 1000 + 1.0,
   f"within discover_ms + one sample ({took:.1f} s <= {(DISCOVER_MS + SAMPLE_MS) / 1000:.0f} s + 1 s)")
status, _, c = overview(con, C)
ok(status == 200 and c.get("tenant") == C
   and c.get("outbox", {}).get("counts", {}).get("PENDING", {}).get("n") == 3,
   f"?tenant={C} works for the new tenant", detail=c)
status, _, page = con.request(f"/api/outbox?status=PENDING&tenant={C}")
is_eq(len(page.get("rows", [])) if status == 200 else status, 3, "and its list: 3 PENDING rows")
ok(any(l.get("msg", "").startswith(f"console: tenant {C}: ") and "found" in l.get("msg", "")
       for l in con.lines()), "the console logs the tenant found", detail=con.text()[-800:])

# Requests cost no listing: one information_schema query per discover_ms.
mark = len(con.lines())
t0 = time.time()
views = 0
while time.time() - t0 < 4.5:
    overview(con)
    overview(con, A)
    views += 2
took = time.time() - t0
time.sleep(0.05)
listings = sum(1 for l in con.lines()[mark:] if l.get("msg", "").startswith("console: tenants.discover: ")
               and " found, " in l["msg"])
ok(1 <= listings <= took / (DISCOVER_MS / 1000) + 1,
   f"{views} overviews in {took:.1f} s: {listings} listings (one per discover_ms, none a request)")

# A dropped tenant database leaves.
drop_tenant_db(B)
t0 = time.time()
ok(wait_until(lambda: shown()[0] == [A, C], timeout=30),
   f"a dropped tenant database leaves the selector ({shown()})", detail=con.text()[-1500:])
status, _, ov = overview(con)
table = ov.get("tenants") or {"rows": [{"tenant": B}], "total": {}}
ok(all(r["tenant"] != B for r in table["rows"]) and table["total"].get("unreachable") == 0,
   "and the table (not left there as unreachable)", detail=table)
status, _, r = overview(con, B)
is_eq(status, 404, f"?tenant={B} is a 404 once it is gone")
status, _, a = overview(con, A)
ok(status == 200 and a.get("outbox", {}).get("counts", {}).get("PENDING", {}).get("n") == 4,
   f"{A} still shows its 4 PENDING", detail=a)
ok(any(l.get("msg", "").startswith(f"console: tenant {B}: ") and "no longer found" in l.get("msg", "")
       for l in con.lines()), "the console logs the tenant gone", detail=con.text()[-800:])
refused = [l for l in con.lines() if BAD in l.get("msg", "") and "ignored" in l.get("msg", "")]
is_eq(len(refused), 1, "the refused database name is logged once")

is_eq(con.stop(), 0, "the console stops cleanly")
for t in (A, B, C, BAD):
    drop_tenant_db(t)
done()
