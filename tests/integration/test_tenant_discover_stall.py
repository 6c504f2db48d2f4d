"""tenants.discover against a node that stops answering does not hold the
other tenants' publishing.

The relay reaches the server through a proxy (tenants.database_url's one
node) with tenants.discover (tx_{tenant}, listed every second). Once both
tenants' sessions are open the proxy stalls: every new connection is
accepted and sent nothing, so each listing's connect waits out
mysql.connect_timeout_s (3 s here), while the open sessions go on. Rows
of both tenants inserted then, one round after the other with no pause,
are each published within BOUND = 1.5 s, half the connect timeout: the
listing runs beside the claims, not between them (a listing on the relay's
own thread held nearly every round for the whole timeout). The failed
listing is logged and changes nothing (both tenants stay, the gauge says
2); once the proxy answers again the listing is logged working again and a
tenant made meanwhile joins and is published. A stop while a listing is
stalled ends in less than the connect timeout plus a margin."""
import re

import tenants_common
from harness import *
from tenants_common import *

tenants_common.PREFIX = "tx_"
CONNECT_S = 3
BOUND = CONNECT_S / 2
sfx = suffix()
A, B, C = "a_" + sfx, "b_" + sfx, "c_" + sfx
for t in (A, B):
    make_tenant_db(t)
    grant_relay(t)
ex = "tenant-discover-stall-" + sfx
q = bound_queue(ex)

proxy = StallProxy(int(os.environ["SC_TEST_MYSQL_PORT"]))
r = Relay(ex, batch=50, poll_ms=100, lease_ms=6000)
r.config["mysql"]["connect_timeout_s"] = CONNECT_S
r.config["tenants"] = {"key": "extension:tenant",
                       "database_url": re.sub(r"/app$", "/tx_{tenant}", proxy.url()),
                       "discover": True, "discover_ms": 1000, "max_connections": 10,
                       "idle_close_ms": 600000}
with open(r.config_path, "w") as f:
    json.dump(r.config, f)


def published(tenant, ids):
    return tenant_query(tenant, "SELECT COUNT(*) FROM outbox_event WHERE status = 'PUBLISHED' AND "
                        "event_id IN (" + ",".join(["%s"] * len(ids)) + ")", list(ids))[0][0]


def gauge(name):
    port = r.http_port()
    return metric_sum(port, r"^" + name + r"\{[^}]*\} (\d+)$", default=None) if port else None


def logged(text):
    return any(text in l.get("msg", "") for l in r.lines())


sent = {A: 0, B: 0, C: 0}
ia, ib = insert_tenant_outbox(A, 5, 1000), insert_tenant_outbox(B, 5, 2000)
sent[A] += 5
sent[B] += 5
r.start()
ok(wait_until(lambda: published(A, ia) == 5 and published(B, ib) == 5, timeout=60),
   "both discovered tenants' first rows PUBLISHED (their sessions open through the proxy)")

proxy.stall()
ok(wait_until(lambda: logged("relay: tenants.discover: connecting"), timeout=4 * CONNECT_S + 10),
   "a listing against the stalled node fails on its connect and is logged")
ok(proxy.held >= 1, f"the listing's connects were left waiting ({proxy.held})")

# Rounds back to back for two connect timeouts and more: two whole stalled
# listings at least fall inside them.
lat = []
held_before, start, k = proxy.held, time.time(), 0
while time.time() - start < 2 * CONNECT_S + 1:
    ids = {A: insert_tenant_outbox(A, 5, 3000 + 10 * k), B: insert_tenant_outbox(B, 5, 4000 + 10 * k)}
    sent[A] += 5
    sent[B] += 5
    k += 1
    t0 = time.time()
    wait_until(lambda: published(A, ids[A]) == 5 and published(B, ids[B]) == 5, timeout=30, step=0.02)
    lat.append(time.time() - t0)
held_during = proxy.held - held_before
lat_sorted = sorted(lat)
diag(f"{len(lat)} rounds in {time.time() - start:.1f} s while listings stalled ({held_during} "
     f"more connects left waiting; connect timeout {CONNECT_S} s): median "
     f"{lat_sorted[len(lat) // 2]:.2f} s, worst {lat_sorted[-1]:.2f} s")
ok(held_during >= 2, f"listings went on meanwhile, each stalled ({held_during} connects held)")
ok(max(lat) <= BOUND, f"each round within {BOUND} s: worst {max(lat):.2f} s")
is_eq(gauge("sidecar_relay_tenants"), 2, "a failed listing changes nothing: sidecar_relay_tenants")
is_eq(sum(1 for l in r.lines() if "relay: tenants.discover: connecting" in l.get("msg", "")), 1,
      "the failing listing logged once")

proxy.resume()
make_tenant_db(C)
grant_relay(C)
ic = insert_tenant_outbox(C, 5, 5000)
sent[C] += 5
ok(wait_until(lambda: published(C, ic) == 5, timeout=30),
   "after the node answers again a tenant made meanwhile joins and is published")
ok(logged("relay: tenants.discover: listing works again"), "the listing is logged working again")
ok(logged(f"relay: tenant {C}: database found, joins the round"), "the new tenant's joining is logged")

proxy.stall()
before = proxy.held
ok(wait_until(lambda: proxy.held > before, timeout=2 * CONNECT_S + 5), "a listing is stalled again")
t0 = time.time()
is_eq(r.stop(), 0, "clean exit while a listing is stalled")
stop_s = time.time() - t0
ok(stop_s <= CONNECT_S + 2, f"the stop waits out at most the listing's connect: {stop_s:.2f} s")
proxy.resume()

evs = [json.loads(b) for _, _, b in drain_with_keys(q)]
got = {t: sum(1 for e in evs if e.get("tenant") == t) for t in sent}
is_eq(got, sent, "every row published once, each with its tenant")
for t in (A, B, C):
    drop_tenant_db(t)
done()
