"""sql.so through the real consume path and `sidecar try`, for what a direct
probe cannot show:

1. a CALL whose procedure returns result sets: several events in a row are
   all applied (each CALL's results are drained, so neither the next
   statement nor the sidecar's next claim meets 2014 "Commands out of
   sync"), nothing is dead-lettered, and `sidecar try` applies them too;
2. `data` is read only where the parameters point, exactly as written: an
   integer beyond 64 bits (or a 30-digit decimal) elsewhere in `data` does
   not refuse the event, and the values bound keep every digit."""
import os
import uuid

from harness import *

SQL_HANDLER = os.environ.get("SC_SQL_HANDLER", "")
if not SQL_HANDLER or not os.path.exists(SQL_HANDLER):
    bail("SC_SQL_HANDLER does not name the built sql.so")


def publish_bodies(exchange, bodies):
    conn = amqp()
    ch = conn.channel()
    ch.confirm_delivery()
    for eid, etype, body in bodies:
        publish(ch, exchange, etype, body, message_id=eid)
    conn.close()


def body(eid, etype, data_text, subject="1"):
    """A CloudEvent whose data member is data_text exactly as given (numbers
    of any size: a JSON encoder would not write them)."""
    return ('{"specversion":"1.0","id":"%s","type":"%s","source":"T","subject":"%s",'
            '"time":"2026-11-29T10:00:00Z","eventversion":1,"datacontenttype":"application/json",'
            '"data":%s}' % (eid, etype, subject, data_text))


# ---- 1. CALL with result sets ----------------------------------------------

with admin_db() as c, c.cursor() as cur:
    cur.execute("DROP TABLE IF EXISTS call_log")
    cur.execute("DROP PROCEDURE IF EXISTS call_log_add")
    cur.execute("CREATE TABLE call_log (event_id CHAR(36) PRIMARY KEY, subject VARCHAR(64) NOT NULL, "
                "calls INT NOT NULL) ENGINE=InnoDB")
    cur.execute("CREATE PROCEDURE call_log_add(IN eid CHAR(36), IN subj VARCHAR(64)) BEGIN "
                "INSERT INTO call_log VALUES (eid, subj, 1); "
                "SELECT event_id, subject FROM call_log WHERE event_id = eid; "
                "SELECT COUNT(*) FROM call_log; END")
    cur.execute("GRANT SELECT, INSERT, UPDATE ON app.call_log TO 'sidecar_consumer'@'%'")
    cur.execute("GRANT EXECUTE ON PROCEDURE app.call_log_add TO 'sidecar_consumer'@'%'")

CALL_CONFIG = {"events": {"LOGGED": [
    {"sql": "CALL call_log_add(?, ?)", "params": ["id", "subject"]},
    {"sql": "UPDATE call_log SET calls = calls + 1 WHERE event_id = ?", "params": ["id"]}]}}

events = []
for i in range(12):
    eid = str(uuid.uuid4())
    events.append((eid, "LOGGED", body(eid, "LOGGED", '{"n": %d}' % i, subject=f"s{i}")))
ids = [e[0] for e in events]

sc = Sidecar(handler=SQL_HANDLER, consumer_extra={"handler_config": CALL_CONFIG, "batch_max": 4,
                                                   "max_attempts": 3, "retry_delays_ms": [200]})
ok(sc.start(), "CALL: sidecar started")
publish_bodies(sc.exchange, events[:6])
for e in events[6:]:  # and some one by one: the per-delivery path
    publish_bodies(sc.exchange, [e])
wait_until(lambda: count_in("consumed_event", "event_id", ids, f"AND consumer_name = '{sc.name}'") == len(ids),
           timeout=60)
is_eq(count_in("consumed_event", "event_id", ids, f"AND consumer_name = '{sc.name}'"), len(ids),
      "every event through the CALL was claimed and committed")
is_eq(count_in("call_log", "event_id", ids, "AND calls = 2"), len(ids),
      "each CALL and the statement after it took effect once")
is_eq(queue_depth(sc.dlq), 0, "nothing dead-lettered")
text = sc.text()
ok("error 2014" not in text and "out of sync" not in text, "no 'Commands out of sync' in the log",
   detail="\n".join(l for l in text.splitlines() if "2014" in l or "out of sync" in l)[:2000])
