"""relay.ordering "per_aggregate": the claim statements the relay runs (it logs
them at debug level on start), against real MariaDB.

- The plan: index-ordered, no filesort, no full scan; the outer read on the
  claim or lease index, every per-aggregate test on ix_outbox_event_order.
- What they take: exactly the heads of the aggregates (every earlier event
  PUBLISHED), oldest first; nothing of an aggregate with a FAILED row, a live
  lease or an earlier expired lease; an expired lease only when it is its
  aggregate's head.
- The races: a predecessor another session holds locked (a concurrent claim)
  or is marking PUBLISHED (uncommitted) still holds its successor back, under
  READ COMMITTED and REPEATABLE READ: the tests are non-locking reads that
  SKIP LOCKED does not skip.
- Flatness: rows read and time at a backlog of 1,000 and 100,000 pending
  events (ratio reported), and with an aggregate of 10,000 pending events.
- The schema check: a per_aggregate relay refuses a database without the
  index, naming 008_outbox_order.sql; an unordered relay does not need it."""
import re
import time

import pymysql

from harness import *

BATCH = 64
clear_outbox()
r = Relay("orderclaim-" + suffix(), batch=BATCH)
r.config["relay"]["ordering"] = "per_aggregate"
with open(r.config_path, "w") as f:
    json.dump(r.config, f)
r.start(env={"SIDECAR_LOG_LEVEL": "debug"})
wait_until(lambda: len([l for l in r.lines() if "claim statement" in l.get("msg", "")]) >= 2 or not r.alive(),
           timeout=30)
stmts = {}
for l in r.lines():
    m = re.match(r"relay claim statement \((expired leases|pending)\): (.*)", l.get("msg", ""))
    if m:
        stmts[m.group(1)] = m.group(2)
is_eq(sorted(stmts), ["expired leases", "pending"], "the per_aggregate relay logged both claim statements")
is_eq(r.stop(), 0, "relay stopped")
ok(all("ix_outbox_event_order" in s for s in stmts.values()), "both test the aggregate through ix_outbox_event_order")


def bulk(n, status="PENDING", agg="CONCAT('a', seq)", created="UTC_TIMESTAMP(6) - INTERVAL 100000 SECOND + INTERVAL seq SECOND",
         lease="NULL", owner=None, atype="ORDER", published="NULL"):
    query("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version,"
          " payload, status, lease_owner, lease_until, created_at, published_at)"
          f" SELECT UUID(), %s, {agg}, 'ORDER_ACCEPTED', 1, '{{}}', %s, %s, {lease}, {created}, {published}"
          f" FROM seq_1_to_{n}", (atype, status, owner))


def plan_problems(sql, outer_key):
    plan = query("EXPLAIN FORMAT=JSON " + sql)[0][0]
    probs = []
    if "filesort" in plan:
        probs.append("filesort")
    access = re.findall(r'"access_type":\s*"(\w+)"', plan)
    if any(t in ("ALL", "index") for t in access):
        probs.append(f"full scan (access_type {access})")
    keys = re.findall(r'"key":\s*"(\w+)"', plan)
    if not keys or keys[0] != outer_key or any(k != "ix_outbox_event_order" for k in keys[1:]) or len(keys) < 2:
        probs.append(f"keys {keys}, expected {outer_key} then ix_outbox_event_order")
    return probs, plan


def rows_read(sql):
    an = query("ANALYZE FORMAT=JSON " + sql)[0][0]
    return max(float(x) for x in re.findall(r'"r_rows":\s*([0-9.]+)', an)), an


# A backlog of every kind: 3,000 single-event aggregates; 300 aggregates of 5
# pending events; PUBLISHED history; 50 aggregates with a FAILED head; 50 with
# a live lease at their head; 50 whose head's lease expired (events behind).
bulk(3000)
bulk(1500, agg="CONCAT('m', MOD(seq, 300))")
bulk(2000, status="PUBLISHED", agg="CONCAT('m', MOD(seq, 300))",
     created="UTC_TIMESTAMP(6) - INTERVAL 200000 SECOND + INTERVAL seq SECOND", published="UTC_TIMESTAMP(6)")
