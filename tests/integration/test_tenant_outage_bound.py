"""The unordered consumer's wait for a down tenant is bounded in memory and
returned with backoff.

One worker, prefetch 8: at most 4 deliveries (half the prefetch) wait in
hand for tenant B while B's database refuses the consumer (its grants
taken, its sessions killed), each for at most db_outage_hold_ms (1500 ms
here). B's 24 events do not fit: the rest go back through the delay queue
at once ("the deliveries in hand fill half the prefetch"), and the 4 in
hand go back too once they have waited db_outage_hold_ms, all with
x-sidecar-attempts unchanged, round after round while B is down, each
through the delay queue of B's failures so far (retry_delays_ms 200, 400,
then 800 ms). Scraped
from /metrics all the while: sidecar_tenant_waiting never above 4 and at 4
at some point, sidecar_tenant_returned_total growing. Tenant A's events,
sent one after another over the whole outage, are each applied within
A_BOUND. Once B's grants are back every one of B's events is applied
exactly once (by event id, effect and claim), each at attempt 1 (max_attempts
2: an attempt spent per return would have dead-lettered them), nothing
dead-lettered."""
import collections
import re
import threading

from harness import *
from tenants_common import *

PREFETCH, PARK_CAP, HOLD_MS, N_B = 8, 4, 1500, 24
DELAYS = [200, 400, 800]
A_BOUND = 1.5

sfx = suffix()
A, B = "oa_" + sfx, "ob_" + sfx
make_tenant_db(A)
make_tenant_db(B)

sc = Sidecar(consumer_extra={"workers": 1, "prefetch": PREFETCH, "batch_max": 4,
                             "db_outage_hold_ms": HOLD_MS, "max_attempts": 2,
                             "retry_delays_ms": DELAYS},
             extra={"tenants": {"key": "extension:tenant", "database_url": tenant_url(),
                                "max_connections": 4, "idle_close_ms": 60000}})
ok(sc.start(), "consumer with tenants started")
ok(wait_until(lambda: sc.http_port() is not None, timeout=10), "its /metrics is listening")
port = sc.http_port()


def metric(name):
    return metric_sum(port, rf'^{name}\{{consumer="{sc.name}"\}} (\d+)$', default=-1)


def applied_once(tenant, ids):
    """{event_id: (effects, claims)} for every id not applied exactly once."""
    marks = ",".join(["%s"] * len(ids))
    eff = dict(tenant_query(tenant, f"SELECT event_id, COUNT(*) FROM notification_job WHERE "
                                    f"event_id IN ({marks}) GROUP BY event_id", list(ids)))
    cl = dict(tenant_query(tenant, f"SELECT event_id, COUNT(*) FROM consumed_event WHERE "
                                   f"event_id IN ({marks}) GROUP BY event_id", list(ids)))
    return {e: (eff.get(e, 0), cl.get(e, 0)) for e in ids if (eff.get(e, 0), cl.get(e, 0)) != (1, 1)}


warm = [(str(uuid.uuid4()), A), (str(uuid.uuid4()), B)]
send_tenant_events(sc.exchange, warm)
ok(wait_until(lambda: tenant_count(A, "notification_job", [warm[0][0]]) == 1 and
              tenant_count(B, "notification_job", [warm[1][0]]) == 1, timeout=30),
   "both tenants' sessions warm")

# Sample the gauges all through the outage.
samples = collections.defaultdict(list)
stop = threading.Event()


def sampler():
    while not stop.is_set():
        for name in ("sidecar_tenant_waiting", "sidecar_tenant_returned_total"):
            v = metric(name)
            if v >= 0:
                samples[name].append(v)
        stop.wait(0.02)


th = threading.Thread(target=sampler, daemon=True)
th.start()

revoke(B)
eb = [str(uuid.uuid4()) for _ in range(N_B)]
send_tenant_events(sc.exchange, [(e, B) for e in eb])


def reasons(text):
    return sum(1 for l in sc.lines() if l.get("msg", "").startswith(f"tenant {B}: ") and
               text in l.get("msg", "") and "returned through" in l.get("msg", ""))


