"""A tenant whose server goes silent on the relay's open session holds the
relay's one thread, every other tenant's round with it, for at most
tenants.read_timeout_s plus one connect timeout, and its rows are
published once each when it answers again.

The tenant's name is the last byte of its server's loopback address
(database_url mysql://...@127.0.0.{tenant}:PORT/trs_{tenant}): tenant 1 is
the test server (127.0.0.1), tenant 2 a proxy of the test's own on
127.0.0.2, same port, forwarding to the test server (SilentProxy).
mysql.lock_wait_timeout_s 1, so tenants.read_timeout_s is its default,
1 + 5 = 6 s (mysql.url's sessions wait the lock wait + 30 s), and
mysql.connect_timeout_s 2.

Tenant 2's session is opened by a first row published; then the proxy
swallows every byte both ways (no RST, no FIN) and rows are inserted into
tenant 2's outbox. The relay's next claim from tenant 2 waits for a reply
that never comes until the read timeout, the fresh session made once more
waits for a greeting that never comes until the connect timeout, and the
tenant is down with backoff, each retry one more connect timeout. Tenant 1's
rows, inserted one after another all the while, are each published within
BOUND = read timeout + connect timeout + 1.5 s, and at least one of them
met the silent read. Then the proxy forwards again: tenant 2's rows are
published once each (by event id on a queue bound to the exchange) with
their `tenant` attribute and end PUBLISHED.

lease_ms 6 s is shorter than the 8 s the silent tenant holds the thread, on
purpose: a batch of tenant 1 sent just before the block is still unmarked
when its lease runs out, and the claim call that began before the block
takes its row again as an expired lease after it. That copy must be left
unsent (the relay counts such a lease from the call's start: "held ...
past its lease"), and the first batch's mark still finds its lease (same
lease_owner): each row on the queue once. A PENDING row the same call
claims after the block counts its lease from its own statement: it is
published at once, not a lease later."""
import datetime
import re

import tenants_common
from harness import *
from tenants_common import *
from tenant_hosts import SilentProxy

tenants_common.PREFIX = "trs_"
LOCK_WAIT_S = 1
READ_S = LOCK_WAIT_S + 5  # tenants.read_timeout_s's default
CONNECT_S = 2
BOUND = READ_S + CONNECT_S + 1.5
SILENCE_S = READ_S + 3 * CONNECT_S  # the silent read, then retries of the down tenant

url = os.environ["SC_TEST_MYSQL_RELAY_URL"]
port = int(re.search(r"@127\.0\.0\.1:(\d+)/", url).group(1))
LIVE, SILENT = "1", "2"
for t in (LIVE, SILENT):
    make_tenant_db(t)
    grant_relay(t)
proxy = SilentProxy(port)
ex = "tenant-relay-silent-" + suffix()
q = bound_queue(ex)

r = Relay(ex, batch=50, poll_ms=100, lease_ms=6000)
r.config["mysql"]["connect_timeout_s"] = CONNECT_S
r.config["mysql"]["lock_wait_timeout_s"] = LOCK_WAIT_S
r.config["tenants"] = {"key": "extension:tenant",
                       "database_url": re.sub(r"@127\.0\.0\.1:(\d+)/app$",
                                              r"@127.0.0.{tenant}:\1/trs_{tenant}", url),
                       "list": [LIVE, SILENT], "max_connections": 4, "idle_close_ms": 60000}
with open(r.config_path, "w") as f:
    json.dump(r.config, f)
r.start()


def published(tenant, ids):
    return tenant_query(tenant, "SELECT COUNT(*) FROM outbox_event WHERE status = 'PUBLISHED' AND "
                        "event_id IN (" + ",".join(["%s"] * len(ids)) + ")", list(ids))[0][0]


def gauge(name):
    p = r.http_port()
    return metric_sum(p, r"^" + name + r"\{[^}]*\} (\d+)$", default=None) if p else None


def down_lines():
    return [l for l in r.lines() if l.get("msg", "").startswith(f"relay: tenant {SILENT}: ")
            and " failed: error " in l.get("msg", "")]


warm = {LIVE: insert_tenant_outbox(LIVE, 1, 100), SILENT: insert_tenant_outbox(SILENT, 1, 200)}
ok(wait_until(lambda: all(published(t, ids) == 1 for t, ids in warm.items()), timeout=30),
   "a first row of each tenant published")
ok(wait_until(lambda: gauge("sidecar_relay_tenant_sessions") == 2, timeout=10),
   "both tenants' sessions open")