for kind, status, lease, owner in (("f", "FAILED", "NULL", None),
                                   ("l", "PUBLISHING", "UTC_TIMESTAMP(6) + INTERVAL 1 HOUR", "live-worker"),
                                   ("x", "PUBLISHING", "UTC_TIMESTAMP(6) - INTERVAL seq SECOND", "dead-worker")):
    bulk(50, status=status, agg=f"CONCAT('{kind}', seq)", lease=lease, owner=owner,
         created="UTC_TIMESTAMP(6) - INTERVAL 150000 SECOND + INTERVAL seq SECOND")
    bulk(100, agg=f"CONCAT('{kind}', MOD(seq, 50) + 1)")
query("ANALYZE TABLE outbox_event")

EXPECTED_KEY = {"expired leases": "ix_outbox_event_lease", "pending": "ix_outbox_event_claim"}
for kind, sql in stmts.items():
    probs, plan = plan_problems(sql, EXPECTED_KEY[kind])
    ok(not probs, f"{kind}: index-ordered, no filesort, no full scan, every test on ix_outbox_event_order",
       detail=[probs, plan])


def heads():
    """The heads by a plain read of the whole table (the rule itself)."""
    rows = query("SELECT event_id, aggregate_type, aggregate_id, status, created_at FROM outbox_event"
                 " ORDER BY aggregate_type, aggregate_id, event_version, created_at, event_id")
    out, blocked, seen = [], set(), set()
    failed = {(t, a) for _, t, a, s, _ in rows if s == "FAILED"}
    for eid, t, a, s, c in rows:
        k = (t, a)
        if k in seen or k in failed:
            continue
        if s == "PUBLISHED":
            continue
        seen.add(k)
        out.append((s, c, eid))
    return out


h = heads()
want_pending = [e for _, e in sorted((c, e) for s, c, e in h if s == "PENDING")][:BATCH]
got = [g[0] for g in query(stmts["pending"])]
is_eq(got, want_pending, "pending: exactly the aggregate heads, oldest first")
got_all = {g[0] for g in query(stmts["pending"].replace(f"LIMIT {BATCH}", "LIMIT 100000"))}
aggs = query("SELECT aggregate_id FROM outbox_event WHERE event_id IN (%s)" % ",".join(["%s"] * len(got_all)),
             list(got_all))
ids = [a[0] for a in aggs]
ok(len(ids) == len(set(ids)), "at most one event per aggregate in a claim")
ok(not any(a[0] in "flx" for a in ids), "nothing behind a FAILED row, a live lease or an expired lease",
   detail=[a for a in ids if a[0] in "flx"][:5])
want_exp = query("SELECT event_id FROM outbox_event WHERE status = 'PUBLISHING' AND lease_owner = 'dead-worker'"
                 " ORDER BY lease_until")
got = query(stmts["expired leases"])
is_eq([g[0] for g in got], [w[0] for w in want_exp][:BATCH], "expired leases: the expired heads, oldest lease first")
# An expired lease behind an earlier PENDING event (a late insert) is held.
late = query("SELECT aggregate_id, created_at FROM outbox_event WHERE lease_owner = 'dead-worker' LIMIT 1")[0]
late_id = str(uuid.uuid4())
query("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version, payload,"
      " status, created_at) VALUES (%s, 'ORDER', %s, 'T', 1, '{}', 'PENDING', %s - INTERVAL 1 SECOND)",
      (late_id, late[0], late[1]))
exp_ids = [g[0] for g in query(stmts["expired leases"].replace(f"LIMIT {BATCH}", "LIMIT 1000"))]
held = query("SELECT event_id FROM outbox_event WHERE lease_owner = 'dead-worker' AND aggregate_id = %s", (late[0],))[0][0]
ok(held not in exp_ids and len(exp_ids) == 49, "an expired lease with an earlier PENDING event is not taken")
ok(late_id in {g[0] for g in query(stmts["pending"].replace(f"LIMIT {BATCH}", "LIMIT 100000"))},
   "and the earlier event is (it is now the head)")

