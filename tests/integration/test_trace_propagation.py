"""W3C trace context from the producer's transaction to the handler: a
traceparent the producer helper stores reaches the relay's messages (as the
CloudEvents distributed-tracing attributes, read back by the official
CloudEvents JavaScript SDK in structured and binary mode), the handler
(sql.so's traceparent and trace_id sources) and every consumer log line
about the event (trace_id, a span_id of the consumer's own per handling,
parent_span_id the message's) unchanged, through a retry, a dead letter and
a `dlq replay`; `sidecar inspect` shows it. Invalid values: refused by the
producer helper (never stored), left out by the relay, ignored by the
consumer (never a dead letter)."""
import re
import subprocess

from envelope_lib import *
from node_deps import node_modules

HERE = os.path.dirname(os.path.abspath(__file__))
NODE = node_modules()
SQL_HANDLER = os.environ.get("SC_SQL_HANDLER", "")
if not SQL_HANDLER or not os.path.exists(SQL_HANDLER):
    bail("SC_SQL_HANDLER does not name the built sql.so")

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
TP = f"00-{TRACE}-{PARENT}-01"
TS = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
HEX16 = re.compile(r"^[0-9a-f]{16}$")

query("CREATE TABLE IF NOT EXISTS t_trace_seen (n BIGINT AUTO_INCREMENT PRIMARY KEY, event_id CHAR(36) NOT NULL,"
      " traceparent VARCHAR(55) NULL, trace_id CHAR(32) NULL, KEY (event_id))")
query("CREATE TABLE IF NOT EXISTS t_trace_lock (id INT PRIMARY KEY, v INT NOT NULL)")
query("INSERT IGNORE INTO t_trace_lock VALUES (1, 0)")
query("GRANT INSERT ON app.t_trace_seen TO 'sidecar_consumer'@'%'")
query("GRANT SELECT, UPDATE ON app.t_trace_lock TO 'sidecar_consumer'@'%'")

KEEP = {"sql": "INSERT INTO t_trace_seen (event_id, traceparent, trace_id) VALUES (?, ?, ?)",
        "params": ["id", "traceparent", "trace_id"]}
LOCK = {"sql": "UPDATE t_trace_lock SET v = v + 1 WHERE id = 1", "params": []}
# TRACE_DEAD points at a member its data lacks: a REJECT, so a dead letter.
DEAD = {"sql": KEEP["sql"], "params": ["id", "traceparent", "data/missing:string"]}


def handler_config(dead):
    return {"events": {"TRACE_OK": [KEEP], "TRACE_RETRY": [LOCK, KEEP], "TRACE_DEAD": [dead]}}


def consumer(name=None, dead=DEAD, exchange=None):
    return Sidecar(name=name, handler=SQL_HANDLER, exchange=exchange,
                   extra={"log": {"level": "debug"}, "mysql": {"url": os.environ["SC_TEST_MYSQL_CONSUMER_URL"],
                                                               "lock_wait_timeout_s": 1}},
                   consumer_extra={"handler_config": handler_config(dead), "max_attempts": 3,
                                   "retry_delays_ms": [300], "batch_max": 1})


def seen_trace(eid):
    return query("SELECT traceparent, trace_id FROM t_trace_seen WHERE event_id = %s ORDER BY n", (eid,))


def produce(atype, aid, etype, payload, *trace):
    rc, lines, err = run_order_producer(["--event", atype, aid, etype, payload, *trace],
                                        env={"SIDECAR_MYSQL_URL": os.environ["SC_TEST_MYSQL_PRODUCER_URL"]})
    return rc, (lines[0] if lines else {"stderr": err})