FULL = "the deliveries in hand fill half the prefetch"
HELD = "could not be used for db_outage_hold_ms"

# Tenant A, one event after another, until B's deliveries have gone round
# for both reasons several times (synchronised on B's log lines).
lat, ea = [], []
t_end = time.time() + 60
while time.time() < t_end and not (reasons(FULL) >= N_B and reasons(HELD) >= 2 * PARK_CAP):
    e = str(uuid.uuid4())
    ea.append(e)
    t0 = time.time()
    send_tenant_events(sc.exchange, [(e, A)])
    wait_until(lambda: tenant_count(A, "notification_job", [e]) == 1, timeout=30, step=0.02)
    lat.append(time.time() - t0)
diag(f"A's {len(lat)} events applied after at most {max(lat):.2f} s each "
     f"(mean {sum(lat) / len(lat):.2f} s) while B was down")
ok(reasons(FULL) >= N_B, f"B's deliveries beyond the {PARK_CAP} in hand given back at once, "
   f"again and again ({reasons(FULL)} returns: no room in hand)")
ok(reasons(HELD) >= 2 * PARK_CAP, f"B's deliveries in hand given back after db_outage_hold_ms "
   f"({reasons(HELD)} returns)")
ok(len(lat) >= 5 and max(lat) <= A_BOUND,
   f"tenant A kept flowing: each of its {len(lat)} events applied within {A_BOUND} s "
   f"(worst {max(lat):.2f} s)")
is_eq(tenant_count(B, "consumed_event", eb), 0, "none of B's claimed while it is down")
is_eq(queue_depth(sc.dlq), 0, "nothing dead-lettered while B is down")
w = samples["sidecar_tenant_waiting"]
ok(w and max(w) <= PARK_CAP, f"sidecar_tenant_waiting never above half the prefetch ({PARK_CAP}): "
   f"max {max(w) if w else None} over {len(w)} scrapes")
ok(PARK_CAP in w, f"and B's deliveries did fill it: {PARK_CAP} waiting in hand at some point")
r = samples["sidecar_tenant_returned_total"]
ok(r and r[-1] >= reasons(FULL) and r == sorted(r),
   f"sidecar_tenant_returned_total counted the returns ({r[-1] if r else None})")
ok(metric("sidecar_tenants_down") == 1, "sidecar_tenants_down 1")
delays = [int(re.search(r"returned through the (\d+) ms delay queue", l["msg"]).group(1))
          for l in sc.lines() if l.get("msg", "").startswith(f"tenant {B}: ") and "returned through" in l["msg"]]
ok(delays == sorted(delays) and set(delays) == set(DELAYS),
   f"with backoff: the delay queue of B's failures so far, {DELAYS} in turn, the last kept "
   f"({collections.Counter(delays)})")

grant(B)
ok(wait_until(lambda: tenant_count(B, "notification_job", eb) == N_B, timeout=90),
   f"B back: its {N_B} events applied")
stop.set()
th.join()
is_eq(applied_once(B, eb), {}, f"each of B's {N_B} events applied exactly once (effect and claim by id)")
is_eq(applied_once(A, ea), {}, f"each of A's {len(ea)} events applied exactly once")
att = collections.Counter(l.get("attempt") for l in sc.outcomes("applied") if l.get("event_id") in eb)
is_eq(dict(att), {1: N_B}, "B's events applied at attempt 1: the returns spent no attempt")
is_eq(sum(1 for l in sc.lines() if l.get("event_id") in eb and l.get("outcome") not in ("applied", None)),
      0, "no other outcome for B's events (no retry, no duplicate, no dead letter)")
is_eq(queue_depth(sc.dlq), 0, "nothing dead-lettered")
ok(wait_until(lambda: metric("sidecar_tenant_waiting") == 0 and metric("sidecar_tenants_down") == 0,
              timeout=10), "nothing waiting in hand, no tenant down")
is_eq(sc.stop(), 0, "clean stop")
for t in (A, B):
    drop_tenant_db(t)
done()
