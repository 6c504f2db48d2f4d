"""A tenant whose server goes silent on an already open session holds the
consumer's other tenant for at most tenants.read_timeout_s plus one
connect timeout, and its events are applied once each when it answers
again.

The tenant's name is the last byte of its server's loopback address
(database_url mysql://...@127.0.0.{tenant}:PORT/ts_{tenant}): tenant 1 is
the test server (127.0.0.1), tenant 2 a proxy of the test's own on
127.0.0.2, same port, forwarding to the test server. One worker,
mysql.lock_wait_timeout_s 1, so tenants.read_timeout_s is its default,
1 + 5 = 6 s (the old bound, the lock wait + 30 s, was 31 s), and
mysql.connect_timeout_s 2.

Tenant 2's session is opened by one event; then the proxy swallows every
byte both ways (a host gone silent: no RST, no FIN) and tenant 2's next
events are sent. The worker's claim for them waits for a reply that never
comes until the read timeout, the fresh session made once more waits for a
greeting that never comes until the connect timeout, and the tenant is
down, its deliveries waiting in hand. Tenant 1's events, sent one after
another all the while, are each applied within BOUND = read timeout +
connect timeout + 1.5 s, and at least one of them met the silent read.
Then every connection that saw bytes swallowed is cut and the proxy
forwards again: tenant 2's events are applied, once each (effect and claim
by event id), at attempt 1, nothing dead-lettered."""
import datetime
import re

import tenants_common
from harness import *
from tenants_common import *

tenants_common.PREFIX = "ts_"
LOCK_WAIT_S = 1
READ_S = LOCK_WAIT_S + 5  # tenants.read_timeout_s's default
CONNECT_S = 2
BOUND = READ_S + CONNECT_S + 1.5
TRIES = 2  # tenant 2 found unusable this many times while silent

port = int(os.environ["SC_TEST_MYSQL_PORT"])
LIVE, SILENT = "1", "2"
make_tenant_db(LIVE)
make_tenant_db(SILENT)


proxy = SilentProxy(port)
url = re.sub(r"@127\.0\.0\.1:(\d+)/", r"@127.0.0.{tenant}:\1/", tenant_url())
sc = Sidecar(consumer_extra={"workers": 1, "prefetch": 32, "batch_max": 8,
                             "db_outage_hold_ms": 120000, "max_attempts": 2},
             extra={"tenants": {"key": "extension:tenant", "database_url": url,
                                "max_connections": 4, "idle_close_ms": 60000}})
sc.config["mysql"]["connect_timeout_s"] = CONNECT_S
sc.config["mysql"]["lock_wait_timeout_s"] = LOCK_WAIT_S
with open(sc.config_path, "w") as f:
    json.dump(sc.config, f)
ok(sc.start(), "consumer with tenants 1 and 2 (through the proxy) started")

warm = [str(uuid.uuid4()), str(uuid.uuid4())]
send_tenant_events(sc.exchange, [(warm[0], LIVE), (warm[1], SILENT)])
ok(wait_until(lambda: tenant_count(SILENT, "notification_job", [warm[1]]) == 1 and
              tenant_count(LIVE, "notification_job", [warm[0]]) == 1, timeout=30),
   "both tenants' sessions open (one event each applied)")


def failures():
    return [l for l in sc.lines()
            if l.get("msg", "").startswith(f"tenant {SILENT}: database cannot be used")]


before = len(failures())
proxy.silent()
t_silent = time.time()
silent_ids = [str(uuid.uuid4()) for _ in range(3)]
send_tenant_events(sc.exchange, [(e, SILENT) for e in silent_ids])

live_ids, lat = [], []
end = time.time() + 90
while time.time() < end and not (len(failures()) >= before + TRIES and
                                  time.time() - t_silent >= READ_S + CONNECT_S):
    e = str(uuid.uuid4())
    live_ids.append(e)
    t0 = time.time()
    send_tenant_events(sc.exchange, [(e, LIVE)])
    wait_until(lambda: tenant_count(LIVE, "notification_job", [e]) == 1, timeout=60, step=0.02)
    lat.append(time.time() - t0)
ok(len(failures()) >= before + TRIES,
   f"tenant 2 found unusable {len(failures()) - before} times while silent")
diag(f"tenant 1's {len(lat)} events applied after at most {max(lat):.2f} s "
     f"(mean {sum(lat) / len(lat):.2f} s); {proxy.swallowed} bytes swallowed; tenant 2's first "
     f"error: {failures()[before].get('msg', '')[:200] if len(failures()) > before else None}")
ok(max(lat) <= BOUND, f"each of tenant 1's events applied within read timeout {READ_S} s + connect "
   f"timeout {CONNECT_S} s + 1.5 s = {BOUND} s (worst {max(lat):.2f} s)")
ok(max(lat) >= READ_S / 2, f"one of them met the silent read (waited {max(lat):.2f} s)")
lost = [l for l in sc.lines() if l.get("msg", "").startswith("database session lost during a batch")
        and "error 2013" in l.get("msg", "")]
