"""Plain messages ("envelope": "plain"): the body is data (JSON, verbatim),
id = message_id (a UUID in any spelling canonicalised, any other string its
UUIDv5 under the documented namespace, logged with the original), type = the
type property else the routing key, source = plain_source else the exchange,
subject from plain_subject, eventversion from an integer header, time from
timestamp. Repeats are duplicates; a message without message_id and the
other malformed kinds are dead-lettered with the copy kept as it came, and a
replay of a plain copy reproduces it (the same id, type and source).
`sidecar inspect` takes the message_id or its UUIDv5; sql.so parameters
work unchanged."""
from envelope_lib import *

SQL_HANDLER = os.environ.get("SC_SQL_HANDLER", "")
if not SQL_HANDLER or not os.path.exists(SQL_HANDLER):
    bail("SC_SQL_HANDLER does not name the built sql.so")
seen_table()
ADMIN = {"url": os.environ["SC_TEST_MYSQL_ADMIN_URL"]}
sc = Sidecar(handler=TEST_HANDLER, consumer_extra={"envelope": "plain", "plain_subject": "/order/id",
                                                    "max_attempts": 2, "retry_delays_ms": [200]})
ok(sc.start(), "sidecar started with envelope plain")
pub = Publisher()
tag = suffix()
BODY = '{"order": {"id": 1001, "ref": "A-7"}, "big": 123456789012345678901234567890, "p": 19.90}'

u = str(uuid.uuid4())
pub.publish(sc.exchange, "ignored.key", BODY, content_type="application/json", message_id="{" + u.upper() + "}",
            type_="KEEP_PLAIN", headers={"eventversion": 3}, timestamp=1764410400)
mid = "order-42-" + tag
v5 = plain_id(mid)
for _ in range(3):  # a publisher that retries
    pub.publish(sc.exchange, "KEEP.created", '{"order": {"id": "A-7"}}', message_id=mid)
bad = []  # (label, body, message_id, type, headers, reason fragment)
bad.append(("no message_id", BODY, None, "KEEP", {"x-app": "a1"}, "no message_id property"))
bad.append(("body not JSON", "<order/>", "m-xml-" + tag, "KEEP", {}, "body is not valid JSON"))
bad.append(("string eventversion", BODY, "m-ver-" + tag, "KEEP", {"eventversion": "3"}, "'eventversion' must be an integer"))
bad.append(("subject an object", '{"order": {"id": {"n": 1}}}', "m-obj-" + tag, "KEEP", {}, "names an object"))
for label, body, m, t, h, _ in bad:
    pub.publish(sc.exchange, "KEEP", body, message_id=m, type_=t, headers=h)
poison_mid = "poison-" + tag
pub.publish(sc.exchange, "orders.rejected", BODY, message_id=poison_mid, type_="POISON", headers={"x-app": "p1"})

ok(wait_until(lambda: seen(u) and seen(v5) and outcome_ids(sc, "duplicate").count(v5) == 2
              and queue_depth(sc.dlq) >= len(bad) + 1, timeout=60), "every message reached an outcome")
r = seen(u)[0] if seen(u) else {}
is_eq((r.get("id"), r.get("type"), r.get("source"), r.get("subject"), r.get("time"), r.get("eventversion")),
      (u, "KEEP_PLAIN", sc.exchange, "1001", "2025-11-29T10:00:00Z", 3),
      "a UUID message_id: id canonical, type property, source the exchange, subject by pointer, "
      "time from timestamp, eventversion header")
is_eq(r.get("data"), BODY.encode(), "data is the body byte for byte")
rows = seen(v5)
is_eq(len(rows), 1, "a non-UUID message_id sent 3 times: applied once")
is_eq((rows[0]["type"], rows[0]["subject"], rows[0]["time"], rows[0]["eventversion"]) if rows else None,
      ("KEEP.created", "A-7", None, None), "type from the routing key, a string subject, no time or version")
logged = [l for l in sc.lines() if l.get("event_id") == v5 and l.get("outcome")]
ok(logged and all(l.get("message_id") == mid for l in logged),
   f"its id is uuid5({PLAIN_NAMESPACE}, message_id), logged with the original", detail=logged)
is_eq(outcome_ids(sc, "duplicate").count(v5), 2, "the two repeats are duplicates")

dl = drain(sc.dlq)
for label, body, m, t, h, frag in bad:
    got = [(p, b) for p, b in dl if b.decode() == body and p.message_id == m and p.type == t
           and all(header(p, k) == v for k, v in h.items())]
    ok(got and frag in header(got[0][0], "x-sidecar-reason"),
       f"{label}: dead-lettered as it came ({header(got[0][0], 'x-sidecar-reason') if got else 'missing'})")