ok(len(sc.outcomes("retried")) == 0, f"no retries ({len(sc.outcomes('retried'))})")
is_eq(sc.stop(), 0, "CALL: clean stop")

# `sidecar try`: the same path, one transaction rolled back.
d = tempfile.mkdtemp(prefix="sc-try-")
files = []
for i in range(3):
    eid = str(uuid.uuid4())
    p = os.path.join(d, f"e{i}.json")
    with open(p, "w") as f:
        f.write(body(eid, "LOGGED", '{"n": %d}' % i, subject=f"try{i}"))
    files.append(p)
rc, out = run_sidecar_cmd(["try", "--consumer", sc.name, *files], sc.config)
ok(rc == 0 and "3 applied" in out, f"try: three CALL events in a row all apply (rc {rc})", detail=out)
ok("out of sync" not in out, "try: no 'Commands out of sync'", detail=out)

# ---- 2. data read only where the parameters point, exactly ----------------

with admin_db() as c, c.cursor() as cur:
    cur.execute("DROP TABLE IF EXISTS exact_vals")
    cur.execute("CREATE TABLE exact_vals (event_id CHAR(36) PRIMARY KEY, order_id BIGINT NOT NULL, "
                "price DECIMAL(10,2) NOT NULL, big DECIMAL(40,0) NULL, big_text VARCHAR(100) NULL, "
                "ratio_text VARCHAR(40) NULL) ENGINE=InnoDB")
    cur.execute("GRANT SELECT, INSERT ON app.exact_vals TO 'sidecar_consumer'@'%'")

EXACT_CONFIG = {"events": {"PRICED": [
    {"sql": "INSERT INTO exact_vals (event_id, order_id, price) VALUES (?, ?, ?)",
     "params": ["id", "data/orderId:int", "data/price:decimal"]}],
    "BIG": [
    {"sql": "INSERT INTO exact_vals (event_id, order_id, price, big, big_text, ratio_text) VALUES (?, ?, ?, ?, ?, ?)",
     "params": ["id", "data/orderId:int", "data/price:decimal", "data/big:decimal", "data/big:string",
                "data/ratio:string"]}]}}
BIG = "123456789012345678901234567890"
unused = ('"unused": {"huge": %s, "real": 1e400, "list": [18446744073709551616, -99999999999999999999]}'
          % ("9" * 100))
priced = [(str(uuid.uuid4()), "PRICED", None) for _ in range(3)]
priced = [(eid, t, body(eid, t, '{"orderId": %d, "price": 19.90, %s}' % (100 + i, unused)))
          for i, (eid, t, _) in enumerate(priced)]
big_id = str(uuid.uuid4())
big = (big_id, "BIG", body(big_id, "BIG", '{"orderId": 200, "price": 0.5, "big": %s, "ratio": 1.10, %s}'
                           % (BIG, unused)))
ex = Sidecar(handler=SQL_HANDLER, consumer_extra={"handler_config": EXACT_CONFIG, "batch_max": 4})
ok(ex.start(), "exact: sidecar started")
publish_bodies(ex.exchange, priced + [big])
all_ids = [e[0] for e in priced] + [big_id]
wait_until(lambda: count_in("consumed_event", "event_id", all_ids, f"AND consumer_name = '{ex.name}'")
           == len(all_ids) or queue_depth(ex.dlq) > 0, timeout=60)
is_eq(queue_depth(ex.dlq), 0, "no event dead-lettered for numbers in a field no parameter uses")
is_eq(count_in("exact_vals", "event_id", all_ids), len(all_ids), "every event applied")
rows = dict((r[0], r[1:]) for r in query(
    "SELECT event_id, order_id, CAST(price AS CHAR), CAST(big AS CHAR), big_text, ratio_text FROM exact_vals "
    "WHERE event_id IN (" + ",".join(["%s"] * len(all_ids)) + ")", all_ids))
is_eq(rows.get(priced[0][0]), (100, "19.90", None, None, None), "orderId and price as written")
is_eq(rows.get(big_id), (200, "0.50", BIG, BIG, "1.10"),
      "a 30-digit integer keeps every digit as DECIMAL and as text; 1.10 as text stays 1.10")
is_eq(ex.stop(), 0, "exact: clean stop")

done()
