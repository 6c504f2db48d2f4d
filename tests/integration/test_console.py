"""`sidecar console` against the real servers and in a real browser (Debian's
headless Chromium driven by puppeteer-core, test_console.js): the page shows
the counts the database holds, the charts draw, a replay from the page
replays (the event is then consumed), a FAILED row set PENDING from the page
is published by a relay, hostile payloads execute nothing, actions without
the token (or from another origin, or on a read-only console) are refused,
and a dead database and broker show as such instead of a hanging page.
`sidecar inspect --aggregate` lists an aggregate's events in order.
Screenshots go to $SC_ARTIFACTS (the build's artifacts/console)."""
import re
import secrets
import urllib.parse
import uuid

import console_common
from console_common import ARTIFACTS, browser
from harness import *

for old in ("console-overview.png", "console-find.png", "console-dead-servers.png"):
    if os.path.exists(os.path.join(ARTIFACTS, old)):  # a screenshot is only ever of this run
        os.remove(os.path.join(ARTIFACTS, old))


class Console(console_common.Console):
    """The console over consumers, as the admin user (least privilege,
    sql/grants/admin.sql), with a token file when token is given."""

    def __init__(self, consumers, token=None, mysql_url=None, amqp_url=None, env=None):
        d = tempfile.mkdtemp(prefix="sc-console-")
        config = {"amqp": {"url": amqp_url or os.environ["SC_TEST_AMQP_URL"], "heartbeat_s": 5},
                  "mysql": {"url": mysql_url or os.environ["SC_TEST_MYSQL_ADMIN_URL"]},
                  "consumers": consumers,
                  "console": {"listen": "127.0.0.1:0", "sample_ms": 1000}}
        if token:
            path = os.path.join(d, "tokens")
            with open(path, "w") as f:
                f.write(f"# operators\nalice:{token}\n")
            os.chmod(path, 0o600)
            config["console"]["token_file"] = path
        super().__init__(config, env, dir=d)


def db_counts():
    got = dict(query("SELECT status, COUNT(*) FROM outbox_event GROUP BY status"))
    return {st: int(got.get(st, 0)) for st in ("PENDING", "PUBLISHING", "PUBLISHED", "FAILED")}


def insert_row(eid, status, agg_type="ORDER", agg_id="9000", etype="ORDER_ACCEPTED", payload='{"orderId": 9000}',
               lease_owner=None, lease_sql="NULL", created_sql="UTC_TIMESTAMP(6)"):
    with admin_db() as c, c.cursor() as cur:
        cur.execute("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version,"
                    " payload, status, lease_owner, lease_until, created_at) VALUES"
                    f" (%s, %s, %s, %s, 1, %s, %s, %s, {lease_sql}, {created_sql})",
                    (eid, agg_type, agg_id, etype, payload, status, lease_owner))


# ---- the data ------------------------------------------------------------------
clear_outbox()
sc = Sidecar(consumer_extra={"max_attempts": 1, "inspect_effects": [
    {"table": "notification_job", "columns": ["order_id", "status"]}]})
if not sc.start():
    bail("the consumer did not start")
name = sc.name
HOSTILE_1 = "<script>window.__probe=1</script>"
HOSTILE_2 = '"><img src=x onerror="window.__probe=2">'
conn = amqp()
ch = conn.channel()
ch.confirm_delivery()
# Two malformed messages the consumer dead-letters itself, bodies hostile.
for body in (HOSTILE_1, HOSTILE_2):
    publish(ch, sc.exchange, "ORDER_ACCEPTED", body, message_id=str(uuid.uuid4()))
ok(wait_until(lambda: queue_depth(sc.dlq) == 2, timeout=30), "the consumer dead-lettered the two hostile messages")
# A good event, dead-lettered earlier (a handler that refused it then): a
# replay must bring it back to the consumer, which applies it now.
replay_id = str(uuid.uuid4())
ch.basic_publish("", sc.dlq, event_body(replay_id, subject="4242"), pika.BasicProperties(
    content_type="application/cloudevents+json", delivery_mode=2, message_id=replay_id,
    headers={"x-sidecar-reason": "handler rejected: order 4242 was locked <b>then</b>",
             "x-sidecar-consumer": name, "x-sidecar-attempts": 5,
             "x-sidecar-failed-at": "2026-11-29T10:00:00.000000Z"}))
