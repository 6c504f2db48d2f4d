"""examples/producers/python (PyMySQL) against the real servers: see
producers_common.py for what is run and checked; its second run takes the
event ids from the database. Also the SQL UUIDv7 expression of
docs/producers.md, as the page prints it: the program's copy is the same
text, and the ids it makes are lowercase v7 with the server's UTC time in
milliseconds, whatever the session time zone."""
import importlib.util

from producers_common import *

PROGRAM = os.path.join(ROOT, "examples", "producers", "python", "order_producer.py")
PY = "/usr/bin/python3"
r = run_cmd([PY, "-c", "import pymysql"])
if not os.path.exists(PY) or r.returncode != 0:
    toolchain_missing("python", f"{PY} with pymysql", "python3-pymysql")

# ---- the SQL expression, from the page --------------------------------------
page = open(os.path.join(ROOT, "docs", "producers.md")).read()
m = re.search(r"<!-- uuidv7-sql -->\s*```sql\n(.*?)```", page, re.S)
ok(m is not None, "docs/producers.md has the marked SQL UUIDv7 block")
doc_sql = m.group(1).strip().rstrip(";") if m else ""
spec = importlib.util.spec_from_file_location("order_producer", PROGRAM)
prog = importlib.util.module_from_spec(spec)
spec.loader.exec_module(prog)
norm = lambda s: " ".join(s.split())  # noqa: E731
is_eq(norm(prog.UUIDV7_SQL), norm(doc_sql), "the program's SQL UUIDv7 expression is the page's")
for tz in ("+00:00", "+05:30", "-08:00"):
    with admin_db() as c, c.cursor() as cur:
        cur.execute(f"SET time_zone = '{tz}'")
        ids = []
        t0 = time.time()
        for i in range(300):
            cur.execute(doc_sql)
            ids.append(cur.fetchone()[0])
        t1 = time.time()
    ok(all(V7.fullmatch(i) for i in ids) and len(set(ids)) == len(ids),
       f"session time zone {tz}: 300 ids from the SQL expression, all lowercase v7, all different",
       detail=[i for i in ids if not V7.fullmatch(i)][:5])
    ms = [int(i.replace("-", "")[:12], 16) for i in ids]
    ok(all(t0 * 1000 - 2000 <= x <= t1 * 1000 + 2000 for x in ms) and ms == sorted(ms),
       f"session time zone {tz}: their timestamps are now (Unix ms, UTC) and never go back", detail=ms[:5])

# ---- the reconcile's grants on MariaDB ------------------------------------------
user = "sc_sel_" + suffix()
with admin_db() as c, c.cursor() as cur:
    cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'sel-secret'")
    cur.execute(f"GRANT SELECT ON app.orders TO '{user}'@'%'")
try:
    conn = pymysql.connect(host="127.0.0.1", port=int(os.environ["SC_TEST_MYSQL_PORT"]), user=user,
                           password="sel-secret", database="app", autocommit=False)
    with conn.cursor() as cur:
        cur.execute("SELECT id, acceptance_event_id FROM orders WHERE tenant_id = %s AND request_id = %s"
                    " FOR UPDATE", ("grants", "none"))
    conn.commit()
    conn.close()
    sel_only = True
except pymysql.err.Error as e:
    sel_only = e
with admin_db() as c, c.cursor() as cur:
    cur.execute(f"DROP USER '{user}'@'%'")
is_eq(sel_only, True, "MariaDB runs the reconcile's FOR UPDATE for a user with SELECT alone on orders")

# ---- the program -----------------------------------------------------------------
run_suite("python", [PY, PROGRAM], extra_b=["--ids", "sql"])
done()
