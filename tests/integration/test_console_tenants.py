"""`sidecar console` with a `tenants` section, two tenants (acme, globex),
each its own database on the test server: the selector lists both, the
overview's table shows each tenant's PENDING and FAILED counts as inserted,
?tenant=acme shows acme's rows and never globex's (API and page), a name not
in tenants.list is a 404 page before any query, requests cost no statement
(the tenants are read by the sampler, one statement a tenant a sample), and
a tenant whose database is dropped shows as unreachable while the other
still shows, the page answering at once. With a tenant chosen the
dead-letter list and Find keep only that tenant's dead letters (by
x-sidecar-tenant), paged among themselves, and replay all (every tenant's)
is refused. In a real browser too (test_console.js, plan "tenants")."""
import re
import secrets

from console_common import Console, browser
from harness import *
from tenants_common import PREFIX, ROOT, _root, _statements, drop_tenant_db, insert_tenant_outbox, \
    make_tenant_db, tenant_query

TENANTS = ["acme", "globex"]


def grant_admin(tenant):
    """sql/grants/admin.sql's grants on the tenant's database."""
    with _root() as c, c.cursor() as cur:
        for g in _statements(os.path.join(ROOT, "sql", "grants", "admin.sql")):
            if g.strip().upper().startswith("GRANT"):
                cur.execute(re.sub(r"\bON app\.", f"ON `{PREFIX + tenant}`.", g))


def overview(con, tenant=None):
    return con.request("/api/overview" + (f"?tenant={tenant}" if tenant else ""))


def row_of(ov, tenant):
    rows = [r for r in (ov.get("tenants") or {}).get("rows", []) if r["tenant"] == tenant]
    return rows[0] if rows else None


for t in TENANTS:
    make_tenant_db(t)
    grant_admin(t)
acme_ids = insert_tenant_outbox("acme", 7)
globex_ids = insert_tenant_outbox("globex", 5, base=2000)
tenant_query("globex", "UPDATE outbox_event SET status = 'FAILED' WHERE event_id IN (%s, %s)",
             (globex_ids[0], globex_ids[1]))
want = {"acme": (7, 0), "globex": (3, 2)}

# Dead letters of one consumer's queue, of both tenants and of none (a
# delivery without a tenant), interleaved: acme's at positions 0, 3 and 5.
DLQ_CONSUMER = "ct-" + suffix()
dlq_queue = DLQ_CONSUMER + ".dlq"
dead = {"acme": [], "globex": [], None: []}
conn = amqp()
ch = conn.channel()
ch.queue_declare(DLQ_CONSUMER, durable=True)
ch.queue_declare(dlq_queue, durable=True)
ch.confirm_delivery()
for t in ("acme", "globex", None, "acme", "globex", "acme"):
    eid = str(uuid.uuid4())
    dead[t].append(eid)
    headers = {"x-sidecar-reason": "handler rejected" if t else "no tenant: extension tenant missing",
               "x-sidecar-consumer": DLQ_CONSUMER, "x-sidecar-attempts": 1}
    if t:
        headers["x-sidecar-tenant"] = t
    body = json.loads(event_body(eid))
    if t:
        body["tenant"] = t
    ch.basic_publish("", dlq_queue, json.dumps(body), pika.BasicProperties(
        content_type="application/cloudevents+json", delivery_mode=2, message_id=eid, headers=headers))
conn.close()

admin_url = os.environ["SC_TEST_MYSQL_ADMIN_URL"]
token = secrets.token_hex(16)
token_path = os.path.join(tempfile.mkdtemp(prefix="sc-console-tok-"), "tokens")
with open(token_path, "w") as f:
    f.write(f"alice:{token}\n")
os.chmod(token_path, 0o600)
con = Console({"amqp": {"url": os.environ["SC_TEST_AMQP_URL"], "heartbeat_s": 5},
               "mysql": {"url": admin_url},
               "consumers": [{"name": DLQ_CONSUMER, "queue": DLQ_CONSUMER, "handler": HANDLER,
                              "bindings": [{"exchange": "ex-" + DLQ_CONSUMER, "routing_key": "#"}]}],
               "console": {"listen": "127.0.0.1:0", "sample_ms": 1000, "token_file": token_path},
               "tenants": {"key": "extension:tenant", "list": TENANTS,
                           "database_url": re.sub(r"/app$", "/" + PREFIX + "{tenant}", admin_url)}},
              env={"SIDECAR_LOG_LEVEL": "debug"})
