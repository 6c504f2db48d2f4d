"""A tenant whose database host does not answer does not hold the
consumer's other tenant beyond one connect timeout, and its events are
applied once each when it answers again.

The tenant's name is the last byte of its server's loopback address
(database_url mysql://...@127.0.0.{tenant}:PORT/tq_{tenant}): tenant 1 is
the test server (127.0.0.1), tenant 2 a listener of the test's own on
127.0.0.2, same port. One worker, mysql.connect_timeout_s 2, tenant 2's
events waiting in hand (fewer than half the prefetch, db_outage_hold_ms
far off) while it is tried again and again, its backoff doubling from
100 ms:

- first the listener never accepts and its accept queue is full: the
  kernel drops the SYNs, each connect waits out the connect timeout;
- then a listener that accepts and never sends the server's greeting:
  each connect waits for it, up to the connect timeout.

Tenant 1's events, sent one after another all the while, are each applied
within BOUND = connect timeout + 1.5 s (a round: the unanswering tenant's
one attempt, then tenant 1's batch), and at least one of them met a
hanging connect. Then the listener is replaced by one that forwards to
the test server (tenant 2's database is there): tenant 2's events are
applied, once each (effect and claim by event id), at attempt 1, nothing
dead-lettered."""
import re
import socket

import tenants_common
from harness import *
from tenants_common import *
from tenant_hosts import Blackhole, Listener

tenants_common.PREFIX = "tq_"
CONNECT_S = 2
BOUND = CONNECT_S + 1.5
TRIES = 2  # hanging connects per kind of listener

port = int(os.environ["SC_TEST_MYSQL_PORT"])
LIVE, DEAD = "1", "2"
make_tenant_db(LIVE)
make_tenant_db(DEAD)


hole = Blackhole(port)
probe = socket.socket()
probe.settimeout(1)
t0 = time.time()
try:
    probe.connect(("127.0.0.2", port))
    blackholed = False
except OSError:
    blackholed = time.time() - t0 >= 0.9
probe.close()
ok(blackholed, "the unanswering host's connects time out (SYNs dropped)")

url = re.sub(r"@127\.0\.0\.1:(\d+)/", r"@127.0.0.{tenant}:\1/", tenant_url())
sc = Sidecar(consumer_extra={"workers": 1, "prefetch": 32, "batch_max": 8,
                             "db_outage_hold_ms": 120000, "max_attempts": 2},
             extra={"tenants": {"key": "extension:tenant", "database_url": url,
                                "max_connections": 4, "idle_close_ms": 60000}})
sc.config["mysql"]["connect_timeout_s"] = CONNECT_S
with open(sc.config_path, "w") as f:
    json.dump(sc.config, f)
ok(sc.start(), "consumer with tenants 1 (answers) and 2 (does not) started")


def failures():
    return [l for l in sc.lines() if l.get("msg", "").startswith(f"tenant {DEAD}: database cannot be used")]


live_ids, dead_ids = [], []


def probes_until(pred, what):
    """Tenant 1's events one after another until pred(); their latencies."""
    lat = []
    end = time.time() + 60
    while time.time() < end and not pred():
        e = str(uuid.uuid4())
        live_ids.append(e)
        t0 = time.time()
        send_tenant_events(sc.exchange, [(e, LIVE)])
        wait_until(lambda: tenant_count(LIVE, "notification_job", [e]) == 1, timeout=30, step=0.02)
        lat.append(time.time() - t0)
    ok(pred(), what)
    return lat


for kind in ("SYNs dropped", "no greeting"):
    if kind == "no greeting":
        hole.close()
        hole = Listener(port, forward=False)
    before = len(failures())
    ids = [str(uuid.uuid4()) for _ in range(3)]
    dead_ids += ids
    send_tenant_events(sc.exchange, [(e, DEAD) for e in ids])
    lat = probes_until(lambda: len(failures()) >= before + TRIES,
                       f"{kind}: tenant 2 tried {TRIES} times and found unusable")
    diag(f"{kind}: tenant 1's {len(lat)} events applied after at most {max(lat):.2f} s "
         f"(mean {sum(lat) / len(lat):.2f} s); tenant 2's last error: "
         f"{failures()[-1].get('msg', '')[:200] if failures() else None}")
    ok(max(lat) <= BOUND, f"{kind}: each of tenant 1's events applied within {BOUND} s "
       f"(worst {max(lat):.2f} s)")
    ok(max(lat) >= CONNECT_S / 2, f"{kind}: one of them met a hanging connect "
       f"(waited {max(lat):.2f} s): the connects did hang")
    is_eq(tenant_count(DEAD, "consumed_event", dead_ids), 0, f"{kind}: none of tenant 2's claimed")
    if kind == "no greeting":
        ok(len(hole.held) >= TRIES, f"no greeting: the listener held {len(hole.held)} connects")

is_eq(queue_depth(sc.dlq), 0, "nothing dead-lettered meanwhile")
ok(sc.get("/readyz")[0] == 200, "/readyz 200 (one tenant's host is not the process's)")

# Pointed back: the listener now forwards to the test server.
hole.close()
hole = Listener(port, forward=True)
ok(wait_until(lambda: tenant_count(DEAD, "notification_job", dead_ids) == len(dead_ids), timeout=60),
   f"tenant 2 answers again: its {len(dead_ids)} events applied")
for t, ids in ((DEAD, dead_ids), (LIVE, live_ids)):
    marks = ",".join(["%s"] * len(ids))
    eff = dict(tenant_query(t, f"SELECT event_id, COUNT(*) FROM notification_job WHERE event_id IN "
                               f"({marks}) GROUP BY event_id", ids))
    cl = dict(tenant_query(t, f"SELECT event_id, COUNT(*) FROM consumed_event WHERE event_id IN "
                              f"({marks}) GROUP BY event_id", ids))
    is_eq([e for e in ids if (eff.get(e, 0), cl.get(e, 0)) != (1, 1)], [],
          f"tenant {t}: each of its {len(ids)} events applied exactly once")
att = {l.get("attempt") for l in sc.outcomes("applied") if l.get("event_id") in dead_ids}
is_eq(att, {1}, "tenant 2's events applied at attempt 1 (the outage spent none)")
is_eq(queue_depth(sc.dlq), 0, "nothing dead-lettered")
ok(any(l.get("msg", "").startswith(f"tenant {DEAD}: database usable again") for l in sc.lines()),
   "the consumer said tenant 2 is back")
is_eq(sc.stop(), 0, "clean stop")
hole.close()
for t in (LIVE, DEAD):
    drop_tenant_db(t)
done()