waited = (datetime.datetime.fromisoformat(lost[0]["time"].replace("Z", "+00:00")).timestamp() - t_silent
          if lost else None)
diag(f"the silent session's statement given up after {waited} s")
ok(waited is not None and READ_S - 0.5 <= waited <= READ_S + 1.5,
   f"tenant 2's silent session ended with the client's read timeout: error 2013 after "
   f"{waited if waited is None else round(waited, 2)} s, read timeout {READ_S} s")
is_eq(tenant_count(SILENT, "notification_job", silent_ids), 0, "none of tenant 2's applied meanwhile")
is_eq(queue_depth(sc.dlq), 0, "nothing dead-lettered meanwhile")

proxy.answer()
ok(wait_until(lambda: tenant_count(SILENT, "notification_job", silent_ids) == len(silent_ids),
              timeout=60),
   f"tenant 2 answers again: its {len(silent_ids)} events applied")
for t, ids in ((SILENT, silent_ids + warm[1:]), (LIVE, live_ids + warm[:1])):
    marks = ",".join(["%s"] * len(ids))
    eff = dict(tenant_query(t, f"SELECT event_id, COUNT(*) FROM notification_job WHERE event_id IN "
                               f"({marks}) GROUP BY event_id", ids))
    cl = dict(tenant_query(t, f"SELECT event_id, COUNT(*) FROM consumed_event WHERE event_id IN "
                              f"({marks}) GROUP BY event_id", ids))
    is_eq([e for e in ids if (eff.get(e, 0), cl.get(e, 0)) != (1, 1)], [],
          f"tenant {t}: each of its {len(ids)} events applied exactly once")
att = {l.get("attempt") for l in sc.outcomes("applied") if l.get("event_id") in silent_ids}
is_eq(att, {1}, "tenant 2's events applied at attempt 1 (the silence spent none)")
is_eq(queue_depth(sc.dlq), 0, "nothing dead-lettered")
is_eq(sc.stop(), 0, "clean stop")

# Silent during a COMMIT: a second consumer pauses before its first COMMIT
# (a fault point), the proxy falls silent meanwhile, and the COMMIT times
# out: its outcome is unknown, the delivery is not acked, and the
# redelivery applies it once the tenant answers again.
sc2 = Sidecar(consumer_extra={"workers": 1, "prefetch": 32, "batch_max": 8,
                              "db_outage_hold_ms": 120000, "max_attempts": 2},
              extra={"tenants": {"key": "extension:tenant", "database_url": url,
                                 "max_connections": 4, "idle_close_ms": 60000}})
sc2.config["mysql"]["connect_timeout_s"] = CONNECT_S
sc2.config["mysql"]["lock_wait_timeout_s"] = LOCK_WAIT_S
with open(sc2.config_path, "w") as f:
    json.dump(sc2.config, f)
ok(sc2.start(env={"SIDECAR_FAULT": "consumer.before_commit:1", "SIDECAR_FAULT_PAUSE_MS": "1500"}),
   "second consumer started, to pause before its first COMMIT")
cid = str(uuid.uuid4())
send_tenant_events(sc2.exchange, [(cid, SILENT)])
ok(wait_until(lambda: any(l.get("msg", "").startswith("fault point reached, pausing")
                          for l in sc2.lines()), timeout=30, step=0.02),
   "tenant 2's batch paused before its COMMIT")
proxy.silent()
t_commit = time.time()


def unknown():
    return [l for l in sc2.lines() if l.get("event_id") == cid and l.get("outcome") == "unknown"]


ok(wait_until(lambda: unknown(), timeout=60), "the COMMIT sent into the silence ended")
took = time.time() - t_commit
msg = unknown()[0].get("msg", "") if unknown() else ""
diag(f"COMMIT given up {took:.1f} s after the silence (pause 1.5 s, read timeout {READ_S} s): {msg[:160]}")
ok(took <= 1.5 + READ_S + 1.5, f"within the pause + read timeout + 1.5 s (took {took:.1f} s)")
ok(msg.startswith("COMMIT failed, outcome unknown: not acked") and
   "Lost connection" in msg and unknown()[0].get("error_code") in (2013, None),
   "its outcome is unknown (lost connection), not acked")
is_eq(tenant_count(SILENT, "notification_job", [cid]), 0, "nothing of it committed")
proxy.answer()
ok(wait_until(lambda: tenant_count(SILENT, "notification_job", [cid]) == 1, timeout=60),
   "tenant 2 answers again: the redelivery applied it")
time.sleep(1)
is_eq((tenant_count(SILENT, "notification_job", [cid]), tenant_count(SILENT, "consumed_event", [cid])),
      (1, 1), "applied exactly once (effect and claim)")
is_eq([l.get("outcome") for l in sc2.lines() if l.get("event_id") == cid and l.get("outcome")][-1:],
      ["applied"], "its last outcome: applied")
is_eq(queue_depth(sc2.dlq), 0, "nothing dead-lettered")
is_eq(sc2.stop(), 0, "clean stop")
proxy.close()
for t in (LIVE, SILENT):
    drop_tenant_db(t)
done()
