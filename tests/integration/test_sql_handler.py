"""sql.so, the handler configured in JSON, through the real consume path:

1. equivalence: the same events through the C sample handler and through
   sql.so configured as in issue 13 give identical notification_job rows
   (and the same rejects);
2. the read-model example converges under reordered and repeated events and
   stores hostile strings verbatim;
3. a lock wait timeout (1205) is RETRY and the repeat really happens; a
   permanent error (data too long) is REJECT with code and SQLSTATE;
4. a bad config or a statement that does not fit the schema is refused by
   `sidecar check`, naming the key."""
import copy
import os
import random
import uuid

from harness import *

SQL_HANDLER = os.environ.get("SC_SQL_HANDLER", "")
if not SQL_HANDLER or not os.path.exists(SQL_HANDLER):
    bail("SC_SQL_HANDLER does not name the built sql.so")
EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "read-model")
NJ_CONFIG = json.load(open(os.path.join(EXAMPLE, "notification_job.handler.json")))
RM = json.load(open(os.path.join(EXAMPLE, "sidecar.json")))["consumers"][0]
RM_CONFIG = RM["handler_config"]


def publish_bodies(exchange, bodies):
    """bodies: [(event_id, type, body)], published with confirms."""
    conn = amqp()
    ch = conn.channel()
    ch.confirm_delivery()
    for eid, etype, body in bodies:
        publish(ch, exchange, etype, body, message_id=eid)
    conn.close()


def dlq_reasons(queue):
    out = {}
    for props, _ in drain(queue):
        r = (props.headers or {}).get("x-sidecar-reason", b"")
        out[props.message_id] = r.decode() if isinstance(r, bytes) else r
    return out


def consumed(name, ids):
    return count_in("consumed_event", "event_id", ids, f"AND consumer_name = '{name}'")


# ---- 1. equivalence with the C sample handler ------------------------------

good = [(str(uuid.uuid4()), str(3000 + i), 1 + i % 4) for i in range(40)]
bad_subject = str(uuid.uuid4())
other_type = str(uuid.uuid4())
bodies = [(eid, "ORDER_ACCEPTED", event_body(eid, subject=s, version=v)) for eid, s, v in good]
bodies.insert(17, (bad_subject, "ORDER_ACCEPTED", event_body(bad_subject, subject="12x")))
bodies.insert(5, (other_type, "ORDER_SHIPPED", event_body(other_type, etype="ORDER_SHIPPED")))
all_ids = [b[0] for b in bodies]
good_ids = [g[0] for g in good]


def rows(ids):
    marks = ",".join(["%s"] * len(ids))
    return sorted(query("SELECT event_id, order_id, source_version, status, created_at IS NOT NULL "
                        f"FROM notification_job WHERE event_id IN ({marks})", ids))


results = {}
for label, handler, cfg in (("C", HANDLER, None), ("sql", SQL_HANDLER, NJ_CONFIG)):
    extra = {"batch_max": 16}
    if cfg is not None:
        extra["handler_config"] = cfg
    sc = Sidecar(handler=handler, consumer_extra=extra)
    # published before the consumer starts: full batches, the batch entry point
    conn = amqp()
    ch = conn.channel()
    ch.exchange_declare(sc.exchange, "topic", durable=True)
    ch.queue_declare(sc.queue, durable=True)
    ch.queue_bind(sc.queue, sc.exchange, "#")
    conn.close()
    publish_bodies(sc.exchange, bodies)
    ok(sc.start(), f"{label}: sidecar started")
    wait_until(lambda: consumed(sc.name, all_ids) == len(all_ids) - 1 and queue_depth(sc.dlq) == 1,
               timeout=60)
    results[label] = {"rows": rows(good_ids), "consumed": consumed(sc.name, all_ids),
                      "dlq": dlq_reasons(sc.dlq), "effects_other": rows([other_type, bad_subject])}
    is_eq(sc.stop(), 0, f"{label}: clean stop")
    query("DELETE FROM notification_job WHERE event_id IN (" + ",".join(["%s"] * len(good_ids)) + ")",
          good_ids)