conn.close()
dlq_depth = 3

insert_outbox(3)                         # PENDING
insert_outbox(2, status="PUBLISHED")
insert_outbox(1, status="PUBLISHING", lease_owner="relay-elsewhere",
              lease_until_sql="UTC_TIMESTAMP(6) + INTERVAL 1 HOUR")
pending_id = str(uuid.uuid4())           # repaired since the relay refused it
insert_row(pending_id, "FAILED", agg_id="9100")
hostile_id = str(uuid.uuid4())
HOSTILE_3 = '<img src=x onerror="window.__probe=3">'
insert_row(hostile_id, "FAILED", agg_type=HOSTILE_3, payload=json.dumps({"html": "<script>window.__probe=4</script>"}))
agg_id = "agg-" + suffix()
agg_events = [str(uuid.uuid4()) for _ in range(3)]
for i, (eid, st) in enumerate(zip(agg_events, ("PUBLISHED", "PUBLISHED", "PENDING"))):
    insert_row(eid, st, agg_id=agg_id, etype=f"ORDER_STEP_{i}",
               created_sql=f"UTC_TIMESTAMP(6) - INTERVAL {10 - i} SECOND")
query("INSERT INTO consumed_event (consumer_name, event_id, consumed_at) VALUES (%s, %s, UTC_TIMESTAMP(6))",
      (name, agg_events[0]))
counts = db_counts()
diag(f"outbox: {counts}")

# ---- inspect --aggregate ----------------------------------------------------------
cfg = {"amqp": {"url": os.environ["SC_TEST_AMQP_URL"]}, "mysql": {"url": os.environ["SC_TEST_MYSQL_ADMIN_URL"]},
       "consumers": sc.config["consumers"]}
rc, out = run_sidecar_cmd(["inspect", "--aggregate", "ORDER", agg_id, "--json"], cfg)
try:
    got = json.loads(out)
except ValueError:
    got = {}
is_eq([e["event_id"] for e in got.get("events", [])], agg_events,
      "inspect --aggregate --json: every event of the aggregate, in order")
ok(rc == 0 and got.get("events") and got["events"][0]["consumed"].get(name) and
   got["events"][1]["consumed"].get(name, "x") is None,
   "inspect --aggregate: per consumer, consumed or not", detail=out[-1500:])
rc, out = run_sidecar_cmd(["inspect", "--aggregate", "ORDER", agg_id], cfg)
ok(rc == 0 and f"consumed by {name}" in out and f"not consumed by {name}" in out and "ORDER_STEP_2" in out,
   "inspect --aggregate prints the events and their consumption", detail=out)
rc, out = run_sidecar_cmd(["inspect", "--aggregate", "ORDER", "no-such-" + suffix()], cfg)
ok(rc == 1 and "no events" in out, "inspect --aggregate of an unknown aggregate: exit 1", detail=out)

# ---- the console's API ------------------------------------------------------------
token = secrets.token_hex(16)
# At debug level the console logs the text of each statement it prepares
# (parameters are bound, never in it): their plans are checked below.
con = Console(sc.config["consumers"], token=token, env={"SIDECAR_LOG_LEVEL": "debug"})
if not con.start():
    bail("console did not start")
ok(wait_until(lambda: con.request("/api/overview")[2]["database"]["state"] == "ok"
              and con.request("/api/overview")[2]["broker"]["state"] == "ok", timeout=20),
   "the console samples both servers")
status, hdrs, ov = con.request("/api/overview")
is_eq({k: v["n"] for k, v in ov["outbox"]["counts"].items()}, counts, "/api/overview: counts as the database holds")
ok(all(v["exact"] for v in ov["outbox"]["counts"].values()), "small counts are exact")
mine = [c for c in ov["consumers"] if c["name"] == name]
ok(mine and mine[0]["dlq_messages"] == dlq_depth, f"/api/overview: the DLQ holds {dlq_depth}", detail=mine)
status, hdrs, body = con.request("/")
ok(status == 200 and "script-src 'self'" in hdrs.get("Content-Security-Policy", "")
   and "default-src 'none'" in hdrs.get("Content-Security-Policy", "") and hdrs.get("X-Frame-Options") == "DENY",
   "the page is served with a strict CSP", detail=hdrs)
