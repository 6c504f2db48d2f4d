"""sidecar_tenant_waiting and sidecar_tenant_waiting_by_tenant count an
ordered consumer's deliveries waiting in hand for a tenant whose database
cannot be used, as they do without ordering: scraped from /metrics while
tenant B's database is refused (its grants revoked), B's 6 events in hand
(fewer than half the prefetch, db_outage_hold_ms not reached) and A's going
on; back to 0, B's series gone, once B's database is back and its events
applied in order. Before, both read 0 for an ordered consumer."""
from harness import *
from tenants_common import *

sfx = suffix()
A, B = "wa_" + sfx, "wb_" + sfx
name = "t-towt-" + sfx
make_seen_db(A)
make_seen_db(B)

sc = Sidecar(name=name, handler=TEST_HANDLER,
             consumer_extra={"workers": 1, "prefetch": 32, "batch_max": 8, "max_attempts": 3,
                             "retry_delays_ms": [300], "db_outage_hold_ms": 120000,
                             "ordering": {"key": "subject"}},
             extra={"tenants": {"key": "extension:tenant", "database_url": tenant_url(),
                                "max_connections": 4, "idle_close_ms": 60000,
                                "metrics_top": 5}})
ok(sc.start(), "an ordered consumer with tenants started")
ok(wait_until(lambda: sc.http_port() is not None, timeout=10), "its /metrics is listening")
port = sc.http_port()
total = rf'^sidecar_tenant_waiting\{{consumer="{name}"\}} (\d+)$'


def by_tenant(t):
    return (rf'^sidecar_tenant_waiting_by_tenant\{{consumer="{name}",tenant="{t}"\}} (\d+)$')


keys = ["w1-" + sfx, "w2-" + sfx]
revoke(B)
sent = send_ordered(sc.exchange, [(t, k, v, "ORDERED") for v in (1, 2, 3) for k in keys
                                  for t in (A, B)])
ok(wait_until(lambda: all(seen_versions(A, k) == [1, 2, 3] for k in keys), timeout=30),
   f"B's database refused: A's keys applied in order ({[seen_versions(A, k) for k in keys]})")
ok(wait_until(lambda: metric_sum(port, total, -1) == 6, timeout=30),
   f"sidecar_tenant_waiting counts B's 6 deliveries in hand (got {metric_sum(port, total, -1)})",
   detail=sc.get("/metrics")[1][-3000:])
ok(wait_until(lambda: metric_sum(port, by_tenant(B), -1) == 6, timeout=10),
   f"sidecar_tenant_waiting_by_tenant names B with 6 (got {metric_sum(port, by_tenant(B), -1)})")
is_eq(metric_sum(port, by_tenant(A), -1), -1, "and has no series for A, which waits for nothing")
ok(metric_sum(port, rf'^sidecar_tenants_down\{{consumer="{name}"\}} (\d+)$', -1) <= 1,
   "at most one tenant down")
ok(all(seen_versions(B, k) == [] for k in keys), "nothing of B's applied meanwhile")

grant(B)
grant_seen(B)
ok(wait_until(lambda: all(seen_versions(B, k) == [1, 2, 3] for k in keys), timeout=60),
   f"B's database back: its keys applied in order ({[seen_versions(B, k) for k in keys]})")
ok(wait_until(lambda: metric_sum(port, total, -1) == 0, timeout=10),
   f"sidecar_tenant_waiting back to 0 (got {metric_sum(port, total, -1)})")
is_eq(metric_sum(port, by_tenant(B), -1), -1, "B's series gone (none at 0)")
ids_b = [e for e, (t, k, v) in sent.items() if t == B]
is_eq(tenant_count(B, "consumed_event", ids_b), 6, "B's 6 events consumed once each")
is_eq(queue_depth(sc.dlq), 0, "nothing dead-lettered")
is_eq(sc.stop(), 0, "stops cleanly")
drop_tenant_db(A)
drop_tenant_db(B)
done()