poison = [(p, b) for p, b in dl if p.message_id == poison_mid]
ok(poison and poison[0][1].decode() == BODY and header(poison[0][0], "x-app") == "p1"
   and header(poison[0][0], "x-sidecar-original-routing-key") == "orders.rejected",
   "a rejected plain message's copy keeps body, message_id, type and headers")
# Replay it: it comes back through the default exchange, and is the same event.
pub.publish("", sc.dlq, poison[0][1], message_id=poison_mid, type_="POISON", headers=poison[0][0].headers)
pub.close()
before = len([l for l in sc.outcomes("dead_lettered") if l.get("event_id") == plain_id(poison_mid)])
rc, out = run_sidecar_cmd(["dlq", "replay", sc.name, "--all"], dict(sc.config, mysql=ADMIN))
ok(rc == 0 and "replayed 1 of 1" in out, f"dlq replay ({out.strip()[-200:]})")
ok(wait_until(lambda: len([l for l in sc.outcomes("dead_lettered") if l.get("event_id") == plain_id(poison_mid)]) > before,
              timeout=30), "the replayed copy ran again as the same event id")
again = drain(sc.dlq)
ok(again and "poison event" in header(again[0][0], "x-sidecar-reason")
   and header(again[0][0], "x-sidecar-original-exchange") == sc.exchange,
   "and met the same handler answer: type and source as the first time, not the default exchange's",
   detail=[p.headers for p, _ in again])

rc, out = run_sidecar_cmd(["inspect", mid, "--json"], dict(sc.config, mysql=ADMIN))
info = json.loads(out[out.index("{"):]) if "{" in out else {}
ok(rc == 0 and info.get("event_id") == v5 and info.get("message_id") == mid and
   any(c.get("consumer") == sc.name for c in info.get("consumed", [])),
   "inspect takes the original message_id", detail=out)
rc, out = run_sidecar_cmd(["inspect", v5], dict(sc.config, mysql=ADMIN))
ok(rc == 0 and f"consumed: by {sc.name}" in out, "and its UUIDv5", detail=out)
is_eq(sc.stop(), 0, "clean stop")

# sql.so on plain messages, plain_source set.
query("CREATE TABLE IF NOT EXISTS t_plain_sql (event_id CHAR(36) PRIMARY KEY, type VARCHAR(64), source VARCHAR(64),"
      " subject BIGINT, version BIGINT, ref VARCHAR(16), at DATETIME(6), data JSON)")
query("GRANT INSERT ON app.t_plain_sql TO 'sidecar_consumer'@'%'")
hc = {"events": {"OrderPlaced": [{"sql": "INSERT INTO t_plain_sql VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                  "params": ["id", "type", "source", "subject:int", "eventversion",
                                             "data/order/ref", "time:datetime", "data:json"]}]}}
sq = Sidecar(handler=SQL_HANDLER, consumer_extra={"envelope": "plain", "plain_source": "urn:shop",
                                                   "plain_subject": "/order/id", "handler_config": hc})
ok(sq.start(), "an sql.so consumer with envelope plain")
mids = ["sql-%d-%s" % (i, tag) for i in range(3)]
pub = Publisher()
for i, m in enumerate(mids):
    for _ in range(2):
        pub.publish(sq.exchange, "OrderPlaced", '{"order": {"id": %d, "ref": "R%d"}}' % (500 + i, i), message_id=m,
                    headers={"eventversion": i + 1}, timestamp=1764410400 + i)
pub.close()
ok(wait_until(lambda: len(sq.outcomes("duplicate")) >= 3, timeout=30), "every message settled")
got = query("SELECT event_id, type, source, subject, version, ref, DATE_FORMAT(at, '%%Y-%%m-%%d %%H:%%i:%%s')"
            " FROM t_plain_sql WHERE event_id IN (%s, %s, %s) ORDER BY subject", tuple(plain_id(m) for m in mids))
is_eq([tuple(x) for x in got],
      [(plain_id(m), "OrderPlaced", "urn:shop", 500 + i, i + 1, "R%d" % i, "2025-11-29 10:00:0%d" % i)
       for i, m in enumerate(mids)],
      "sql.so parameters (id, type, source, subject:int, eventversion, data pointers, time:datetime) on plain messages")
is_eq(sq.stop(), 0, "clean stop")
done()
