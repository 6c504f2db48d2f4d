"""`sidecar try -c FILE --consumer NAME EVENT.json...`: parse, claim and
handler for each event file in a transaction that is always rolled back;
per statement rows affected and warnings; exit 0 only when every event would
apply. For sql.so and for a C handler, and without a broker."""
import copy
import os
import re
import tempfile
import uuid

from harness import *

SQL_HANDLER = os.environ.get("SC_SQL_HANDLER", "")
if not SQL_HANDLER or not os.path.exists(SQL_HANDLER):
    bail("SC_SQL_HANDLER does not name the built sql.so")
EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "read-model")
NJ_CONFIG = json.load(open(os.path.join(EXAMPLE, "notification_job.handler.json")))
RM_CONFIG = json.load(open(os.path.join(EXAMPLE, "sidecar.json")))["consumers"][0]["handler_config"]


DIR = tempfile.mkdtemp(prefix="sc-try-")
# Nothing listens here: try must never need the broker.
DEAD_AMQP = "amqp://guest:guest@127.0.0.1:1/%2f"


def config(handler, handler_config=None, name="try-consumer"):
    k = {"name": name, "queue": name, "handler": handler}
    if handler_config is not None:
        k["handler_config"] = handler_config
    return {"amqp": {"url": DEAD_AMQP}, "mysql": {"url": os.environ["SC_TEST_MYSQL_CONSUMER_URL"]},
            "consumers": [k]}


def event_file(text, name=None):
    path = os.path.join(DIR, name or (suffix() + ".json"))
    with open(path, "w") as f:
        f.write(text)
    return path


def order(eid=None, subject="4242", version=3):
    eid = eid or str(uuid.uuid4())
    return eid, event_file(event_body(eid, subject=subject, version=version))


def try_(cfg, files, consumer="try-consumer"):
    return run_sidecar_cmd(["try", "--consumer", consumer, *files], cfg, timeout=60)


def persisted(eid):
    return (count_in("consumed_event", "event_id", [eid]), count_in("notification_job", "event_id", [eid]))


# ---- the C sample handler ----------------------------------------------------
eid, f = order()
rc, out = try_(config(HANDLER), [f])
is_eq(rc, 0, "C handler: an event that applies exits 0")
ok("outcome: applied" in out, "reported as applied", detail=out)
ok(re.search(r"claim: INSERT consumed_event \(try-consumer, " + eid + r"\): 1 row affected", out),
   "the claim is reported", detail=out)
ok("handler notification_job: OK; last statement: 1 row affected, 0 warnings" in out,
   "a C handler's last statement: rows affected and warnings", detail=out)
is_eq(persisted(eid), (0, 0), "nothing persists: no claim, no notification_job row")

eid_bad, f_bad = order(subject="not-a-number")
rc, out = try_(config(HANDLER), [f, f_bad])
is_eq(rc, 1, "C handler: one rejected event makes the exit status 1")
ok("outcome: reject: subject 'not-a-number' is not an integer order id" in out, "its reason", detail=out)
ok("1 applied, 0 duplicate, 0 retry, 1 reject, 0 malformed" in out, "the summary counts both", detail=out)

# ---- sql.so --------------------------------------------------------------------
cfg = config(SQL_HANDLER, NJ_CONFIG)
rc, out = try_(cfg, [f])
is_eq(rc, 0, "sql.so: an event that applies exits 0")
ok("handler check: every statement prepares" in out, "the statements were checked first", detail=out)
ok("statement events.ORDER_ACCEPTED[0]: 1 row affected, 0 warnings" in out,
   "each statement's rows affected and warnings", detail=out)
is_eq(persisted(eid), (0, 0), "nothing persists")

rc, out = try_(cfg, [f, f])
is_eq(rc, 1, "the same event twice: exit 1")
ok(out.count("outcome: applied") == 1 and "outcome: duplicate" in out,
   "the second is a duplicate of the first (one transaction, savepoint per event)", detail=out)

query("INSERT INTO consumed_event (consumer_name, event_id, consumed_at) VALUES ('try-consumer', %s, UTC_TIMESTAMP(6))",
      (eid,))
rc, out = try_(cfg, [f])
ok(rc == 1 and "outcome: duplicate: consumer try-consumer already has event " + eid in out,
   "an event the consumer already consumed is a duplicate", detail=out)
