"""One process, several consumers, each with its own handler: every consumer
runs the .so its config names, and one .so used by two consumers gets one
init (and state) per consumer, with that consumer's handler_config.

Three consumers in one `sidecar consume`: the C sample handler
(notification_job.so), sql.so writing order_event_log, and sql.so again
writing notification_job. Each is fed from its own exchange; each effect
table must hold exactly its consumers' rows. `sidecar check` must name the
right handler per consumer, in either order."""
import copy
import os
import re

from harness import *

SQL_HANDLER = os.environ.get("SC_SQL_HANDLER", "")
if not SQL_HANDLER or not os.path.exists(SQL_HANDLER):
    bail("SC_SQL_HANDLER does not name the built sql.so")

LOG_CONFIG = {"events": {"ORDER_ACCEPTED": [
    {"sql": "INSERT INTO order_event_log (event_id, order_id, event_type, version, payload, occurred_at,"
            " received_at) VALUES (?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6))",
     "params": ["id", "subject:int", "type", "eventversion", "data:json", "time:datetime"]}]},
    "other_events": "ignore"}
NJ_CONFIG = {"events": {"ORDER_ACCEPTED": [
    {"sql": "INSERT INTO notification_job (event_id, order_id, source_version, status, created_at)"
            " VALUES (?, ?, ?, 'PENDING', UTC_TIMESTAMP(6))",
     "params": ["id", "subject:int", "eventversion"]}]},
    "other_events": "ignore"}

tag = suffix()


def consumer(name, handler, handler_config):
    return {"name": name, "queue": name, "bindings": [{"exchange": "ex-" + name, "routing_key": "#"}],
            "handler": handler, "handler_config": handler_config, "prefetch": 16,
            "max_attempts": 3, "retry_delays_ms": [200, 400]}


c_nj = consumer("two-c-" + tag, HANDLER, {})
sql_log = consumer("two-sqllog-" + tag, SQL_HANDLER, LOG_CONFIG)
sql_nj = consumer("two-sqlnj-" + tag, SQL_HANDLER, NJ_CONFIG)
base = {"amqp": {"url": os.environ["SC_TEST_AMQP_URL"], "heartbeat_s": 5},
        "mysql": {"url": os.environ["SC_TEST_MYSQL_CONSUMER_URL"]},
        "http": {"listen": "127.0.0.1:0"}}


def check(consumers):
    cfg = copy.deepcopy(base)
    cfg["consumers"] = consumers
    return run_sidecar_cmd(["check"], cfg, timeout=60)


# ---- sidecar check names each consumer's own handler, in either order ------
for order in ([c_nj, sql_log, sql_nj], [sql_log, c_nj, sql_nj], [sql_nj, sql_log, c_nj]):
    names = ", ".join(k["name"].split("-")[1] for k in order)
    rc, out = check(order)
    is_eq(rc, 0, f"check passes with the consumers in the order {names}")
    for k in order:
        want = "notification_job" if k["handler"] == HANDLER else "sql"
        ok(re.search(rf"^handler: consumer {re.escape(k['name'])}: {want} loaded$", out, re.M),
           f"check ({names}): consumer {k['name'].split('-')[1]} runs {want}", detail=out)
    ok(out.count("checked against the database") == 2,
       f"check ({names}): each sql.so consumer checked its own statements", detail=out)

# ---- sidecar consume: each consumer's effects, in its own table -------------
sc = Sidecar(name="two-" + tag)
sc.config["consumers"] = [c_nj, sql_log, sql_nj]
with open(sc.config_path, "w") as f:
    json.dump(sc.config, f)
ok(sc.start(), "one sidecar consume with three consumers started")
ok(wait_until(lambda: sum(1 for l in sc.lines() if l.get("msg", "").startswith("worker")) >= 3, timeout=30),
   "all three consumers are consuming")
N = 20
feeds = {k["name"]: new_events(N, start=7000 + 100 * i) for i, k in enumerate([c_nj, sql_log, sql_nj])}
for k in (c_nj, sql_log, sql_nj):
    publish_events("ex-" + k["name"], feeds[k["name"]])
ids = {name: [e for e, _ in evs] for name, evs in feeds.items()}
nj_ids = ids[c_nj["name"]] + ids[sql_nj["name"]]
log_ids = ids[sql_log["name"]]


def claims(name):
    return count_in("consumed_event", "event_id", ids[name], f"AND consumer_name = '{name}'")


ok(wait_until(lambda: all(claims(k["name"]) == N for k in (c_nj, sql_log, sql_nj)), timeout=60),
   "every consumer consumed all its events",
   detail={k["name"]: claims(k["name"]) for k in (c_nj, sql_log, sql_nj)})
is_eq(count_in("notification_job", "event_id", ids[c_nj["name"]]), N,
      "the C handler's consumer: one notification_job row per event")
is_eq(count_in("order_event_log", "event_id", ids[c_nj["name"]]), 0, "and no order_event_log row")
is_eq(count_in("order_event_log", "event_id", log_ids), N,
      "the sql.so order_event_log consumer: one order_event_log row per event")
is_eq(count_in("notification_job", "event_id", log_ids), 0,
      "and no notification_job row (it ran sql.so, not the first consumer's handler)")
is_eq(count_in("notification_job", "event_id", ids[sql_nj["name"]]), N,
      "the second sql.so consumer: one notification_job row per event (its own handler_config)")
is_eq(count_in("order_event_log", "event_id", ids[sql_nj["name"]]), 0,
      "and no order_event_log row (not the other sql.so consumer's config)")
rows = query("SELECT order_id FROM order_event_log WHERE event_id = %s", (log_ids[0],))
is_eq(rows and rows[0][0], int(feeds[sql_log["name"]][0][1]), "order_event_log holds the event's subject")
for k in (c_nj, sql_log, sql_nj):
    is_eq(queue_depth(k["name"] + ".dlq"), 0, f"nothing dead-lettered by {k['name'].split('-')[1]}")
is_eq(sc.stop(), 0, "clean stop")
query("DELETE FROM order_event_log WHERE event_id IN (" + ",".join(["%s"] * len(log_ids)) + ")", log_ids)
done()