# A claim call starts at the tenant after the last one that gave rows: with
# tenant 1's row claimed last, the call that meets the silence tries tenant
# 2 first, then, once the read timeout ends, tenant 1 in the same call.
last = insert_tenant_outbox(LIVE, 1, 150)
ok(wait_until(lambda: published(LIVE, last) == 1, timeout=30), "a row of tenant 1 claimed last")
warm[LIVE] += last
proxy.silent()
t_silent = time.time()
silent_ids = insert_tenant_outbox(SILENT, 3, 300)
# Tenant 1's first row goes in once the relay's claim from tenant 2 waits
# on the silent session, so that the same call takes it right after the
# block: its lease counts from its own statement, not from the call's
# start (which left it unsent to a lease it still held, and published it
# a lease later: 14.8 s).
ok(wait_until(lambda: proxy.swallowed > 0, timeout=5, step=0.01),
   "the relay's claim from tenant 2 waits on the silent session")
live_ids, lat, down_seen = [], [], False
k = 0
while time.time() - t_silent < SILENCE_S:
    ids = insert_tenant_outbox(LIVE, 1, 1000 + k)
    k += 1
    live_ids += ids
    t0 = time.time()
    wait_until(lambda: published(LIVE, ids) == 1, timeout=60, step=0.02)
    lat.append(time.time() - t0)
    diag(f"row {k} inserted at +{t0 - t_silent:.2f} s published after {lat[-1]:.2f} s")
    down_seen = down_seen or gauge("sidecar_relay_tenants_down") == 1
diag(f"tenant 1's {len(lat)} rows published after at most {max(lat):.2f} s "
     f"(mean {sum(lat) / len(lat):.2f} s); {proxy.swallowed} bytes swallowed")
ok(max(lat) <= BOUND, f"each of tenant 1's rows published within read timeout {READ_S} s + connect "
   f"timeout {CONNECT_S} s + 1.5 s = {BOUND} s (worst {max(lat):.2f} s)")
ok(max(lat) >= READ_S / 2, f"one of them met the silent read (waited {max(lat):.2f} s)")
ok(down_seen, "tenant 2 counted in sidecar_relay_tenants_down while silent")
down = down_lines()
waited = (datetime.datetime.fromisoformat(down[0]["time"].replace("Z", "+00:00")).timestamp() - t_silent
          if down else None)
diag(f"tenant 2 logged down {waited if waited is None else round(waited, 2)} s after the silence: "
     f"{down[0].get('msg', '')[:240] if down else None}")
ok(down and "error 2013 " in down[0]["msg"], "tenant 2 logged down with error 2013 (lost connection)")
ok(waited is not None and READ_S - 0.5 <= waited <= READ_S + CONNECT_S + 1.5,
   f"after the read timeout and one connect timeout at most ({waited if waited is None else round(waited, 2)}"
   f" s; {READ_S} + {CONNECT_S} s)")
is_eq(published(SILENT, silent_ids), 0, "none of tenant 2's rows published meanwhile")
held = [l for l in r.lines() if "past its lease before it could be sent" in l.get("msg", "")]
diag(f"{len(held)} batch(es) claimed across the block left to their lease (a row in flight taken again)")

proxy.answer()
t_back = time.time()
ok(wait_until(lambda: published(SILENT, silent_ids) == len(silent_ids), timeout=60),
   f"tenant 2 answers again: its {len(silent_ids)} rows PUBLISHED "
   f"({time.time() - t_back:.1f} s after)")
ok(wait_until(lambda: gauge("sidecar_relay_tenants_down") == 0, timeout=10),
   "sidecar_relay_tenants_down back to 0")
ok(any(l.get("msg", "").startswith(f"relay: tenant {SILENT}: database works again") for l in r.lines()),
   "tenant 2 logged working again")
time.sleep(1)  # a second copy, had there been one, would be on the queue by now
is_eq(r.stop(), 0, "clean exit")

evs = [json.loads(b) for _, _, b in drain_with_keys(q)]
want = {e: SILENT for e in warm[SILENT] + silent_ids}
want.update({e: LIVE for e in warm[LIVE] + live_ids})
got = {}
for e in evs:
    got.setdefault(e["id"], []).append(e.get("tenant"))
is_eq(sorted(e for e in want if got.get(e) != [want[e]]), [],
      f"each of the {len(want)} rows published exactly once, with its tenant attribute")
is_eq(sorted(set(got) - set(want)), [], "nothing else published")
for t, ids in ((SILENT, warm[SILENT] + silent_ids), (LIVE, warm[LIVE] + live_ids)):
    rows = tenant_query(t, "SELECT status, lease_owner IS NULL, COUNT(*) FROM outbox_event GROUP BY 1, 2")
    is_eq([tuple(x) for x in rows], [("PUBLISHED", 1, len(ids))],
          f"tenant {t}: its {len(ids)} outbox rows all PUBLISHED, no lease left")
proxy.close()
for t in (LIVE, SILENT):
    drop_tenant_db(t)
done()