if not con.start():
    bail("the console with tenants did not start: " + con.text()[-1500:])


def counts_shown(ov):
    return {t: (r["counts"]["PENDING"]["n"], r["counts"]["FAILED"]["n"])
            for t in TENANTS for r in [row_of(ov, t)] if r and r["state"] == "ok"}


ok(wait_until(lambda: counts_shown(overview(con)[2]) == want, timeout=20),
   f"the tenants table: PENDING and FAILED of each tenant as inserted ({counts_shown(overview(con)[2])})",
   detail=con.text()[-1500:])
status, _, ov = overview(con)
is_eq(ov.get("tenants_list"), TENANTS, "the selector's list: every tenant of tenants.list")
is_eq(ov.get("scope"), "totals", "without ?tenant the overview is the totals")
is_eq([r["tenant"] for r in ov["tenants"]["rows"]], ["acme", "globex"], "sorted by backlog (7, then 3)")
tot = ov["tenants"]["total"]
ok(tot["counts"]["PENDING"]["n"] == 10 and tot["counts"]["FAILED"]["n"] == 2 and ov["tenants"]["more"] == 0
   and ov["outbox"]["counts"]["PENDING"]["n"] == 10, "the total line and the cards: 10 PENDING, 2 FAILED", detail=tot)
ok(all(r["oldest_pending_age_s"] is not None and r["oldest_pending_age_s"] >= 0 for r in ov["tenants"]["rows"]),
   "each row has its oldest PENDING age", detail=ov["tenants"]["rows"])

status, _, a = overview(con, "acme")
ok(status == 200 and a["scope"] == "tenant" and a["tenant"] == "acme" and a["outbox"]["counts"]["PENDING"]["n"] == 7
   and a["outbox"]["counts"]["FAILED"]["n"] == 0 and "tenants" not in a, "?tenant=acme: acme's counts (7, 0)", detail=a)
status, _, g = overview(con, "globex")
ok(status == 200 and g["outbox"]["counts"]["PENDING"]["n"] == 3 and g["outbox"]["counts"]["FAILED"]["n"] == 2,
   "?tenant=globex: globex's counts (3, 2)", detail=g)


def last_backlog(tenant=None):
    h = con.request("/api/history" + (f"?tenant={tenant}" if tenant else ""))[2]
    b = [v for v in ((h or {}).get("database") or {}).get("backlog", []) if v is not None]
    return b[-1] if b else None


ok(wait_until(lambda: last_backlog("acme") == 7 and last_backlog() == 10, timeout=10),
   f"the backlog chart: acme's with ?tenant=acme ({last_backlog('acme')}), the totals without ({last_backlog()})")
status, _, page = con.request("/api/outbox?status=PENDING&limit=200&tenant=acme")
got = {r["event_id"] for r in page.get("rows", [])}
ok(status == 200 and got == set(acme_ids), f"?tenant=acme: acme's 7 PENDING rows, none of globex's ({len(got)})",
   detail=page)
status, _, page = con.request("/api/outbox?status=FAILED&tenant=globex")
is_eq({r["event_id"] for r in page.get("rows", [])}, set(globex_ids[:2]), "?tenant=globex: its 2 FAILED rows")
status, _, ev = con.request(f"/api/event?id={globex_ids[2]}&tenant=acme")
ok(status == 200 and ev.get("outbox") is None, "an event of globex is not found with ?tenant=acme", detail=ev)
status, _, ev = con.request(f"/api/event?id={globex_ids[2]}&tenant=globex")
ok(status == 200 and (ev.get("outbox") or {}).get("status") == "PENDING", "and is with ?tenant=globex", detail=ev)
status, _, page = con.request("/api/outbox?status=PENDING")
ok(status == 200 and not ({r["event_id"] for r in page.get("rows", [])} & set(acme_ids + globex_ids)),
   "without ?tenant the lists read mysql.url's database", detail=page)