c, s = results["C"], results["sql"]
is_eq(len(c["rows"]), len(good), "C handler: one notification_job row per good event")
ok(s["rows"] == c["rows"], "sql.so: identical notification_job rows (event_id, order_id, source_version, "
   "status, created_at set)", detail=f"C: {c['rows'][:3]}\nsql: {s['rows'][:3]}")
is_eq(s["consumed"], c["consumed"], "same consumed_event claims (good events and the ignored type)")
is_eq(s["effects_other"], [], "no effect for the ignored type or the bad subject")
is_eq(list(s["dlq"]), [bad_subject], "sql.so dead-letters the bad subject, as the C handler does")
is_eq(list(c["dlq"]), [bad_subject], "the C handler dead-letters it")
ok("subject:int" in s["dlq"].get(bad_subject, "") and "not an integer" in s["dlq"].get(bad_subject, ""),
   f"the reason names the parameter ({s['dlq'].get(bad_subject)})")

# ---- 2. the read model converges; hostile strings verbatim ----------------

query("DROP TABLE IF EXISTS customer_view")
for fname in ("schema.sql", "grants.sql"):
    apply_sql_file(os.path.join(EXAMPLE, fname))

HOSTILE = ["O'Brien", "x'); DROP TABLE customer_view; --", "\"; DELETE FROM consumed_event; #",
           "nul\x00inside", "4-byte \U0001F600 \U0001D11E", "back\\slash \\' \\\"", "%s %d {}", "?",
           "", "tab\tnewline\n", "\u00e9\u00e8 \u4e2d\u6587"]


def change(cid, version, name, note=None, tags=None, eid=None):
    eid = eid or str(uuid.uuid4())
    data = {"customerId": cid, "name": name, "note": note, "tags": tags}
    body = json.dumps({"specversion": "1.0", "id": eid, "type": "CUSTOMER_CHANGED", "source": "CUSTOMER",
                       "subject": str(cid), "time": f"2026-11-29T10:00:0{version % 10}.00000{version % 10}Z",
                       "eventversion": version, "datacontenttype": "application/json", "data": data})
    return (eid, "CUSTOMER_CHANGED", body)


cid0 = random.randint(10**6, 10**9)
history = {}  # customer -> [events v1..v5]
for k in range(4):
    cid = cid0 + k
    history[cid] = [change(cid, v, f"name v{v} of {cid}", note=f"note {v}", tags=[v, "t"]) for v in range(1, 6)]
hostile = {cid0 + 100 + i: change(cid0 + 100 + i, 1, h, note=h, tags=[h, {"k": h}]) for i, h in enumerate(HOSTILE)}
stream = [e for evs in history.values() for e in evs]
stream += [random.choice(stream) for _ in range(10)]  # repeats of the same ids
stream += list(hostile.values())
random.seed(13)
random.shuffle(stream)
distinct = {e[0] for e in stream}

rm = Sidecar(handler=SQL_HANDLER, consumer_extra={"handler_config": RM_CONFIG, "workers": 2, "batch_max": 8})
ok(rm.start(), "read model: sidecar started")
publish_bodies(rm.exchange, stream)
wait_until(lambda: consumed(rm.name, distinct) == len(distinct) and queue_depth(rm.queue) == 0
           and len(rm.outcomes("duplicate")) >= 1, timeout=90)
