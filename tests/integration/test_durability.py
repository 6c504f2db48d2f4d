"""Durability is checked, not assumed. With innodb_flush_log_at_trx_commit 0
and 2 on the test server (SET GLOBAL as root, put back in a finally),
`consume` and `relay` refuse to start (exit 2, naming the setting, its value
and what to set) and `check` exits 1 naming it; mysql.allow_unsafe_durability
lets consume, relay and check go on, warning with the setting and exporting
sidecar_unsafe_durability. A setting changed under a running consumer is seen
at its next session: refused and counted while it lasts, nothing applied,
and consumed again once the setting is back. (The binary log case:
test_durability_binlog.py, on a MariaDB of its own.)"""
import copy
import re

from harness import *

CONSUMER_URL = os.environ["SC_TEST_MYSQL_CONSUMER_URL"]
FLUSH = "innodb_flush_log_at_trx_commit"


def set_flush(v):
    query(f"SET GLOBAL innodb_flush_log_at_trx_commit = {int(v)}")


def gauge(proc, setting=FLUSH):
    return metric_sum(proc.http_port(), r'^sidecar_unsafe_durability\{setting="%s",node="0",[^}]*\} (\d+)$'
                      % re.escape(setting), default=-1)

original = int(query("SELECT @@GLOBAL.innodb_flush_log_at_trx_commit")[0][0])
ok(original == 1, f"the test server runs durable ({FLUSH}={original})")

ex = "dur-" + suffix()
consumer_cfg = {"amqp": {"url": os.environ["SC_TEST_AMQP_URL"]},
                "mysql": {"url": CONSUMER_URL},
                "http": {"listen": "off"},
                "consumers": [{"name": "dur-" + suffix(), "handler": HANDLER,
                               "bindings": [{"exchange": ex, "routing_key": "#"}]}]}
relay_cfg = {"amqp": {"url": os.environ["SC_TEST_AMQP_URL"]},
             "mysql": {"url": os.environ["SC_TEST_MYSQL_RELAY_URL"]},
             "http": {"listen": "off"},
             "relay": {"exchange": ex, "worker_id": "dur-relay-" + suffix()}}


def allowing(cfg):
    c = copy.deepcopy(cfg)
    c["mysql"]["allow_unsafe_durability"] = True
    return c


try:
    for v in (0, 2):
        set_flush(v)
        named = f"{FLUSH}={v} ("
        for cmd, cfg in (("consume", consumer_cfg), ("relay", relay_cfg)):
            rc, out = run_sidecar_cmd([cmd], cfg)
            is_eq(rc, 2, f"{FLUSH}={v}: {cmd} refuses to start")
            ok("refused: mysql node 0 (127.0.0.1:" in out and named in out and "set 1" in out
               and "mysql.allow_unsafe_durability" in out,
               f"{cmd} names the node, the setting, its value and what to set", detail=out[-1500:])
            ok("worker 0 consuming" not in out and "publishing outbox_event" not in out,
               f"{cmd} never started consuming or relaying")
        for what, cfg in (("consumers", consumer_cfg), ("a relay", relay_cfg)):
            rc, out = run_sidecar_cmd(["check"], cfg)
            is_eq(rc, 1, f"{FLUSH}={v}: check with {what} exits 1")
            ok(f"not durable: {named}" in out and f"{FLUSH}={v} sync_binlog=1" in out,
               f"check prints the node's settings and names the unsafe one", detail=out[-1500:])

    # The override, at 2: consume, relay and check go on, and say so.
    set_flush(2)
    rc, out = run_sidecar_cmd(["check"], allowing(consumer_cfg))
    is_eq(rc, 0, "check with mysql.allow_unsafe_durability exits 0")
    ok(f"not durable, allowed by mysql.allow_unsafe_durability: {FLUSH}=2 (" in out,
       "and still names the setting", detail=out[-1500:])

    s = Sidecar(extra={"mysql": {"url": CONSUMER_URL, "allow_unsafe_durability": True}})
    ok(s.start(), "consume starts on flush 2 with mysql.allow_unsafe_durability", detail=s.text()[-2000:])
    warns = [l for l in s.lines() if l.get("level") == "warn" and f"{FLUSH}=2 (" in l.get("msg", "")
             and "running anyway because mysql.allow_unsafe_durability is true" in l.get("msg", "")]
    is_eq(len(warns), 1, "one warning at start naming the setting (the workers' sessions add none)")
    is_eq(gauge(s), 1, f"sidecar_unsafe_durability{{setting=\"{FLUSH}\"}} is 1")
    is_eq(gauge(s, "sync_binlog"), 0, "the durable settings are 0")
    eid = str(uuid.uuid4())
    publish_events(s.exchange, [(eid, "7001")])
    ok(wait_until(lambda: count_in("consumed_event", "event_id", [eid]) == 1, timeout=30),
       "and it consumes")
    is_eq(s.stop(), 0, "stops cleanly")

    r = Relay(ex)
    r.config["mysql"]["allow_unsafe_durability"] = True
    json.dump(r.config, open(r.config_path, "w"))
    r.start()
    ok(wait_until(lambda: any("publishing outbox_event" in l.get("msg", "") for l in r.lines()), timeout=20)
       and r.alive(), "relay starts on flush 2 with the override", detail=r.text()[-2000:])
    ok(any(l.get("level") == "warn" and f"{FLUSH}=2 (" in l.get("msg", "") for l in r.lines()),
       "with its warning naming the setting")
    ok(wait_until(lambda: gauge(r) == 1, timeout=10), "and the gauge")
    is_eq(r.stop(), 0, "the relay stops cleanly")

    # A setting changed after start: seen at the next session.
    set_flush(1)
    s = Sidecar(consumer_extra={"db_outage_hold_ms": 2000})
    ok(s.start(), "a consumer starts on a durable server")
    is_eq(gauge(s), 0, "its gauge is 0")
    set_flush(2)
    for (tid,) in query("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = 'sidecar_consumer'"):
        query(f"KILL {int(tid)}")
    eid = str(uuid.uuid4())
    publish_events(s.exchange, [(eid, "7002")])
    refused = lambda: [l for l in s.lines() if "refused: mysql node 0" in l.get("msg", "")
                       and f"{FLUSH}=2 (" in l.get("msg", "")]
    ok(wait_until(refused, timeout=30), "the new session after the lost one is refused, naming the setting",
       detail=s.text()[-2500:])
    ok(wait_until(lambda: metric_sum(s.http_port(), r'^sidecar_durability_refused_total\{setting="%s"\} (\d+)$'
                                     % FLUSH) >= 1, timeout=10),
       "and counted in sidecar_durability_refused_total")
    is_eq(gauge(s), 1, "the gauge says which setting")
    status, body = s.get("/readyz")
    is_eq(status, 503, f"not ready meanwhile ({body.strip()})")
    is_eq(count_in("consumed_event", "event_id", [eid]), 0, "nothing was applied on the node")
    set_flush(1)
    ok(wait_until(lambda: count_in("consumed_event", "event_id", [eid]) == 1, timeout=90),
       "back at 1, the next session consumes the event", detail=s.text()[-2500:])
    ok(any("durable again" in l.get("msg", "") for l in s.lines()), "logged as durable again")
    is_eq(gauge(s), 0, "and the gauge is 0 again")
    is_eq(s.stop(), 0, "stops cleanly")
finally:
    set_flush(original)
done()
