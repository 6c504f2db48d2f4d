"""The producer library (sc_outbox_write) with callers that break its one
transaction, through tests/integration/outbox_probe.c against the real server:

1. the connection already has a transaction open (BEGIN, or autocommit off
   with a statement run): START TRANSACTION would commit the caller's work
   half-way. Refused (REFUSED, nothing run), and the caller's ROLLBACK still
   undoes its own row;
2. the business callback causes an implicit commit (DDL, COMMIT): its rows
   are committed without the outbox row. Reported SPLIT, never COMMITTED or
   ROLLED_BACK, with no outbox row written after the break;
3. what stays as it was: a normal write COMMITTED (business row and outbox
   row), a failed statement ROLLED_BACK with nothing left, a deadlock (the
   server rolled everything back) ROLLED_BACK with nothing left."""
import json
import os

from harness import *

PROBE = os.environ.get("SC_OUTBOX_PROBE", "")
if not PROBE or not os.path.exists(PROBE):
    bail("SC_OUTBOX_PROBE does not name the built outbox_probe")

with admin_db() as c, c.cursor() as cur:
    cur.execute("CREATE TABLE IF NOT EXISTS probe_biz (id BIGINT AUTO_INCREMENT PRIMARY KEY, "
                "tag VARCHAR(100) NOT NULL, UNIQUE KEY uq_probe_biz_tag (tag)) ENGINE=InnoDB")
    cur.execute("CREATE TABLE IF NOT EXISTS probe_lock (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB")
    cur.execute("INSERT IGNORE INTO probe_lock VALUES (1, 0), (2, 0)")
    cur.execute("CREATE TABLE IF NOT EXISTS probe_heavy (id INT PRIMARY KEY) ENGINE=InnoDB")
    cur.execute("DELETE FROM probe_heavy")


def run(scenario):
    tag = f"{scenario}-{suffix()}"
    r = subprocess.run([PROBE, scenario, tag], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        bail(f"outbox_probe {scenario}: exit {r.returncode}: {r.stderr}")
    out = json.loads(r.stdout)
    biz = query("SELECT tag FROM probe_biz WHERE tag LIKE %s ORDER BY tag", (tag + "%",))
    outbox = query("SELECT status FROM outbox_event WHERE aggregate_id = %s", (tag,))
    return out, [b[0] for b in biz], [o[0] for o in outbox], tag


out, biz, outbox, tag = run("normal")
is_eq(out["outcome"], "committed", "a normal write is COMMITTED")
ok(biz == [tag] and outbox == ["PENDING"], "with its business row and its PENDING outbox row",
   detail=(biz, outbox))

out, biz, outbox, tag = run("open")
is_eq(out["outcome"], "refused", "a transaction already open on the connection (BEGIN) is REFUSED")
ok("already" in out["message"] and "transaction" in out["message"], f"the reason says so ({out['message']})")
ok(biz == [] and outbox == [],
   "the caller's ROLLBACK undid its own row: the helper committed nothing of it, wrote nothing itself",
   detail=(biz, outbox))

out, biz, outbox, tag = run("autocommit0")
is_eq(out["outcome"], "refused", "autocommit off with a statement run (a transaction is open): REFUSED")
ok(biz == [] and outbox == [], "and nothing of the caller's was committed", detail=(biz, outbox))

out, biz, outbox, tag = run("ddl")
is_eq(out["outcome"], "split", "a callback whose DDL commits implicitly is SPLIT, not COMMITTED")
ok("implicit commit" in out["message"] or "ended the transaction" in out["message"],
   f"the reason names it ({out['message']})")
ok(biz == [tag] and outbox == [],
   "its business row is committed and no outbox row was written after the break (what SPLIT says)",
   detail=(biz, outbox))

out, biz, outbox, tag = run("ddl_fail")
is_eq(out["outcome"], "split", "the same callback failing after its DDL: SPLIT, never ROLLED_BACK")
ok(biz == [tag] and outbox == [], "(its row is committed: ROLLED_BACK would have been a lie)",
   detail=(biz, outbox))

out, biz, outbox, tag = run("commit")
is_eq(out["outcome"], "split", "a callback that runs COMMIT: SPLIT")
ok(biz == [tag] and outbox == [], "business row committed, no outbox row", detail=(biz, outbox))

out, biz, outbox, tag = run("fail")
is_eq(out["outcome"], "rolled_back", "a failing business statement is ROLLED_BACK")
is_eq(out["code"], 1062, "with its error")
ok(biz == [] and outbox == [], "and nothing left", detail=(biz, outbox))

out, biz, outbox, tag = run("deadlock")
is_eq(out["outcome"], "rolled_back", "a deadlock (the server rolled the transaction back) is ROLLED_BACK")
is_eq(out["code"], 1213, "with error 1213")
ok(biz == [] and outbox == [], "and nothing left", detail=(biz, outbox))

with admin_db() as c, c.cursor() as cur:
    for t in ("probe_biz", "probe_lock", "probe_heavy", "probe_ddl"):
        cur.execute(f"DROP TABLE IF EXISTS {t}")
done()