def sdk_read(queue, n):
    p = subprocess.run(["node", os.path.join(HERE, "test_relay_binary.js")],
                       input=json.dumps({"url": os.environ["SC_TEST_AMQP_URL"], "queue": queue, "n": n}),
                       env=dict(os.environ, NODE_PATH=NODE), capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        bail("node failed: " + p.stderr[-800:])
    return {x["message_id"]: x for x in map(json.loads, p.stdout.splitlines())}


def event_lines(sc, eid):
    return [l for l in sc.lines() if l.get("event_id") == eid]


clear_outbox()

# --- the producer helper refuses invalid trace context, stores nothing ----
for trace, why in [(["00-" + TRACE.upper() + "-" + PARENT + "-01"], "lowercase hex"),
                   (["00-" + "0" * 32 + "-" + PARENT + "-01"], "zeros"),
                   (["01-" + TRACE + "-" + PARENT + "-01"], "version"),
                   (["00-" + TRACE + "-" + PARENT], "55 characters"),
                   ([TP, "Bad Key=1"], "tracestate member 1"),
                   ([TP, ",".join(f"k{i}=v" for i in range(33))], "more than 32")]:
    rc, res = produce("ORDER", "1", "TRACE_OK", "{}", *trace)
    ok(rc == 1 and res.get("outcome") == "rolled_back" and why in res.get("error", ""),
       f"the producer refuses {trace[-1][:40]}…: {why}", detail=res)
is_eq(query("SELECT COUNT(*) FROM outbox_event")[0][0], 0, "nothing stored for a refused trace context")

# --- produced with trace context --------------------------------------------
rc, res = produce("ORDER", "1", "TRACE_OK", '{"a":1}', TP, TS)
ok(rc == 0 and res.get("outcome") == "committed", "the producer stores an event with traceparent and tracestate",
   detail=res)
e_ok = res.get("event_id")
_, res = produce("ORDER", "2", "TRACE_RETRY", '{"a":2}', TP)
e_retry = res.get("event_id")
_, res = produce("ORDER", "3", "TRACE_DEAD", '{"a":3}', TP)
e_dead = res.get("event_id")
_, res = produce("ORDER", "4", "TRACE_OK", '{"a":4}')
e_none = res.get("event_id")
is_eq(query("SELECT traceparent, tracestate FROM outbox_event WHERE event_id = %s", (e_ok,)), ((TP, TS),),
      "the outbox row holds them as given")
is_eq(query("SELECT traceparent FROM outbox_event WHERE event_id = %s", (e_none,)), ((None,),),
      "an event without trace context stores NULL")
# Written around the helper: the relay leaves an invalid traceparent out.
e_badrow = str(uuid.uuid4())
query("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version, payload,"
      " status, created_at, traceparent, tracestate) VALUES (%s, 'ORDER', '5', 'TRACE_OK', 1, '{}', 'PENDING',"
      " UTC_TIMESTAMP(6), %s, 'rojo=1')", (e_badrow, "00-" + "0" * 32 + "-" + PARENT + "-01"))
ids = [e_ok, e_retry, e_dead, e_none, e_badrow]

ex = "trace-" + suffix()
sc = consumer(exchange=ex)
ok(sc.start(), "an sql.so consumer started")
raw = bound_queue(ex)

# Hold the row TRACE_RETRY updates: its first attempt times out (1205, RETRY).
lock = admin_db()
lock.autocommit(False)
lock_cur = lock.cursor()
lock_cur.execute("SELECT v FROM t_trace_lock WHERE id = 1 FOR UPDATE")

r = Relay(ex)
r.config["log"] = {"level": "debug"}
with open(r.config_path, "w") as f:
    json.dump(r.config, f)
r.start()
ok(wait_until(lambda: count_in("outbox_event", "event_id", ids, "AND status = 'PUBLISHED'") == len(ids),
              timeout=30), "the relay published every row")
ok(wait_until(lambda: any(l.get("event_id") == e_retry for l in sc.outcomes("retried")), timeout=30),
   "TRACE_RETRY's first attempt waited for the lock and was retried")
lock.rollback()
lock.close()
ok(wait_until(lambda: seen_trace(e_ok) and seen_trace(e_retry) and seen_trace(e_none) and seen_trace(e_badrow)
              and queue_depth(sc.dlq) == 1, timeout=30),
   "the events applied, TRACE_DEAD dead-lettered")

# --- the relay ----------------------------------------------------------------
pub = {l.get("event_id"): l for l in r.lines() if l.get("msg") == "published"}
is_eq(pub.get(e_ok, {}).get("trace_id"), TRACE, "the relay's publish line carries the trace_id")
ok(e_none in pub and "trace_id" not in pub[e_none], "and none for an event without trace context",
   detail=pub.get(e_none))
bad = [l for l in r.lines() if l.get("event_id") == e_badrow and l.get("outcome") == "trace_context_ignored"]
ok(bad and "trace-id must not be all zeros" in bad[0]["msg"], "an invalid traceparent in a row is logged",
   detail=bad)
got = sdk_read(raw, len(ids))
is_eq(sorted(got), sorted(ids), "the SDK read one structured message per row")
x = got.get(e_ok, {})
ok(x.get("ok") and x.get("traceparent") == TP and x.get("tracestate") == TS,
   "the CloudEvents SDK reads the traceparent and tracestate attributes (structured)", detail=x)
ok(got.get(e_none, {}).get("ok") and got[e_none].get("traceparent") is None, "no traceparent where the row has none",
   detail=got.get(e_none))
ok(got.get(e_badrow, {}).get("ok") and got[e_badrow].get("traceparent") is None
   and got[e_badrow].get("tracestate") is None, "the invalid one is left out, its tracestate with it",
   detail=got.get(e_badrow))

# --- the handler and the consumer's log lines ---------------------------------
is_eq(seen_trace(e_ok), ((TP, TRACE),), "the handler got the traceparent and trace_id unchanged")
is_eq(seen_trace(e_retry), ((TP, TRACE),), "through a retry")
is_eq(seen_trace(e_none), ((None, None),), "an event without trace context binds NULL (not a REJECT)")
is_eq(seen_trace(e_badrow), ((None, None),), "the relay's dropped traceparent reaches nobody")
for eid, label in [(e_ok, "applied"), (e_retry, "retried, then applied"), (e_dead, "dead-lettered")]:
    lines = event_lines(sc, eid)
    ok(len(lines) >= 2 and all(l.get("trace_id") == TRACE and l.get("parent_span_id") == PARENT
                               and HEX16.match(l.get("span_id", "")) and l["span_id"] != PARENT for l in lines),
       f"{label}: every consumer line about the event carries trace_id, its own span_id, parent_span_id",
       detail=lines)
spans = {l["span_id"] for l in event_lines(sc, e_retry)}
ok(len(spans) >= 2, f"the retry is a new handling with a new span ({len(spans)} spans)", detail=spans)
ok(all("trace_id" not in l for l in event_lines(sc, e_none)), "no trace fields on an event without trace context")

# --- an invalid value at the consumer: logged and ignored, never dead-lettered
e_pub = str(uuid.uuid4())
p = Publisher()
p.publish(ex, "TRACE_OK", json.dumps({"specversion": "1.0", "id": e_pub, "type": "TRACE_OK", "source": "S",
                                      "traceparent": "00-xyz", "data": {}}),
          content_type="application/cloudevents+json", message_id=e_pub)
p.close()
ok(wait_until(lambda: seen_trace(e_pub), timeout=30), "an event with an invalid traceparent is applied")
is_eq(seen_trace(e_pub), ((None, None),), "without trace context")
warned = [l for l in event_lines(sc, e_pub) if l.get("level") == "warn" and "traceparent" in l.get("msg", "")]
ok(warned, "and the invalid value is logged", detail=event_lines(sc, e_pub))
is_eq(queue_depth(sc.dlq), 1, "nothing more dead-lettered")

# --- the dead letter keeps it, and so does the replay ------------------------
rc, out = run_sidecar_cmd(["inspect", "--json", e_dead], dict(sc.config, mysql={"url": os.environ["SC_TEST_MYSQL_ADMIN_URL"]}))
info = json.loads(out) if rc == 0 and out.strip().startswith("{") else {}
ok((info.get("outbox") or {}).get("traceparent") == TP, "sidecar inspect shows the outbox row's traceparent",
   detail=out[-400:])
rc, out = run_sidecar_cmd(["inspect", e_ok], dict(sc.config, mysql={"url": os.environ["SC_TEST_MYSQL_ADMIN_URL"]}))
ok(rc == 0 and f"traceparent {TP}, tracestate {TS}" in out, "and in its text report", detail=out)
is_eq(sc.stop(), 0, "the consumer stops")
fixed = consumer(name=sc.name, dead=KEEP, exchange=ex)  # the handler fixed, the same queue and DLQ
ok(fixed.start(), "the consumer restarted with a fixed config")
rc, out = run_sidecar_cmd(["dlq", "replay", fixed.name, "--id", e_dead],
                          dict(fixed.config, mysql={"url": os.environ["SC_TEST_MYSQL_ADMIN_URL"]}))
ok(rc == 0 and "replayed 1 of 1" in out, "the dead letter is replayed", detail=out)
ok(wait_until(lambda: seen_trace(e_dead), timeout=30), "and applied")
is_eq(seen_trace(e_dead), ((TP, TRACE),), "the replay handed the handler the original traceparent")
lines = event_lines(fixed, e_dead)
ok(lines and all(l.get("trace_id") == TRACE and l.get("parent_span_id") == PARENT for l in lines),
   "the replay's log lines carry the same trace", detail=lines)

# --- binary mode: the relay's headers, read by the SDK and the consumer -------
r.stop()
query("UPDATE outbox_event SET status = 'PENDING' WHERE event_id IN (%s, %s)", (e_ok, e_none))
rb = Relay(ex)
rb.config["relay"]["content_mode"] = "binary"
with open(rb.config_path, "w") as f:
    json.dump(rb.config, f)
rb.start()
ok(wait_until(lambda: count_in("outbox_event", "event_id", [e_ok, e_none], "AND status = 'PUBLISHED'") == 2,
              timeout=30), "a binary-mode relay published them again")
got = sdk_read(raw, 10)  # with the invalid-traceparent message published above
x = got.get(e_ok, {})
ok(x.get("ok") and x.get("traceparent") == TP and x.get("tracestate") == TS
   and "cloudEvents:traceparent" in x.get("header_types", {}),
   "the SDK reads traceparent and tracestate from the cloudEvents: headers (binary)", detail=x)
ok("cloudEvents:traceparent" not in got.get(e_none, {}).get("header_types", {"cloudEvents:traceparent": 1}),
   "no traceparent header where the row has none", detail=got.get(e_none))
ok(wait_until(lambda: sum(1 for l in fixed.outcomes("duplicate") if l.get("event_id") in (e_ok, e_none)) == 2,
              timeout=30), "the consumer recognises both repeats")
dup = [l for l in fixed.outcomes("duplicate") if l.get("event_id") == e_ok]
ok(dup and dup[0].get("trace_id") == TRACE, "the duplicate's line carries the trace from the headers", detail=dup)
is_eq((rb.stop(), fixed.stop()), (0, 0), "clean stops")
clear_outbox()
done()