is_eq(consumed(rm.name, distinct), len(distinct), "every distinct event claimed once")
ok(len(rm.outcomes("duplicate")) >= 1, f"repeats were delivered and recognised ({len(rm.outcomes('duplicate'))})")
is_eq(queue_depth(rm.dlq), 0, "nothing dead-lettered")
for cid, evs in history.items():
    got = query("SELECT name, note, tags, version, last_event_id FROM customer_view WHERE customer_id=%s", (cid,))
    want = ("name v5 of %d" % cid, "note 5", [5, "t"], 5, evs[4][0])
    ok(got and (got[0][0], got[0][1], json.loads(got[0][2]), got[0][3], got[0][4]) == want,
       f"customer {cid} converged on v5", detail=f"got {got}\nwant {want}")
with admin_db() as conn, conn.cursor() as cur:
    for cid, (eid, _, body) in hostile.items():
        h = json.loads(body)["data"]["name"]
        cur.execute("SELECT name, note, tags FROM customer_view WHERE customer_id=%s", (cid,))
        got = cur.fetchone()
        ok(got is not None and got[0] == h and got[1] == h and json.loads(got[2]) == [h, {"k": h}],
           f"hostile string {h!r} stored verbatim", detail=f"got {got!r}")
    cur.execute("SELECT COUNT(*) FROM customer_view")
    ok(cur.fetchone()[0] >= len(history) + len(hostile), "the table is still there and whole")

# Out of order on one row, applied one by one: v3, v1 (older: no change), v4.
cid = cid0 + 50
evs = [change(cid, v, f"n{v}") for v in (3, 1, 4, 2)]
publish_bodies(rm.exchange, evs[:2])
wait_until(lambda: consumed(rm.name, [e[0] for e in evs[:2]]) == 2, timeout=30)
is_eq(query("SELECT name, version FROM customer_view WHERE customer_id=%s", (cid,)), (("n3", 3),),
      "an older version after a newer one changes nothing")
publish_bodies(rm.exchange, evs[2:])
wait_until(lambda: consumed(rm.name, [e[0] for e in evs]) == 4, timeout=30)
is_eq(query("SELECT name, version FROM customer_view WHERE customer_id=%s", (cid,)), (("n4", 4),),
      "a newer one moves it forward")
# Kill the workers' connections: the statements must be prepared again on
# the new ones (stale ones would fail every later event).
kills = 0
for (tid,) in query("SELECT id FROM information_schema.processlist WHERE user = 'sidecar_consumer'"):
    try:
        query(f"KILL CONNECTION {int(tid)}")
        kills += 1
    except Exception:
        pass
ok(kills >= 2, f"killed both workers' database connections ({kills})")
after = [change(cid0 + 70 + i, 1, f"after kill {i}") for i in range(20)]
publish_bodies(rm.exchange, after)
wait_until(lambda: consumed(rm.name, [e[0] for e in after]) == len(after), timeout=60)
is_eq(count_in("customer_view", "customer_id", [cid0 + 70 + i for i in range(20)]), len(after),
      "events after the reconnect are applied (statements prepared again)")
is_eq(queue_depth(rm.dlq), 0, "and none was dead-lettered")
is_eq(rm.stop(), 0, "read model: clean stop")

# ---- 3. transient and permanent errors -------------------------------------

lock_cfg = copy.deepcopy(RM_CONFIG)
mysql_fast = {"url": os.environ["SC_TEST_MYSQL_CONSUMER_URL"], "lock_wait_timeout_s": 1}
ft = Sidecar(handler=SQL_HANDLER, extra={"mysql": mysql_fast},
             consumer_extra={"handler_config": lock_cfg, "max_attempts": 10, "retry_delays_ms": [300]})