# ---- the races: a predecessor in another session's hands ----------------------


def session(iso):
    c = pymysql.connect(unix_socket=os.environ["SC_TEST_MYSQL_SOCKET"], user="root", database="app",
                        autocommit=False)
    c.cursor().execute(f"SET SESSION TRANSACTION ISOLATION LEVEL {iso}")
    return c


clear_outbox()
agg_ids = []
with admin_db() as c, c.cursor() as cur:
    for k in range(3):
        eid = str(uuid.uuid4())
        agg_ids.append(eid)
        cur.execute("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version,"
                    " payload, status, created_at) VALUES (%s, 'ORDER', 'race', 'T', %s, '{}', 'PENDING',"
                    " UTC_TIMESTAMP(6) + INTERVAL %s SECOND)", (eid, k + 1, k))
    cur.execute("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version,"
                " payload, status, created_at) VALUES (UUID(), 'ORDER', 'other', 'T', 1, '{}', 'PENDING',"
                " UTC_TIMESTAMP(6))")
for iso in ("READ COMMITTED", "REPEATABLE READ"):
    a, b = session(iso), session(iso)
    ca, cb = a.cursor(), b.cursor()
    if iso == "REPEATABLE READ":  # b's snapshot from before a's change
        cb.execute("SELECT COUNT(*) FROM outbox_event")
    ca.execute("SELECT event_id FROM outbox_event WHERE event_id = %s FOR UPDATE", (agg_ids[0],))
    cb.execute(stmts["pending"])
    got = [g[0] for g in cb.fetchall()]
    b.rollback()
    ok(agg_ids[0] not in got and agg_ids[1] not in got and len(got) == 1,
       f"{iso}: head locked by a concurrent claim: skipped, and its successor not taken ({len(got)} taken)")
    ca.execute("UPDATE outbox_event SET status = 'PUBLISHING', lease_owner = 'x', lease_until = UTC_TIMESTAMP(6)"
               " + INTERVAL 1 HOUR WHERE event_id = %s", (agg_ids[0],))
    a.commit()
    ca.execute("UPDATE outbox_event SET status = 'PUBLISHED', lease_owner = NULL, lease_until = NULL"
               " WHERE event_id = %s", (agg_ids[0],))
    cb.execute(stmts["pending"])
    got = [g[0] for g in cb.fetchall()]
    b.rollback()
    ok(agg_ids[1] not in got, f"{iso}: head being marked PUBLISHED (uncommitted): successor not taken")
    a.commit()
    cb.execute(stmts["pending"])
    got = [g[0] for g in cb.fetchall()]
    b.rollback()
    ok(agg_ids[1] in got and agg_ids[2] not in got, f"{iso}: once PUBLISHED is committed, the next one and only it")
    ca.execute("UPDATE outbox_event SET status = 'PENDING' WHERE event_id = %s", (agg_ids[0],))
    a.commit()
    a.close()
    b.close()

# ---- flatness -----------------------------------------------------------------