ok(isinstance(body, str) and "<script src=\"/app.js\" defer></script>" in body and "onclick" not in body
   and "http" not in body.replace("http-equiv", ""), "the page loads only its own script, nothing from elsewhere")
status, _, metrics = con.request("/metrics")
ok(status == 200 and f'sidecar_dlq_messages{{consumer="{name}",queue="{sc.dlq}"}} {dlq_depth}' in metrics,
   "/metrics: sidecar_dlq_messages of the consumer", detail=metrics[-1500:])
status, _, page = con.request("/api/outbox?status=PENDING&limit=2")
ok(status == 200 and len(page["rows"]) == 2 and page["next"], "/api/outbox pages by 2 with a cursor", detail=page)
status, _, page2 = con.request("/api/outbox?status=PENDING&limit=2&after=" + urllib.parse.quote(page["next"]))
ids = [r["event_id"] for r in page["rows"] + page2["rows"]]
is_eq(len(ids), len(set(ids)), "the next page holds other rows")
status, _, big = con.request("/api/outbox?status=PENDING&limit=100000")
ok(status == 200 and big["limit"] == 200, "a page is at most 200 rows", detail=big.get("limit"))
status, _, bad = con.request("/api/outbox?status=ANY")
is_eq(status, 400, "an unknown status is refused")
status, _, ev = con.request("/api/event?id=urn:uuid:" + replay_id.upper())
ok(status == 200 and ev.get("event_id") == replay_id and ev.get("uuid"), "/api/event takes any UUID spelling", detail=ev)
ok(ev.get("effects") == [{"consumer": name, "table": "notification_job", "rows": [], "more": False}]
   and "notification_job" not in ev, "/api/event: the configured effect table, no row for a dead letter", detail=ev)
with_effect = str(uuid.uuid4())
query("INSERT INTO notification_job (event_id, order_id, source_version, status, created_at)"
      " VALUES (%s, 7123, 1, 'PENDING', UTC_TIMESTAMP(6))", (with_effect,))
status, _, ev = con.request("/api/event?id=" + with_effect)
ok(status == 200 and ev.get("known") and ev["effects"][0]["rows"] == [{"order_id": 7123, "status": "PENDING"}],
   "/api/event: the effect's row, by inspect_effects' columns", detail=ev)
status, _, agg = con.request(f"/api/aggregate?type=ORDER&id={agg_id}&limit=2")
ok(status == 200 and [e["event_id"] for e in agg["events"]] == agg_events[:2] and agg["next"],
   "/api/aggregate: the first 2 events in order, and a cursor", detail=agg)
status, _, agg2 = con.request(f"/api/aggregate?type=ORDER&id={agg_id}&limit=2&after=" + urllib.parse.quote(agg["next"]))
ok(status == 200 and [e["event_id"] for e in agg2["events"]] == agg_events[2:] and agg2["next"] is None,
   "/api/aggregate: the rest on the next page", detail=agg2)
status, _, found = con.request("/api/dlq/find?id=" + replay_id)
ok(status == 200 and len(found["hits"]) == 1 and "locked" in found["hits"][0]["reason"],
   "/api/dlq/find finds the dead letter with its reason", detail=found)
status, _, dl = con.request(f"/api/dlq?consumer={name}&offset=0&limit=2")
ok(status == 200 and len(dl["messages"]) == 2 and dl["depth"] == dlq_depth, "/api/dlq pages the DLQ", detail=dl)
status, _, dl = con.request(f"/api/dlq?consumer={name}&offset=990&limit=100")
is_eq(status, 400, "a DLQ page past the first 1000 messages is refused")
is_eq(queue_depth(sc.dlq), dlq_depth, "browsing leaves every message in the DLQ")

