"""tenants.max_connections: the consumer never holds more tenant sessions
than the cap, closing the least recently used one first, and every event
is still applied once.

- LRU, one worker, max_connections 2, one event at a time: A, B open two
  sessions; C closes A's (the least recently used), not B's; B used again,
  then D closes C's, not B's (least recently used, not first opened). Each
  step read from the server's processlist (the consumer's user, by tenant
  database) and from sidecar_tenant_sessions.
- Under load, two workers, max_connections 4 (2 each), 8 tenants' events
  interleaved, 100 each: the processlist (a session counted when two
  samples 20 ms apart show it: a closed one may linger there a moment)
  and sidecar_tenant_sessions, sampled all the while, never show more
  than 4; every event applied once
  (effect and claim by event id), nothing dead-lettered."""
import collections
import threading

from harness import *
from tenants_common import *

sfx = suffix()


def session_ids(tenants):
    """[(tenant, id)] of the consumer's user's sessions on the tenants'
    databases (sessions that are quitting not counted)."""
    dbs = {PREFIX + t: t for t in tenants}
    marks = ",".join(["%s"] * len(dbs))
    rows = query("SELECT db, id FROM information_schema.processlist WHERE user = "
                 f"'sidecar_consumer' AND command NOT IN ('Quit', 'Killed') AND db IN ({marks})",
                 list(dbs))
    return [(dbs[db], i) for db, i in rows]


def open_sessions(tenants):
    """{tenant: sessions open}"""
    return dict(collections.Counter(t for t, _ in session_ids(tenants)))


def consumer(workers, cap):
    sc = Sidecar(consumer_extra={"workers": workers, "prefetch": 32, "batch_max": 8},
                 extra={"tenants": {"key": "extension:tenant", "database_url": tenant_url(),
                                    "max_connections": cap, "idle_close_ms": 60000}})
    ok(sc.start(), f"consumer with {workers} worker(s) and max_connections {cap} started")
    ok(wait_until(lambda: sc.http_port() is not None, timeout=10), "its /metrics is listening")
    return sc


def sessions_metric(sc):
    return metric_sum(sc.http_port(), rf'^sidecar_tenant_sessions\{{consumer="{sc.name}"\}} (\d+)$',
                      default=-1)


def applied_once(tenant, ids):
    """The ids of tenant not applied exactly once (effect and claim)."""
    marks = ",".join(["%s"] * len(ids))
    eff = dict(tenant_query(tenant, f"SELECT event_id, COUNT(*) FROM notification_job WHERE "
                                    f"event_id IN ({marks}) GROUP BY event_id", list(ids)))
    cl = dict(tenant_query(tenant, f"SELECT event_id, COUNT(*) FROM consumed_event WHERE "
                                   f"event_id IN ({marks}) GROUP BY event_id", list(ids)))
    return [e for e in ids if (eff.get(e, 0), cl.get(e, 0)) != (1, 1)]


# --- least recently used first -------------------------------------------
T = {x: f"l{x}_{sfx}" for x in "abcd"}
for t in T.values():
    make_tenant_db(t)
sc = consumer(1, 2)
ids = collections.defaultdict(list)


def one(x):
    """One event of tenant x, applied."""
    e = str(uuid.uuid4())
    ids[x].append(e)
    send_tenant_events(sc.exchange, [(e, T[x])])
    return wait_until(lambda: tenant_count(T[x], "notification_job", [e]) == 1, timeout=30)


def session_set(want):
    """Waits until exactly the tenants want have a session open (one each)
    and the gauge says as many; returns what the server shows."""
    want = {T[x]: 1 for x in want}
    wait_until(lambda: open_sessions(T.values()) == want and sessions_metric(sc) == len(want),
               timeout=10, step=0.05)
    return open_sessions(T.values())


def named(got):
    back = {v: k for k, v in T.items()}
    return {back[t]: n for t, n in sorted(got.items())}


for step, (x, want) in enumerate([("a", "a"), ("b", "ab"), ("c", "bc"), ("b", "bc"), ("d", "bd")]):
    ok(one(x), f"step {step + 1}: tenant {x}'s event applied")
    got = session_set(want)
    is_eq(named(got), {w: 1 for w in want}, f"step {step + 1}: after {x}, sessions open on "
          f"{', '.join(want)} only (processlist)")
is_eq(sessions_metric(sc), 2, "sidecar_tenant_sessions 2, the cap")
for x in "abcd":
    is_eq(applied_once(T[x], ids[x]), [], f"tenant {x}'s events applied once each")
is_eq(sc.stop(), 0, "clean stop")
ok(wait_until(lambda: open_sessions(T.values()) == {}, timeout=10), "stopped: no session left")
for t in T.values():
    drop_tenant_db(t)

# --- the cap under load ---------------------------------------------------
CAP, N_T, N_E = 4, 8, 100
T = {x: f"m{x}_{sfx}" for x in range(N_T)}
for t in T.values():
    make_tenant_db(t)
sc = consumer(2, CAP)
seen = {"processlist": [], "raw": [], "metric": [], "ids": set()}
stop = threading.Event()


def sampler():
    # A session counts as open when two samples in a row show it: one the
    # consumer has closed (COM_QUIT sent) can linger in the processlist
    # until the server's thread runs, while its successor is already there.
    last = set()
    while not stop.is_set():
        now = {i for _, i in session_ids(T.values())}
        seen["raw"].append(len(now))
        seen["processlist"].append(len(now & last))
        seen["ids"].update(now)
        last = now
        m = sessions_metric(sc)
        if m >= 0:
            seen["metric"].append(m)
        stop.wait(0.02)


th = threading.Thread(target=sampler, daemon=True)
th.start()
ev = {x: [str(uuid.uuid4()) for _ in range(N_E)] for x in T}
send_tenant_events(sc.exchange, [(ev[x][i], T[x]) for i in range(N_E) for x in T])
ok(wait_until(lambda: all(tenant_count(T[x], "notification_job", ev[x]) == N_E for x in T), timeout=120),
   f"{N_T} tenants' {N_T * N_E} events applied")
stop.set()
th.join()
pl, me = seen["processlist"], seen["metric"]
diag(f"sessions seen: processlist max {max(pl)} over {len(pl)} samples (in one sample: "
     f"{max(seen['raw'])}), "
     f"sidecar_tenant_sessions max {max(me) if me else None} over {len(me)}")
ok(max(pl) <= CAP, f"the processlist never showed more than max_connections {CAP} open "
   f"across two samples (max {max(pl)})")
ok(me and max(me) <= CAP, f"sidecar_tenant_sessions never above {CAP} (max {max(me) if me else None})")
ok(max(seen["raw"]) >= 2, f"both workers held sessions at once (max {max(seen['raw'])})")
ok(len(seen["ids"]) > CAP, f"sessions were closed and opened as tenants took turns "
   f"({len(seen['ids'])} seen in all)")
switches = sum(1 for l in sc.lines() if "tenant" in l.get("msg", "") and "cannot be used" in l.get("msg", ""))
is_eq(switches, 0, "no tenant ever counted down (closing the least recently used is no outage)")
is_eq([x for x in T if applied_once(T[x], ev[x])], [], "every event applied exactly once, per tenant")
is_eq(queue_depth(sc.dlq), 0, "nothing dead-lettered")
is_eq(sc.stop(), 0, "clean stop")
for t in T.values():
    drop_tenant_db(t)
done()
