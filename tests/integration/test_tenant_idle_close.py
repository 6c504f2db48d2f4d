"""tenants.idle_close_ms: a tenant session unused that long is closed, by
the consumer and by the relay, read from the server's processlist (the
role's user, by tenant database).

- consumer, idle_close_ms 2000: tenant A's session, unused once its event
  is applied, is gone between IDLE - 0.3 s and IDLE + 2 s after (the
  sweep runs once a second), while B's, used again and again meanwhile,
  stays open; sidecar_tenant_sessions follows; A's next event opens a new
  session and applies once.
- relay, idle_close_ms 1000 and poll_ms 5000 (each idle tenant claimed
  from once per 5 s): after each claim the tenant's session is gone within
  IDLE + 2 s, long before the next claim, and opened again for it; a row
  inserted meanwhile is published once."""
import json

from harness import *
from tenants_common import *

SLACK_EARLY, SLACK_LATE = 0.3, 2.0

sfx = suffix()
A, B, R = "ia_" + sfx, "ib_" + sfx, "ir_" + sfx
for t in (A, B, R):
    make_tenant_db(t)


def sessions(user, tenant):
    """The ids of user's sessions on tenant's database (not quitting)."""
    return [r[0] for r in query("SELECT id FROM information_schema.processlist WHERE user = %s AND "
                                "db = %s AND command NOT IN ('Quit', 'Killed')",
                                (user, PREFIX + tenant))]


# --- the consumer ---------------------------------------------------------
IDLE = 2.0
sc = Sidecar(consumer_extra={"workers": 1, "prefetch": 16, "batch_max": 8},
             extra={"tenants": {"key": "extension:tenant", "database_url": tenant_url(),
                                "max_connections": 10, "idle_close_ms": int(IDLE * 1000)}})
ok(sc.start(), f"consumer with idle_close_ms {int(IDLE * 1000)} started")
ok(wait_until(lambda: sc.http_port() is not None, timeout=10), "its /metrics is listening")
gauge = lambda: metric_sum(sc.http_port(), rf'^sidecar_tenant_sessions\{{consumer="{sc.name}"\}} (\d+)$',
                           default=-1)
applied = []


def apply_one(tenant):
    e = str(uuid.uuid4())
    applied.append((tenant, e))
    send_tenant_events(sc.exchange, [(e, tenant)])
    return wait_until(lambda: tenant_count(tenant, "notification_job", [e]) == 1, timeout=30, step=0.02)


ok(apply_one(B), "tenant B's first event applied")
ok(apply_one(A), "tenant A's first event applied")
t_used = time.time()
first_a = sessions("sidecar_consumer", A)
is_eq(len(first_a), 1, "A's session open once its event is applied")
ok(wait_until(lambda: gauge() == 2, timeout=5), f"sidecar_tenant_sessions 2 ({gauge()})")
# B's events one after another until A's session is gone: B is never idle.
b_open = []
while sessions("sidecar_consumer", A) and time.time() - t_used < IDLE + 10:
    apply_one(B)
    b_open.append(len(sessions("sidecar_consumer", B)))
t_closed = time.time()
idle_for = t_closed - t_used
ok(not sessions("sidecar_consumer", A), "A's session closed once unused")
ok(IDLE - SLACK_EARLY <= idle_for <= IDLE + SLACK_LATE,
   f"after {idle_for:.2f} s unused (idle_close_ms {IDLE} s, sweep once a second)")
ok(b_open and min(b_open) == 1, f"B's session, in use all the while, stayed open "
   f"({len(b_open)} events of B meanwhile, one session each time)")
ok(wait_until(lambda: gauge() == 1, timeout=5), f"sidecar_tenant_sessions 1 ({gauge()})")
ok(apply_one(A), "A's next event applied")
again = sessions("sidecar_consumer", A)
ok(len(again) == 1 and again != first_a, f"on a new session ({first_a} then {again})")
# Both idle now: both closed.
ok(wait_until(lambda: not sessions("sidecar_consumer", A) and not sessions("sidecar_consumer", B),
              timeout=IDLE + 5), "both idle: both sessions closed")
ok(wait_until(lambda: gauge() == 0, timeout=5), f"sidecar_tenant_sessions 0 ({gauge()})")
by_tenant = {t: [e for tt, e in applied if tt == t] for t in (A, B)}
for t in (A, B):
    is_eq(tenant_count(t, "consumed_event", by_tenant[t]), len(by_tenant[t]),
          f"tenant {t}: each event claimed once")
    is_eq(tenant_count(t, "notification_job", by_tenant[t]), len(by_tenant[t]),
          f"tenant {t}: each event's effect once")
is_eq(sc.stop(), 0, "clean stop")

# --- the relay --------------------------------------------------------------
IDLE, POLL = 1.0, 5.0
grant_relay(R)
ex = "tenant-idle-" + sfx
q = bound_queue(ex)
r = Relay(ex, batch=50, poll_ms=int(POLL * 1000), lease_ms=6000)
r.config["tenants"] = {"key": "extension:tenant", "database_url": relay_tenant_url(), "list": [R],
                       "max_connections": 10, "idle_close_ms": int(IDLE * 1000)}
with open(r.config_path, "w") as f:
    json.dump(r.config, f)
r.start()
ok(wait_until(lambda: sessions("sidecar_relay", R), timeout=15, step=0.02),
   "the relay's session on the tenant's database open (its first claim)")
gaps = []
for k in range(2):
    t0 = time.time()
    gone = wait_until(lambda: not sessions("sidecar_relay", R), timeout=IDLE + SLACK_LATE, step=0.02)
    gaps.append(time.time() - t0 if gone else None)
    ok(gone, f"claim {k + 1}: the relay's idle session closed within {IDLE + SLACK_LATE} s "
       f"(idle_close_ms {int(IDLE * 1000)}, poll_ms {int(POLL * 1000)})",
       detail=f"sessions still open: {sessions('sidecar_relay', R)}")
    if not gone:
        break
    ok(wait_until(lambda: sessions("sidecar_relay", R), timeout=POLL + 2, step=0.02),
       f"claim {k + 2}: opened again for the next claim")
diag("the relay's session closed " + ", ".join(f"{g:.2f}" for g in gaps if g is not None) +
     " s after it was first seen open")
ids = insert_tenant_outbox(R, 3)
ok(wait_until(lambda: tenant_query(R, "SELECT COUNT(*) FROM outbox_event WHERE status = 'PUBLISHED' "
                                      "AND event_id IN (%s, %s, %s)", ids)[0][0] == 3, timeout=POLL + 5),
   "rows inserted meanwhile published")
is_eq(r.stop(), 0, "relay: clean exit")
evs = [json.loads(b)["id"] for _, _, b in drain_with_keys(q)]
is_eq(sorted(evs), sorted(ids), "each published once")
for t in (A, B, R):
    drop_tenant_db(t)
done()