def timed(sql, reps=20):
    """Median time of the claim statement (a locking read, rolled back)."""
    c = session("READ COMMITTED")
    cur = c.cursor()
    cur.execute(sql)  # warm the buffer pool first
    cur.fetchall()
    c.rollback()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        cur.execute(sql)
        cur.fetchall()
        ts.append(time.perf_counter() - t0)
        c.rollback()
    c.close()
    return sorted(ts)[len(ts) // 2] * 1000


def backlog(n):
    clear_outbox()
    bulk(n)
    query("ANALYZE TABLE outbox_event")


sql = stmts["pending"]
backlog(1000)
r1, _ = rows_read(sql)
t1 = timed(sql)
backlog(100000)
r100, an = rows_read(sql)
t100 = timed(sql)
diag(f"claim of {BATCH} (pending, per_aggregate): backlog 1,000: {t1:.2f} ms, {r1:.0f} rows read;"
     f" backlog 100,000: {t100:.2f} ms, {r100:.0f} rows read; time ratio {t100 / t1:.2f}")
ok(r100 <= BATCH + 1 and r1 <= BATCH + 1, f"rows read bounded by the LIMIT at 1,000 and 100,000 ({r1}, {r100})",
   detail=an)
ok(t100 / t1 < 4, f"claim time flat in the backlog: 100,000 / 1,000 = {t100 / t1:.2f}")
# A hot aggregate of 10,000 pending events beside the 100,000, interleaved
# in time (every tenth event of the backlog is its): its non-heads are read
# and passed over, one dive each.
bulk(10000, agg="'hot'", created="UTC_TIMESTAMP(6) - INTERVAL 100000 SECOND + INTERVAL seq * 10 SECOND - INTERVAL 500 MICROSECOND")
query("ANALYZE TABLE outbox_event")
rh, _ = rows_read(sql)
th = timed(sql)
diag(f"with an aggregate of 10,000 pending events interleaved (1 in 11 of the oldest): {th:.2f} ms, {rh:.0f} rows read")
ok(rh <= BATCH + 10, f"interleaved, it costs only its own events among the rows read ({rh})")
# The worst case: its 10,000 events all older than the rest.
query("UPDATE outbox_event SET created_at = created_at - INTERVAL 1000000 SECOND WHERE aggregate_id = 'hot'")
rw, _ = rows_read(sql)
tw = timed(sql, reps=10)
diag(f"with the 10,000 all older than every other pending event: {tw:.2f} ms, {rw:.0f} rows read"
     f" (each claim reads them: {tw / t100:.1f} x the claim without it)")
ok(BATCH + 9999 - 1 <= rw <= BATCH + 10000 + 1, f"worst case: its own 10,000 events read, not the backlog's ({rw})")

# ---- MySQL 8 syntax (the tests run MariaDB only): node-sql-parser's MySQL
# grammar, with the index hints (which it lacks) taken out first.
import subprocess  # noqa: E402

from node_deps import node_modules  # noqa: E402

node_dir = node_modules()
for kind, text in stmts.items():
    bare = re.sub(r" FORCE INDEX \((\w+)\)", "", text)
    p = subprocess.run(["node", "-e", "const {Parser}=require('node-sql-parser');"
                        "new Parser().astify(process.argv[1], {database: 'MySQL'}); console.log('parsed')", bare],
                       env=dict(os.environ, NODE_PATH=node_dir), capture_output=True, text=True, timeout=60)
    ok(p.returncode == 0 and "parsed" in p.stdout, f"{kind}: parses as MySQL syntax", detail=p.stderr[-800:])

# ---- the schema check ---------------------------------------------------------
clear_outbox()
query("ALTER TABLE outbox_event DROP INDEX ix_outbox_event_order")
try:
    rc, out = run_sidecar_cmd(["relay"], r.config, timeout=30)
    is_eq(rc, 2, "a per_aggregate relay refuses a database without ix_outbox_event_order")
    ok("008_outbox_order.sql" in out, "naming the migration", detail=out[-600:])
    unordered = json.loads(json.dumps(r.config))
    unordered["relay"]["ordering"] = "none"
    rc, out = run_sidecar_cmd(["check"], unordered, timeout=30)
    ok("schema has what the relay needs" in out, "an unordered relay does not need it", detail=out[-600:])
finally:
    for f in ("008_outbox_order.sql", "012_outbox_order_version.sql"):
        apply_sql_file(os.path.join(os.path.dirname(__file__), "..", "..", "sql", "schema", f))
rc, out = run_sidecar_cmd(["check"], r.config, timeout=30)
ok("schema has what the relay needs" in out, "after 008 and 012 the per_aggregate relay's check passes",
   detail=out[-600:])
bad = json.loads(json.dumps(r.config))
bad["relay"]["ordering"] = "per_key"
rc, out = run_sidecar_cmd(["relay"], bad, timeout=30)
ok(rc == 2 and "relay.ordering" in out, "an unknown relay.ordering is refused at start naming the key", detail=out)
done()
