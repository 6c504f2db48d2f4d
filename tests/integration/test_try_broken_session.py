"""`sidecar try` with a handler that breaks the session: it switches
autocommit on, commits, or commits and goes on in a new transaction. Try
must report the contract violation (exit 1), say which claims the handler
committed for real, and run the later event files in a new session so that
nothing of theirs commits."""
import os
import tempfile
import uuid

from harness import *

DIR = tempfile.mkdtemp(prefix="sc-try-broken-")
NAME = "try-broken-" + suffix()
CFG = {"amqp": {"url": "amqp://guest:guest@127.0.0.1:1/%2f"},  # try never needs the broker
       "mysql": {"url": os.environ["SC_TEST_MYSQL_CONSUMER_URL"]},
       "consumers": [{"name": NAME, "queue": NAME, "handler": TEST_HANDLER}]}


def event_file(etype, subject):
    eid = str(uuid.uuid4())
    path = os.path.join(DIR, eid + ".json")
    with open(path, "w") as f:
        f.write(event_body(eid, etype=etype, subject=subject))
    return eid, path


def try_(files):
    return run_sidecar_cmd(["try", "--consumer", NAME, *files], CFG, timeout=60)


def claims(ids):
    return count_in("consumed_event", "event_id", ids, f"AND consumer_name = '{NAME}'")


def effects(ids):
    return count_in("notification_job", "event_id", ids)


def cleanup(ids):
    marks = ",".join(["%s"] * len(ids))
    query(f"DELETE FROM consumed_event WHERE event_id IN ({marks})", ids)
    query(f"DELETE FROM notification_job WHERE event_id IN ({marks})", ids)


# ---- autocommit switched on: every later claim would commit on its own ----
before, f_before = event_file("ORDER_ACCEPTED", "501")
bad, f_bad = event_file("AUTOCOMMIT_ON", "502")
later = [event_file("ORDER_ACCEPTED", str(503 + i)) for i in range(3)]
later_ids = [e for e, _ in later]
rc, out = try_([f_before, f_bad] + [f for _, f in later])
is_eq(rc, 1, "autocommit on: try exits 1")
ok(f"id {bad}" in out and "ended the transaction (commit, rollback or autocommit): contract violation" in out,
   "the handler's contract violation is reported", detail=out)
ok("the next events run in a new database session" in out, "a new session for the rest", detail=out)
is_eq(out.count("outcome: applied"), 4, "the event before it and the three after it apply (in their sessions)")
is_eq(out.count("contract violation"), 1, "only the guilty event is called a violation")
is_eq(claims(later_ids), 0, "no claim of a later event was committed")
is_eq(effects(later_ids), 0, "no effect of a later event was committed")
# SET autocommit = 1 commits the open transaction: the earlier event's claim
# and effect, and the guilty one's claim, are in the database now. Try says so.
is_eq(claims([before, bad]), 2, "what the handler committed: the earlier event's claim and its own")
ok(f"committed for real by the handler: consumer {NAME}'s claim of {before}" in out
   and f"committed for real by the handler: consumer {NAME}'s claim of {bad}" in out,
   "and try names both", detail=out)
cleanup([before, bad] + later_ids)

# ---- COMMIT, then a read that opens a new transaction ----------------------
# The server reports "in a transaction" again afterwards: only the savepoint,
# gone with the committed transaction, tells.
cm, f_cm = event_file("COMMIT_MORE", "511")
after, f_after = event_file("ORDER_ACCEPTED", "512")
rc, out = try_([f_cm, f_after])
is_eq(rc, 1, "commit and carry on: try exits 1")
ok(f"id {cm}" in out and "contract violation" in out, "the violation is caught", detail=out)
ok(f"committed for real by the handler: consumer {NAME}'s claim of {cm}" in out,
   "and its committed claim is named", detail=out)
is_eq(claims([after]), 0, "the next event's claim did not commit")
is_eq(effects([after]), 0, "nor its effect")
cleanup([cm, after])

# ---- ROLLBACK, answered OK: nothing committed, the rest in a new session ----
rb, f_rb = event_file("ROLLBACKER", "521")
after2 = [event_file("ORDER_ACCEPTED", str(522 + i)) for i in range(2)]
rc, out = try_([f_rb] + [f for _, f in after2])
is_eq(rc, 1, "a rollback inside the handler: try exits 1")
ok(f"id {rb}" in out and "contract violation" in out, "reported as a contract violation", detail=out)
ok("committed for real" not in out, "nothing was committed, and nothing is said to be", detail=out)
is_eq(out.count("outcome: applied"), 2, "the events after it apply")
is_eq(claims([rb] + [e for e, _ in after2]), 0, "nothing persists")
cleanup([rb] + [e for e, _ in after2])

# ---- a well-behaved run still keeps one transaction ------------------------
d, f_d = event_file("ORDER_ACCEPTED", "531")
rc, out = try_([f_d, f_d])
ok(rc == 1 and out.count("outcome: applied") == 1 and "outcome: duplicate" in out
   and "new database session" not in out,
   "the same event twice: applied, then a duplicate in the same transaction", detail=out)
is_eq(claims([d]), 0, "and nothing persists")
done()
