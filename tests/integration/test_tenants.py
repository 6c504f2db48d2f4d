"""A database per tenant, one consumer process: each message's tenant (the
CloudEvents extension `tenant`) picks the database its claim and effect
commit in; a message without a tenant, or with a name tenants.names
refuses, is dead-lettered with the reason; a tenant whose database is
missing, or out of reach for the consumer's user, has its messages wait in
hand while the other tenant's keep flowing, and they are applied, once each,
when it comes back. Exact effects per tenant by event id."""

from harness import *
from tenants_common import *

sfx = suffix()
A, B, C = "a_" + sfx, "b_" + sfx, "c_" + sfx
make_tenant_db(A)
make_tenant_db(B)
drop_tenant_db(C)  # missing until the test makes it


sc = Sidecar(consumer_extra={"prefetch": 64, "batch_max": 16, "db_outage_hold_ms": 120000},
             extra={"tenants": {"key": "extension:tenant", "database_url": tenant_url(),
                                "max_connections": 4, "idle_close_ms": 60000}})
ok(sc.start(), "consumer with tenants started")

# Routing: each tenant's events in its own database, nothing in the other.
ea = [str(uuid.uuid4()) for _ in range(30)]
eb = [str(uuid.uuid4()) for _ in range(30)]
send_tenant_events(sc.exchange, [x for pair in zip([(e, A) for e in ea], [(e, B) for e in eb]) for x in pair])
ok(wait_until(lambda: tenant_count(A, "notification_job", ea) == 30 and
              tenant_count(B, "notification_job", eb) == 30, timeout=60),
   "every event applied in its tenant's database")
is_eq(tenant_count(A, "consumed_event", ea), 30, "tenant A: one claim per event")
is_eq(tenant_count(B, "consumed_event", eb), 30, "tenant B: one claim per event")
is_eq(tenant_count(A, "consumed_event", eb) + tenant_count(B, "consumed_event", ea), 0,
      "no claim in the other tenant's database")
is_eq(tenant_count(A, "notification_job", eb) + tenant_count(B, "notification_job", ea), 0,
      "no effect in the other tenant's database")
is_eq(count_in("consumed_event", "event_id", ea + eb), 0, "nothing in mysql.url's database")

# Dedup per tenant database: the same events again are duplicates.
send_tenant_events(sc.exchange, [(e, A) for e in ea[:5]] + [(e, B) for e in eb[:5]])
ok(wait_until(lambda: len(sc.outcomes("duplicate")) >= 10, timeout=30), "repeats are duplicates")
is_eq(tenant_count(A, "notification_job", ea) + tenant_count(B, "notification_job", eb), 60,
      "no second effect")

# No tenant, and a refused name: dead-lettered with the reason.
none_id, bad_id = str(uuid.uuid4()), str(uuid.uuid4())
send_tenant_events(sc.exchange, [(none_id, None), (bad_id, "Not-Allowed")])
ok(wait_until(lambda: queue_depth(sc.dlq) == 2, timeout=30), "both dead-lettered")
dead = {p.message_id: (p.headers or {}).get("x-sidecar-reason", "") for p, _ in drain(sc.dlq)}
ok("no tenant" in dead.get(none_id, ""), f"no tenant: reason says so ({dead.get(none_id)})")
ok("tenant refused" in dead.get(bad_id, "") and "tenants.names" in dead.get(bad_id, ""),
   f"refused name: reason says so ({dead.get(bad_id)})")

# A tenant's dead letter says its tenant; replayed, it applies in that
# tenant's database (the tenant travels in the message itself).
rej = str(uuid.uuid4())
tenant_query(A, "REVOKE INSERT ON notification_job FROM 'sidecar_consumer'@'%'")
send_tenant_events(sc.exchange, [(rej, A)])
ok(wait_until(lambda: queue_depth(sc.dlq) == 1, timeout=30), "an event A's handler refused is dead-lettered")
grant(A)
conn = amqp()
ch = conn.channel()
m, props, _ = ch.basic_get(sc.dlq, auto_ack=False)
hdr = (props.headers or {}) if m else {}
ch.basic_nack(m.delivery_tag, requeue=True) if m else None
conn.close()
is_eq(hdr.get("x-sidecar-tenant"), A, "its dead letter carries x-sidecar-tenant")
admin_cfg = dict(sc.config, mysql={"url": os.environ["SC_TEST_MYSQL_ADMIN_URL"]})
rc, out = run_sidecar_cmd(["dlq", "replay", sc.name, "--id", rej], admin_cfg)
ok(rc == 0 and "replayed 1 of 1" in out, f"dlq replay --id ({out.strip()[-200:]})")
ok(wait_until(lambda: tenant_count(A, "notification_job", [rej]) == 1, timeout=30),
   "the replayed event applied in tenant A's database")
