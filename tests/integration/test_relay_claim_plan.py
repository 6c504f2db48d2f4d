"""Issue 11.1: the relay's claim statements read one index range each, in
index order, with LIMIT and SKIP LOCKED: no filesort, no full scan, and the
rows they read are bounded by the LIMIT, not by the backlog. The statements
are the exact text the relay runs (it logs them at debug level on start).
Also: the text parses as MySQL 8 syntax (node-sql-parser's MySQL grammar,
with the index hint checked separately since that grammar lacks hints), and
the old single `OR` statement fails the same plan check (the check can fail)."""
import re
import subprocess

from harness import *
from node_deps import node_modules

BATCH = 64
clear_outbox()
r = Relay("claimplan-" + suffix(), batch=BATCH).start(env={"SIDECAR_LOG_LEVEL": "debug"})
wait_until(lambda: len([l for l in r.lines() if "claim statement" in l.get("msg", "")]) >= 2 or not r.alive(),
           timeout=30)
stmts = {}
for l in r.lines():
    m = re.match(r"relay claim statement \((expired leases|pending)\): (.*)", l.get("msg", ""))
    if m:
        stmts[m.group(1)] = m.group(2)
is_eq(sorted(stmts), ["expired leases", "pending"], "the relay logged both claim statements")
is_eq(r.stop(), 0, "relay stopped")

# A backlog far larger than the batch, of every kind: PENDING, expired and
# live leases, PUBLISHED history.
def bulk(n, status, lease_sql, owner, published_sql="NULL"):
    query("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version,"
          " payload, status, lease_owner, lease_until, created_at, published_at)"
          f" SELECT UUID(), 'ORDER', seq, 'ORDER_ACCEPTED', 1, '{{}}', %s, %s, {lease_sql},"
          f" UTC_TIMESTAMP(6) - INTERVAL seq SECOND, {published_sql} FROM seq_1_to_{n}", (status, owner))

bulk(4000, "PENDING", "NULL", None)
bulk(500, "PUBLISHING", "UTC_TIMESTAMP(6) - INTERVAL seq SECOND", "dead-worker")
bulk(500, "PUBLISHING", "UTC_TIMESTAMP(6) + INTERVAL seq SECOND", "live-worker")
bulk(4000, "PUBLISHED", "NULL", None, "UTC_TIMESTAMP(6)")
query("ANALYZE TABLE outbox_event")

EXPECTED_KEY = {"expired leases": "ix_outbox_event_lease", "pending": "ix_outbox_event_claim"}


def plan_problems(sql, want_key):
    """What is wrong with the plan of sql: filesort, a full scan, another key."""
    plan = query("EXPLAIN FORMAT=JSON " + sql)[0][0]
    probs = []
    if "filesort" in plan:
        probs.append("filesort")
    tables = re.findall(r'"access_type":\s*"(\w+)"', plan)
    if any(t in ("ALL", "index") for t in tables):
        probs.append(f"full scan (access_type {tables})")
    keys = re.findall(r'"key":\s*"(\w+)"', plan)
    if want_key and keys != [want_key]:
        probs.append(f"key {keys}, expected {want_key}")
    return probs, plan


for kind, sql in stmts.items():
    probs, plan = plan_problems(sql, EXPECTED_KEY[kind])
    ok(not probs, f"{kind}: one index range in index order, no filesort, no full scan", detail=[probs, plan])
    # ANALYZE runs it (autocommit: its locks end with it) and reports the rows read.
    an = query("ANALYZE FORMAT=JSON " + sql)[0][0]
    r_rows = [float(x) for x in re.findall(r'"r_rows":\s*([0-9.]+)', an)]
    ok(r_rows and max(r_rows) <= BATCH + 1, f"{kind}: rows read bounded by the LIMIT ({r_rows}), not the backlog",
       detail=an)

# What the statements take: expired leases oldest lease first, PENDING oldest
# first, never a live lease.
got = query(stmts["expired leases"])
want = query("SELECT event_id FROM outbox_event WHERE status = 'PUBLISHING' AND lease_until < UTC_TIMESTAMP(6)"
             f" ORDER BY lease_until LIMIT {BATCH}")
ok(len(got) == BATCH and [g[0] for g in got] == [w[0] for w in want], "expired leases: the oldest leases, in order",
   detail=[got[:3], want[:3]])
owners = query("SELECT DISTINCT lease_owner FROM outbox_event WHERE event_id IN (%s)" %
               ",".join(["%s"] * len(got)), [g[0] for g in got])
is_eq(owners, (("dead-worker",),), "no live lease among them")
got = query(stmts["pending"])
want = query(f"SELECT event_id FROM outbox_event WHERE status = 'PENDING' ORDER BY created_at, event_id LIMIT {BATCH}")
ok(len(got) == BATCH and [g[0] for g in got] == [w[0] for w in want], "pending: the oldest rows by (created_at, event_id)",
   detail=[got[:3], want[:3]])

# The check can fail: the seed's single OR statement sorts every pending row.
old = ("SELECT event_id FROM outbox_event WHERE status = 'PENDING' OR (status = 'PUBLISHING' AND"
       f" lease_until < UTC_TIMESTAMP(6)) ORDER BY created_at, event_id LIMIT {BATCH} FOR UPDATE SKIP LOCKED")
probs, _ = plan_problems(old, None)
ok("filesort" in probs, f"the old OR claim is caught by the same check ({probs})")

# MySQL 8 syntax: the grammar of node-sql-parser has no index hints, so the
# hint is checked on its own (FORCE INDEX (name) naming an index of the
# table, MySQL 8 and MariaDB both accept it) and the rest is parsed.
node_dir = node_modules()
hint = re.compile(r" FORCE INDEX \((\w+)\) ")
for kind, sql in stmts.items():
    m = hint.search(sql)
    ok(m and m.group(1) == EXPECTED_KEY[kind], f"{kind}: index hint names {EXPECTED_KEY[kind]}")
    bare = hint.sub(" ", sql)
    p = subprocess.run(["node", "-e", "const {Parser}=require('node-sql-parser');"
                        "new Parser().astify(process.argv[1], {database: 'MySQL'}); console.log('parsed')", bare],
                       env=dict(os.environ, NODE_PATH=node_dir), capture_output=True, text=True, timeout=60)
    ok(p.returncode == 0 and "parsed" in p.stdout, f"{kind}: parses as MySQL syntax", detail=p.stderr[-800:])
p = subprocess.run(["node", "-e", "const {Parser}=require('node-sql-parser');"
                    "new Parser().astify(process.argv[1], {database: 'MySQL'})",
                    "SELECT a FROM t LIMIT 5 FOR UPDATE SKIP LOCKED RETURNING a"],
                   env=dict(os.environ, NODE_PATH=node_dir), capture_output=True, text=True, timeout=60)
ok(p.returncode != 0, "the MySQL grammar check rejects text MySQL does not accept")
clear_outbox()
done()