# An action in a tenant's database: set one of globex's FAILED rows PENDING.
auth = {"Content-Type": "application/json", "Authorization": "Bearer " + token}
status, _, r = con.request("/api/outbox/pending?tenant=acme", "POST", {"event_id": globex_ids[0]}, auth)
ok(status == 409 and "no row" in r.get("error", ""), "set PENDING with ?tenant=acme: acme has no such row (409)",
   detail=r)
is_eq(tenant_query("globex", "SELECT status FROM outbox_event WHERE event_id = %s", (globex_ids[0],))[0][0],
      "FAILED", "and globex's row is unchanged")
status, _, r = con.request("/api/outbox/pending?tenant=globex", "POST", {"event_id": globex_ids[0]}, auth)
ok(status == 200 and r.get("status") == "PENDING", "set PENDING with ?tenant=globex", detail=r)
is_eq(tenant_query("globex", "SELECT status FROM outbox_event WHERE event_id = %s", (globex_ids[0],))[0][0],
      "PENDING", "the row in globex's database is PENDING")
tenant_query("globex", "UPDATE outbox_event SET status = 'FAILED' WHERE event_id = %s", (globex_ids[0],))
status, _, r = con.request("/api/outbox/pending?tenant=initech", "POST", {"event_id": globex_ids[0]}, auth)
is_eq(status, 404, "an action naming a tenant not in tenants.list: 404")

# Dead letters with a tenant chosen: that tenant's only (x-sidecar-tenant),
# in queue order, paged among themselves; the depth stays the queue's.
def dlq(query_string):
    return con.request(f"/api/dlq?consumer={DLQ_CONSUMER}&" + query_string)


status, _, d = dlq("tenant=acme")
ok(status == 200 and d.get("tenant") == "acme" and [m["event_id"] for m in d["messages"]] == dead["acme"]
   and [m["position"] for m in d["messages"]] == [0, 3, 5] and d["depth"] == 6 and d["more"] is False
   and d["looked_at"] == 6, "the DLQ with ?tenant=acme: acme's 3 dead letters at their queue positions, "
   "depth 6 (every tenant's)", detail=d)
ok(all(m["headers"].get("x-sidecar-tenant") == "acme" for m in d["messages"]),
   "each of them carries x-sidecar-tenant acme", detail=d)
status, _, d = dlq("tenant=globex")
is_eq([m["event_id"] for m in d.get("messages", [])], dead["globex"], "with ?tenant=globex: globex's 2")
status, _, d = dlq("offset=0")
is_eq((len(d.get("messages", [])), d.get("tenant")), (6, None),
      "without ?tenant: all 6, the one without a tenant too")
status, _, d = dlq("tenant=acme&limit=2")
ok([m["event_id"] for m in d["messages"]] == dead["acme"][:2] and d["more"] is True,
   "a page of 2 of acme's: the first two, more follow", detail=d)
status, _, d = dlq("tenant=acme&limit=2&offset=2")
ok([m["event_id"] for m in d["messages"]] == dead["acme"][2:] and d["more"] is False,
   "the next page: the third, none after it", detail=d)
status, _, f = con.request(f"/api/dlq/find?id={dead['globex'][0]}&tenant=acme")
ok(status == 200 and f["hits"] == [] and f["tenant"] == "acme", "Find with ?tenant=acme: globex's dead letter "
   "is not among acme's", detail=f)
status, _, f = con.request(f"/api/dlq/find?id={dead['globex'][0]}&tenant=globex")
ok(status == 200 and [h["event_id"] for h in f["hits"]] == [dead["globex"][0]], "and is found with ?tenant=globex",
   detail=f)
status, _, f = con.request(f"/api/dlq/find?id={dead[None][0]}")
is_eq([h["event_id"] for h in f.get("hits", [])], dead[None], "the one without a tenant is found without ?tenant")
status, _, r = con.request("/api/dlq/replay?tenant=acme", "POST", {"consumer": DLQ_CONSUMER, "all": True}, auth)
ok(status == 400 and "every tenant" in r.get("error", ""), "replay all with ?tenant=acme: refused (400), it "
   "would replay every tenant's", detail=r)
is_eq(queue_depth(dlq_queue), 6, "and nothing left the dead-letter queue")