ok(ft.start(), "errors: sidecar started")
locked_cid = cid0 + 1  # has a row: the upsert must wait for its lock
blocked = change(locked_cid, 9, "after the lock")
holder = admin_db()
hc = holder.cursor()
hc.execute("BEGIN")
hc.execute("SELECT * FROM customer_view WHERE customer_id=%s FOR UPDATE", (locked_cid,))
publish_bodies(ft.exchange, [blocked])
retried = wait_until(lambda: [l for l in ft.outcomes("retried") if l.get("event_id") == blocked[0]], timeout=30)
ok(retried, "a lock wait timeout makes the event retry")
ok(retried and "1205" in retried[0].get("msg", ""), f"the retry names error 1205 ({retried[0].get('msg') if retried else None})")
hc.execute("ROLLBACK")
holder.close()
wait_until(lambda: consumed(ft.name, [blocked[0]]) == 1, timeout=30)
is_eq(query("SELECT name, version FROM customer_view WHERE customer_id=%s", (locked_cid,)),
      (("after the lock", 9),), "after the lock is released the repeat applies it, once")

too_long = change(cid0 + 60, 1, "x" * 201)
bad_json_type = change(cid0 + 61, 1, {"not": "a string"})
publish_bodies(ft.exchange, [too_long, bad_json_type])
wait_until(lambda: queue_depth(ft.dlq) >= 2, timeout=30)
reasons = dlq_reasons(ft.dlq)
r = reasons.get(too_long[0], "")
ok("1406" in r and "22001" in r and "events.CUSTOMER_CHANGED[0]" in r,
   f"data too long is REJECT with code, SQLSTATE and statement key ({r})")
r = reasons.get(bad_json_type[0], "")
ok("data/name:string" in r and "an object" in r, f"a mistyped value names the parameter ({r})")
is_eq(consumed(ft.name, [too_long[0], bad_json_type[0]]), 0, "rejected events keep no claim")
ok(not [l for l in ft.outcomes("retried") if l.get("event_id") == too_long[0]], "a permanent error is not retried")
is_eq(ft.stop(), 0, "errors: clean stop")

# ---- 4. check refuses bad configs, naming the key --------------------------


def check_with(handler_config):
    cfg = {"amqp": {"url": os.environ["SC_TEST_AMQP_URL"]},
           "mysql": {"url": os.environ["SC_TEST_MYSQL_CONSUMER_URL"]},
           "consumers": [{"name": "chk-" + suffix(), "queue": "chk-" + suffix(),
                          "handler": SQL_HANDLER, "handler_config": handler_config}]}
    return run_sidecar_cmd(["check"], cfg)


rc, out = check_with(NJ_CONFIG)
is_eq(rc, 0, "check accepts the issue's config")
ok("checked against the database" in out, "and says it checked the statements")
bad = copy.deepcopy(NJ_CONFIG)
bad["events"]["ORDER_ACCEPTED"][0]["params"][1] = "subject:integer"
rc, out = check_with(bad)
ok(rc == 2 and "handler_config.events.ORDER_ACCEPTED[0].params[1]: unknown type 'integer'" in out,
   f"unknown type refused naming the key (rc {rc})", detail=out)
bad = copy.deepcopy(NJ_CONFIG)
bad["events"]["ORDER_ACCEPTED"][0]["params"].pop()
rc, out = check_with(bad)
ok(rc == 2 and "the sql has 3 placeholders, params has 2" in out, f"placeholder count refused (rc {rc})", detail=out)
bad = copy.deepcopy(NJ_CONFIG)
bad["events"]["ORDER_ACCEPTED"].append({"sql": "INSERT INTO notification_job (no_such_column) VALUES (?)", "params": ["id"]})
rc, out = check_with(bad)
ok(rc == 2 and "events.ORDER_ACCEPTED[1]: does not prepare: error 1054" in out,
   f"a statement that does not fit the schema is refused naming the key (rc {rc})", detail=out)
bad = copy.deepcopy(NJ_CONFIG)
bad["events"]["ORDER_ACCEPTED"].append({"sql": "UPDATE notification_job SET status = ? WHERE event_id = ?",
                                        "params": ["type", "id"]})
rc, out = check_with(bad)
ok(rc == 2 and "events.ORDER_ACCEPTED[1]: does not prepare: error 1142" in out,
   f"a statement the consumer's grants do not allow is refused (rc {rc})", detail=out)
done()