query("DELETE FROM consumed_event WHERE consumer_name = 'try-consumer' AND event_id = %s", (eid,))

rc, out = try_(cfg, [f_bad])
ok(rc == 1 and "outcome: reject: events.ORDER_ACCEPTED[0].params[1]: parameter 'subject:int'" in out,
   "a mistyped value is a reject naming the parameter", detail=out)

# (an id that is not a UUID is a valid CloudEvent: it is consumed under the
# UUIDv5 of its source and id)
broken = event_file('{"specversion": "1.0", "id": "not-a-uuid", "type": "X", "source": "Y", "subject": ""}')
rc, out = try_(cfg, [broken, os.path.join(DIR, "missing.json")])
ok(rc == 1 and "outcome: malformed: attribute 'subject'" in out and "cannot open" in out,
   "a malformed event is reported with its reason", detail=out)
ok("outcome: malformed: cannot open" in out, "an unreadable file too", detail=out)

# warnings: INSERT IGNORE over an existing row
existing = str(uuid.uuid4())
query("INSERT INTO notification_job (event_id, order_id, source_version, status, created_at) "
      "VALUES (%s, 1, 1, 'DONE', UTC_TIMESTAMP(6))", (existing,))
ign = copy.deepcopy(NJ_CONFIG)
ign["events"]["ORDER_ACCEPTED"][0]["sql"] = ign["events"]["ORDER_ACCEPTED"][0]["sql"].replace("INSERT INTO", "INSERT IGNORE INTO")
_, fe = order(eid=existing)
rc, out = try_(config(SQL_HANDLER, ign), [fe])
is_eq(rc, 0, "INSERT IGNORE over an existing row still applies")
ok("statement events.ORDER_ACCEPTED[0]: 0 rows affected, 1 warning" in out and "warning 1062: Duplicate entry" in out,
   "its warning is counted and shown", detail=out)
is_eq(query("SELECT status FROM notification_job WHERE event_id=%s", (existing,))[0][0], "DONE", "the row is untouched")

# a statement that does not fit the schema
bad = copy.deepcopy(NJ_CONFIG)
bad["events"]["OTHER"] = [{"sql": "INSERT INTO notification_job (no_such_column) VALUES (?)", "params": ["id"]}]
rc, out = try_(config(SQL_HANDLER, bad), [f])
ok(rc == 1 and "handler check: FAILED: events.OTHER[0]: does not prepare: error 1054 (SQLSTATE 42S22)" in out,
   "a statement that does not prepare fails try, naming the key", detail=out)
ok("outcome: reject: events.OTHER[0]: does not prepare" in out,
   "and the event is refused by the handler too (every statement prepares at a connection's first event)", detail=out)

# the read model: a newer version, then an older one (no change)
for fname in ("schema.sql", "grants.sql"):
    apply_sql_file(os.path.join(EXAMPLE, fname))
v2 = os.path.join(EXAMPLE, "events", "customer-7-v2.json")
v1 = os.path.join(EXAMPLE, "events", "customer-7-v1.json")
query("DELETE FROM customer_view WHERE customer_id = 7")
rc, out = try_(config(SQL_HANDLER, RM_CONFIG, name="customer-view"), [v2, v1], consumer="customer-view")
is_eq(rc, 0, "read model example: both events apply")
counts = re.findall(r"statement events.CUSTOMER_CHANGED\[0\]: (\d+) rows? affected", out)
is_eq(counts, ["1", "0"], "v2 inserts the row; the older v1 afterwards changes nothing")
is_eq(query("SELECT COUNT(*) FROM customer_view WHERE customer_id = 7")[0][0], 0, "and nothing persists")

# usage
rc, out = try_(cfg, [f], consumer="nobody")
ok(rc == 2 and "no consumer named 'nobody'" in out, "an unknown consumer is bad usage", detail=out)
rc, out = run_sidecar_cmd(["try", f], cfg)
ok(rc == 2 and "--consumer NAME is required" in out, "--consumer is required", detail=out)
rc, out = run_sidecar_cmd(["try", "--consumer", "try-consumer"], cfg)
ok(rc == 2 and "at least one EVENT.json" in out, "an event file is required", detail=out)
done()