is_eq(tenant_count(B, "consumed_event", [rej]), 0, "and not in B's")

# check: each listed tenant's database reached and its schema checked.
cfg = dict(sc.config)
cfg["tenants"] = dict(cfg["tenants"], list=[A, B])
rc, out = run_sidecar_cmd(["check"], cfg)
ok(rc == 0 and f"tenant {A}: connected" in out and f"tenant {B}: connected" in out,
   "check: both listed tenants reached, schema there", detail=out)
rc, out = run_sidecar_cmd(["check", "--tenant", C], cfg)
ok(rc == 1 and f"tenant {C}" in out, f"check --tenant {C}: its database is missing (exit {rc})",
   detail=out)
ok("consumer-secret" not in out, "check prints no password")
rc, out = run_sidecar_cmd(["check", "--tenant", "Bad!"], cfg)
ok(rc == 2 and "tenant" in out, f"check --tenant with a refused name: bad usage (exit {rc})", detail=out)

# A missing database: its events wait while A's flow; made, they apply.
ec = [str(uuid.uuid4()) for _ in range(10)]
send_tenant_events(sc.exchange, [(e, C) for e in ec])
ok(wait_until(lambda: any(C in l.get("msg", "") and "cannot be used" in l.get("msg", "")
                          for l in sc.lines()), timeout=30), "tenant C said to be unusable")
ea2 = [str(uuid.uuid4()) for _ in range(20)]
send_tenant_events(sc.exchange, [(e, A) for e in ea2])
ok(wait_until(lambda: tenant_count(A, "notification_job", ea2) == 20, timeout=30),
   "tenant A's later events applied while C's database is missing")
is_eq(queue_depth(sc.dlq), 0, "C's events not dead-lettered")
make_tenant_db(C)
ok(wait_until(lambda: tenant_count(C, "notification_job", ec) == 10, timeout=60),
   "once C's database exists its waiting events apply")
is_eq(tenant_count(C, "consumed_event", ec), 10, "tenant C: one claim per event")

# B out of reach (its grants taken, its sessions killed) in the middle of a
# stream: B waits, A goes on; B back, every B event applied once.
revoke(B)
eb2 = [str(uuid.uuid4()) for _ in range(20)]
ea3 = [str(uuid.uuid4()) for _ in range(20)]
send_tenant_events(sc.exchange, [x for pair in zip([(e, B) for e in eb2], [(e, A) for e in ea3]) for x in pair])
ok(wait_until(lambda: tenant_count(A, "notification_job", ea3) == 20, timeout=60),
   "tenant A's events applied while B is out of reach")
is_eq(tenant_count(B, "notification_job", eb2), 0, "none of B's applied meanwhile")
is_eq(queue_depth(sc.dlq), 0, "and none dead-lettered")
gauge = lambda name: metric_sum(sc.http_port(), r'^%s\{consumer="[^"]*"\} (\d+)$' % name, default=-1)
ok(wait_until(lambda: gauge("sidecar_tenants_down") >= 1 and gauge("sidecar_tenant_waiting") >= 1,
              timeout=30),
   f"metrics: a tenant down, deliveries waiting ({gauge('sidecar_tenants_down')}, "
   f"{gauge('sidecar_tenant_waiting')})")
grant(B)
ok(wait_until(lambda: tenant_count(B, "notification_job", eb2) == 20, timeout=90),
   "B back: its waiting events applied")
is_eq(tenant_count(B, "consumed_event", eb2), 20, "tenant B: one claim per event")
ok(any("usable again" in l.get("msg", "") for l in sc.lines()), "the consumer said B is back")
ok(wait_until(lambda: gauge("sidecar_tenants_down") == 0 and gauge("sidecar_tenant_waiting") == 0,
              timeout=30), "metrics: no tenant down, nothing waiting")
ok(gauge("sidecar_tenant_sessions") >= 2, f"metrics: tenant sessions open ({gauge('sidecar_tenant_sessions')})")
ok(sc.get("/readyz")[0] == 200, "ready throughout (one tenant's outage is not the process's)")
is_eq(queue_depth(sc.dlq), 0, "nothing dead-lettered")
is_eq(sc.stop(), 0, "clean stop")
for t in (A, B, C):
    drop_tenant_db(t)
done()