# Actions: POST only, the token, the same origin, JSON.
json_hdr = {"Content-Type": "application/json"}
auth = dict(json_hdr, Authorization="Bearer " + token)
status, _, r = con.request("/api/outbox/pending", "POST", {"event_id": pending_id}, json_hdr)
is_eq(status, 401, "an action without the token is refused")
status, _, r = con.request("/api/outbox/pending", "POST", {"event_id": pending_id},
                           dict(auth, Origin="http://evil.example"))
is_eq(status, 403, "an action from another origin is refused, even with the token")
status, _, r = con.request("/api/outbox/pending", "POST", {"event_id": pending_id},
                           dict(auth, **{"Sec-Fetch-Site": "cross-site"}))
is_eq(status, 403, "an action the browser calls cross-site is refused")
status, _, r = con.request("/api/outbox/pending", "POST", {"event_id": pending_id},
                           dict(auth, **{"Content-Type": "text/plain"}))
is_eq(status, 415, "an action whose body is not JSON is refused (no form posts)")
status, _, r = con.request("/api/outbox/pending?event_id=" + pending_id)
is_eq(status, 405, "an action by GET is refused")
status, _, r = con.request("/api/overview", headers={"Host": "rebound.example:9465"})
is_eq(status, 421, "a request naming another host is refused (DNS rebinding)")
status, _, r = con.request("/api/outbox/pending", "POST", {"event_id": agg_events[0]}, auth)
ok(status == 409 and "not a FAILED row" in r.get("error", ""), "only a FAILED row can be set PENDING", detail=r)
ro = Console(sc.config["consumers"])
if ro.start():
    status, _, r = ro.request("/api/dlq/replay", "POST", {"consumer": name, "all": True}, auth)
    ok(status == 403 and "read-only" in r.get("error", ""), "a console without token_file refuses every action",
       detail=r)
    ro.stop()
is_eq(query("SELECT status FROM outbox_event WHERE event_id = %s", (pending_id,))[0][0], "FAILED",
      "no refused action changed anything")
refusals = [l for l in con.lines() if l.get("outcome") == "refused"]
ok(len(refusals) >= 4 and all("from 127.0.0.1:" in l["msg"] for l in refusals), "refusals are logged with the peer",
   detail=refusals[:2])

# ---- every statement the console ran reads an index range, nothing sorts a table ----
SAMPLE = {"created_at": "'2026-01-01 00:00:00'", "lease_until": "'2026-01-01 00:00:00'", "id": "1",
          "event_id": "'00000000-0000-4000-8000-000000000000'", "status": "'PENDING'",
          "consumer_name": "'x'", "aggregate_type": "'ORDER'", "aggregate_id": "'1'"}


def bind_sample(sql):
    """The statement with each ? replaced by a value of its column's type."""
    out, pos = [], 0
    for m in re.finditer(r"\?", sql):
        before = sql[:m.start()]
        col = re.findall(r"(\w+)\s*(?:=|>=|<=|>|<|IN\s*\((?:\?,\s*)*)\s*$", before)
        out.append(sql[pos:m.start()] + SAMPLE.get(col[-1] if col else "", "'0'"))
        pos = m.end()
    return "".join(out) + sql[pos:]


stmts = sorted({l["msg"][5:] for l in con.lines() if l.get("msg", "").startswith("sql: ")})
plans_bad, checked = [], 0
for sql in stmts:
    if not sql.lstrip().upper().startswith("SELECT"):
        continue
    with admin_db() as c, c.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute("EXPLAIN " + bind_sample(sql))
        rows = cur.fetchall()
    checked += 1
    for r in rows:
        extra = r.get("Extra") or ""
        if r.get("table") in ("outbox_event", "consumed_event") and (r.get("type") == "ALL" or not r.get("key")):
            plans_bad.append(f"{sql}\n  -> scans {r['table']}: {r}")
        if "filesort" in extra and r.get("table") == "outbox_event":
            plans_bad.append(f"{sql}\n  -> sorts: {r}")
        if "COUNT(*) FROM (SELECT 1" in sql and r.get("table") == "outbox_event" and "Using index" not in extra:
            plans_bad.append(f"{sql}\n  -> a count that reads rows, not the index: {r}")
