"""Tenants at size: 200 tenant databases on the test server. The same total
of events (SC_TENANTS_EVENTS, default 10,000), queued before the consumer
starts, consumed once all for one tenant and once spread round-robin over
200 tenants (prefetch SC_TENANTS_PREFETCH, default 16384, so that each
tenant's batch takes its share of what is in hand); throughput of each and
their ratio, transactions per run, the consumer's RSS with one tenant
session open and with 200 (per open session), and the exact effects.
The ratio is reported and checked against SC_TENANTS_MIN_RATIO (default
0.4: 0.64-0.94 measured on 2 shared cores with the acks of a round sent in
tag order, 0.07-0.09 with them sent tenant by tenant; docs/performance.md)."""
import json

from harness import *
from tenants_common import *

N = int(os.environ.get("SC_TENANTS_EVENTS", "10000"))
T = int(os.environ.get("SC_TENANTS_COUNT", "200"))
PREFETCH = int(os.environ.get("SC_TENANTS_PREFETCH", "16384"))
WORKERS = int(os.environ.get("SC_TENANTS_WORKERS", "1"))
MIN_RATIO = float(os.environ.get("SC_TENANTS_MIN_RATIO", "0.4"))
sfx = suffix()
tenants = [f"s{i:03d}_{sfx}" for i in range(T)]
t0 = time.time()
for t in tenants:
    make_tenant_db(t)
diag(f"{T} tenant databases made in {time.time() - t0:.1f} s")


def vmrss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def run(label, spread):
    sc = Sidecar(consumer_extra={"prefetch": PREFETCH, "batch_max": 64, "workers": WORKERS},
                 extra={"tenants": {"key": "extension:tenant", "database_url": tenant_url(),
                                    "max_connections": T + 10}})
    bound_queue(sc.exchange, queue=sc.queue)
    ids = [str(uuid.uuid4()) for _ in range(N)]
    owner = [tenants[i % spread] for i in range(N)]
    conn = amqp()
    ch = conn.channel()
    ch.confirm_delivery()
    for eid, t in zip(ids, owner):
        d = json.loads(event_body(eid))
        d["tenant"] = t
        publish(ch, sc.exchange, "ORDER_ACCEPTED", json.dumps(d), message_id=eid)
    conn.close()
    ok(wait_until(lambda: queue_depth(sc.queue) == N, timeout=60), f"{label}: {N} events queued")
    ok(sc.start(), f"{label}: consumer started")
    port = sc.http_port()
    settled = lambda: metric_sum(port, r'^sidecar_messages_total\{consumer="[^"]*",outcome="[^"]*"\} (\d+)$')
    start = time.time()
    done_ok = wait_until(lambda: settled() >= N, timeout=600, step=0.05)
    secs = time.time() - start
    ok(done_ok, f"{label}: every event settled in {secs:.1f} s ({N / secs:.0f} ev/s)")
    rss = vmrss_kib(sc.proc.pid)
    c = metric_sum(port, r'^sidecar_batch_size_count\{[^}]*\} (\d+)$')
    diag(f"{label}: {c} transactions, {N / max(c, 1):.1f} deliveries each")
    by = {}
    for eid, t in zip(ids, owner):
        by.setdefault(t, []).append(eid)
    applied = sum(tenant_count(t, "notification_job", e) for t, e in by.items())
    is_eq(applied, N, f"{label}: one effect per event, each in its tenant's database")
    is_eq(sc.stop(), 0, f"{label}: clean stop")
    return N / secs, rss


one, rss1 = run("1 tenant", 1)
many, rss_many = run(f"{T} tenants", T)
ratio = many / one
diag(f"throughput: 1 tenant {one:.0f} ev/s, {T} tenants {many:.0f} ev/s, ratio {ratio:.2f}")
per = (rss_many - rss1) / (T - 1)
diag(f"RSS: {rss1} KiB with 1 tenant session, {rss_many} KiB with {T}: {per:.0f} KiB per open session")
ok(ratio >= MIN_RATIO, f"{T} tenants / 1 tenant = {ratio:.2f} (at least {MIN_RATIO})")
ok(per < 1024, f"RSS per open tenant session {per:.0f} KiB, under 1 MiB")
for t in tenants:
    drop_tenant_db(t)
done()