# A name that is not a tenant: refused before any query.
before = len(con.lines())
status, _, r = overview(con, "initech")
ok(status == 404 and "not in tenants.list" in r.get("error", ""), "?tenant=initech (not listed): 404", detail=r)
status, hdrs, body = con.request("/?tenant=initech")
ok(status == 404 and hdrs.get("Content-Type", "").startswith("text/html") and "not in tenants.list" in body
   and "default-src 'none'" in hdrs.get("Content-Security-Policy", ""), "the page for it: a 404 page that says why",
   detail=body)
status, _, body = con.request("/?tenant=%3Cb%3Ex%3C/b%3E")
ok(status == 400 and "<b>" not in body, "a name no tenant can have: 400, nothing of it as markup", detail=body)
status, _, r = con.request("/api/outbox?status=PENDING&tenant=" + PREFIX + "acme")
is_eq(status, 404, "a database name is not a tenant name (404)")
sqls = [l["msg"] for l in con.lines()[before:] if l.get("msg", "").startswith("sql: ")
        and "initech" in l["msg"]]
is_eq(sqls, [], "no statement names the refused tenant")

# Requests cost no statement: the tenants are read once a sample.
t0 = time.time()
mark = len(con.lines())
views = 0
while time.time() - t0 < 3.5:
    overview(con, "acme")
    overview(con)
    views += 2
took = time.time() - t0
time.sleep(0.05)
n = sum(1 for l in con.lines()[mark:] if l.get("msg", "").startswith("sql: ") and f"`{PREFIX}acme`" in l["msg"])
ok(1 <= n <= took + 2, f"{views} overviews in {took:.1f} s: {n} statements on acme's database "
   "(one a sample of 1 s, none a request)")

# One tenant's database gone: unreachable, the other still shown.
drop_tenant_db("globex")
ok(wait_until(lambda: (row_of(overview(con)[2], "globex") or {}).get("state") == "unreachable", timeout=15),
   "a dropped tenant database shows as unreachable", detail=row_of(overview(con)[2], "globex"))
t0 = time.time()
status, _, ov = overview(con)
took = time.time() - t0
gx, ac = row_of(ov, "globex"), row_of(ov, "acme")
ok(gx and gx["error_class"] and gx["error"] and gx["error"].startswith("error "),
   "with the error and its class", detail=gx)
ok(ac and ac["state"] == "ok" and ac["counts"]["PENDING"]["n"] == 7 and took < 1.0,
   f"acme still shows its 7 PENDING, the overview answering in {took * 1000:.0f} ms", detail=ac)
is_eq([r["tenant"] for r in ov["tenants"]["rows"]][0], "globex", "the unreachable tenant is listed first")
is_eq(ov["tenants"]["total"]["unreachable"], 1, "the total line counts 1 unreachable")
status, _, metrics = con.request("/metrics")
ok("sidecar_console_tenants_unreachable 1\n" in metrics and 'sidecar_console_sample_seconds{server="tenants"}'
   in metrics, "/metrics: sidecar_console_tenants_unreachable 1, the sweep's length", detail=metrics[-800:])
ok(any(l.get("msg", "").startswith("console: tenant globex: error ") for l in con.lines()),
   "the console logs the tenant that stopped answering", detail=con.text()[-800:])
status, _, r = con.request("/api/outbox?status=PENDING&tenant=globex")
ok(status in (500, 503) and "database" in r.get("error", ""), "a list of the dropped tenant fails with the reason",
   detail=r)

browser({"mode": "tenants", "url": con.url("/"), "tenants": TENANTS, "acme": {"PENDING": 7, "FAILED": 0},
         "unreachable": "globex", "dlq_acme": dead["acme"]})
make_tenant_db("globex")
grant_admin("globex")
ok(wait_until(lambda: (row_of(overview(con)[2], "globex") or {}).get("state") == "ok", timeout=15),
   "once the database is back the tenant shows again")
ok(wait_until(lambda: any(l.get("msg") == "console: tenant globex answers again" for l in con.lines()), timeout=5),
   "and the console logs it once")
is_eq(con.stop(), 0, "the console stops cleanly")
for t in TENANTS:
    drop_tenant_db(t)
conn = amqp()
ch = conn.channel()
ch.queue_delete(dlq_queue)
ch.queue_delete(DLQ_CONSUMER)
conn.close()
done()