ok(checked >= 8 and not plans_bad, f"each of the {checked} SELECTs the console ran reads an index range "
   "(no full scan, no sort of outbox_event, counts from the index alone)", detail="\n".join(plans_bad) or stmts)

# ---- the browser ------------------------------------------------------------------
browser({"mode": "main", "url": con.url("/"), "token": token, "counts": counts, "consumer": name,
         "dlq_depth": dlq_depth, "hostile": [HOSTILE_1, HOSTILE_2, HOSTILE_3, "<script>window.__probe=4</script>"],
         "replay_event_id": replay_id, "pending_event_id": pending_id,
         "lookup": {"query": "{" + agg_events[1].upper() + "}", "event_id": agg_events[1]},
         "aggregate": {"type": "ORDER", "id": agg_id, "n": 3}})

# What the page did happened: the replayed event is consumed, the FAILED row
# set PENDING is published by a relay.
ok(wait_until(lambda: query("SELECT COUNT(*) FROM consumed_event WHERE consumer_name = %s AND event_id = %s",
                            (name, replay_id))[0][0] == 1, timeout=30),
   "the event replayed from the page was consumed")
is_eq(queue_depth(sc.dlq), dlq_depth - 1, "the replayed message left the DLQ; the others stayed")
is_eq(query("SELECT status FROM outbox_event WHERE event_id = %s", (pending_id,))[0][0], "PENDING",
      "the row set PENDING from the page is PENDING")
relay = Relay(sc.exchange).start()
ok(wait_until(lambda: query("SELECT status FROM outbox_event WHERE event_id = %s", (pending_id,))[0][0]
              == "PUBLISHED", timeout=30), "a relay published the row set PENDING from the page")
relay.stop()
acts = [l["msg"] for l in con.lines() if l.get("outcome") in ("replay", "set_pending")]
ok(any("alice from 127.0.0.1" in m and "exit 0" in m for m in acts)
   and any(f"alice from 127.0.0.1" in m and "from FAILED to PENDING" in m for m in acts),
   "each action is logged with who and what", detail="\n".join(acts))
is_eq(con.stop(), 0, "the console stops cleanly on SIGTERM (exit 0; under ASan: nothing leaked)")
sc.stop()

# ---- a dead database and a dead broker ----------------------------------------------
hole = socket.socket()                  # accepts TCP, never says a word: a hung server
hole.bind(("127.0.0.1", 0))
hole.listen(16)
closed = socket.socket()                # nothing listens: refused at once
closed.bind(("127.0.0.1", 0))
dead_port = closed.getsockname()[1]
closed.close()
dead = Console(sc.config["consumers"], token=token,
               mysql_url=f"mysql://sidecar_admin:admin-secret@127.0.0.1:{hole.getsockname()[1]}/app",
               amqp_url=f"amqp://guest:guest@127.0.0.1:{dead_port}/%2f")
if dead.start():
    t0 = time.time()
    status, _, ov = dead.request("/api/overview", timeout=5)
    ok(status == 200 and time.time() - t0 < 1.0, f"/api/overview answers at once with both servers dead "
       f"({(time.time() - t0) * 1000:.0f} ms)")
    ok(wait_until(lambda: dead.request("/api/overview")[2]["broker"]["state"] == "error", timeout=10),
       "the broker shows as refusing")
    ok(wait_until(lambda: dead.request("/api/overview")[2]["database"]["state"] in ("stalled", "error"), timeout=15),
       "the database shows as not answering")
    t0 = time.time()
    status, _, r = dead.request("/api/outbox?status=FAILED", timeout=30)
    ok(status == 503 and "database" in r.get("error", "") and time.time() - t0 < 10,
       f"a list asked of a hung database fails in {time.time() - t0:.1f} s with the reason", detail=r)
    browser({"mode": "dead", "url": dead.url("/")})
    is_eq(dead.stop(), 0, "a console whose servers never answered stops cleanly too")
hole.close()

diag(f"screenshots in {ARTIFACTS}")
done()
