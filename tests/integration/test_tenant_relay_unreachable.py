"""A tenant whose database does not answer does not hold the relay's round
for the others beyond one connect timeout.

The tenant's name is the last byte of its server's loopback address
(database_url mysql://...@127.0.0.{tenant}:PORT/tu_{tenant}): tenant 1 is
the test server (127.0.0.1), tenant 2 a listener on 127.0.0.2, same port,
that never accepts and whose accept queue is full, so the kernel drops the
SYNs and each connect waits out mysql.connect_timeout_s (2 s here). Rows of the healthy tenant inserted
while the relay tries the dead one again and again (its backoff doubling
from 100 ms) are each published within BOUND = connect timeout + 1.5 s
(a claim round: the dead tenant's one attempt, then the healthy one's
claim, publish and mark); the dead one counts in sidecar_relay_tenants_down
and /readyz stays 200."""
import re
import socket

import tenants_common
from harness import *
from tenants_common import *

tenants_common.PREFIX = "tu_"
CONNECT_S = 2
BOUND = CONNECT_S + 1.5

url = os.environ["SC_TEST_MYSQL_RELAY_URL"]
port = int(re.search(r"@127\.0\.0\.1:(\d+)/", url).group(1))
dead = socket.socket()
dead.bind(("127.0.0.2", port))
dead.listen(0)
fill = []
for _ in range(3):  # fill the accept queue: later SYNs are dropped
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect(("127.0.0.2", port))
    except BlockingIOError:
        pass
    fill.append(s)
probe = socket.socket()
probe.settimeout(1)
t0 = time.time()
try:
    probe.connect(("127.0.0.2", port))
    blackholed = False
except OSError:
    blackholed = time.time() - t0 >= 0.9
ok(blackholed, "the dead port's connects time out (SYNs dropped)")

LIVE, DEAD = "1", "2"
make_tenant_db(LIVE)
grant_relay(LIVE)
ex = "tenant-unreachable-" + suffix()
q = bound_queue(ex)

r = Relay(ex, batch=50, poll_ms=100, lease_ms=6000)
r.config["mysql"]["connect_timeout_s"] = CONNECT_S
r.config["tenants"] = {"key": "extension:tenant",
                       "database_url": re.sub(r"@127\.0\.0\.1:(\d+)/app$", r"@127.0.0.{tenant}:\1/tu_{tenant}", url),
                       "list": [DEAD, LIVE], "max_connections": 10}
with open(r.config_path, "w") as f:
    json.dump(r.config, f)
r.start()


def published(ids):
    return tenant_query(LIVE, "SELECT COUNT(*) FROM outbox_event WHERE status = 'PUBLISHED' AND event_id IN ("
                        + ",".join(["%s"] * len(ids)) + ")", list(ids))[0][0]


def gauge(name):
    port = r.http_port()
    return metric_sum(port, r"^" + name + r"\{[^}]*\} (\d+)$", default=None) if port else None


ok(wait_until(lambda: gauge("sidecar_relay_tenants_down") == 1, timeout=30),
   "the dead tenant counts in sidecar_relay_tenants_down")
lat = []
for k in range(8):
    ids = insert_tenant_outbox(LIVE, 5, 1000 + 10 * k)
    t0 = time.time()
    wait_until(lambda: published(ids) == 5, timeout=30, step=0.02)
    lat.append(time.time() - t0)
    time.sleep(0.7 + 0.3 * k)  # spread over the dead tenant's backoff steps
diag("the live tenant's rows published after " + ", ".join(f"{x:.2f}" for x in lat) +
     f" s (connect timeout {CONNECT_S} s)")
ok(max(lat) <= BOUND, f"each within {BOUND} s: worst {max(lat):.2f} s")
ok(any(l.get("msg", "").startswith(f"relay: tenant {DEAD}: connecting failed") for l in r.lines()),
   "the dead tenant's connect failure is logged")
is_eq(r.get("/readyz")[0], 200, "/readyz 200")
is_eq(r.stop(), 0, "clean exit")
evs = [json.loads(b) for _, _, b in drain_with_keys(q)]
is_eq((len(evs), {e["tenant"] for e in evs}), (40, {LIVE}), "40 messages, all of the live tenant")
drop_tenant_db(LIVE)
for s in fill:
    s.close()
dead.close()
done()
