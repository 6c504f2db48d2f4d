"""The relay's throughput over busy tenants against one, on the same total
of events: SC_RELAY_SCALE_EVENTS (default 10,000) PENDING rows in one
tenant's outbox, then spread evenly over SC_RELAY_SCALE_TENANTS (default
20) tenants, then in one tenant again (A-B-A: the ratio is taken against
the mean of the two one-tenant runs, so drift on the shared machine shows
as their difference). Each run: the relay starts with every row in place
and is timed from its first publish to its last, read from
sidecar_relay_published_total; every row PUBLISHED once, each message with
its tenant. The ratio is reported and checked against
SC_RELAY_SCALE_MIN_RATIO (default 0.4; docs/performance.md has the
figures)."""
import collections

import tenants_common
from harness import *
from tenants_common import *

tenants_common.PREFIX = "trs_"
N = int(os.environ.get("SC_RELAY_SCALE_EVENTS", "10000"))
T = int(os.environ.get("SC_RELAY_SCALE_TENANTS", "20"))
MIN_RATIO = float(os.environ.get("SC_RELAY_SCALE_MIN_RATIO", "0.4"))
BATCH = 100
sfx = suffix()
tenants = [f"r{i:02d}_{sfx}" for i in range(T)]
for t in tenants:
    make_tenant_db(t)
    grant_relay(t)
ex = "tenant-relay-scale-" + sfx
q = bound_queue(ex)


def run(label, spread):
    per = N // spread
    ids = {t: insert_tenant_outbox(t, per, 1000) for t in tenants[:spread]}
    r = Relay(ex, batch=BATCH, poll_ms=100, lease_ms=30000)
    r.config["tenants"] = {"key": "extension:tenant", "database_url": relay_tenant_url(),
                           "list": tenants[:spread], "max_connections": T + 5}
    with open(r.config_path, "w") as f:
        json.dump(r.config, f)
    r.start()
    pub = lambda: metric_sum(r.http_port(), r"^sidecar_relay_published_total\{[^}]*\} (\d+)$") if r.http_port() else 0
    ok(wait_until(lambda: pub() > 0, timeout=60, step=0.01), f"{label}: publishing")
    t0 = time.time()
    done_ok = wait_until(lambda: pub() >= per * spread, timeout=600, step=0.05)
    secs = time.time() - t0
    ok(done_ok, f"{label}: {per * spread} rows published in {secs:.2f} s ({per * spread / secs:.0f} ev/s)")
    is_eq(r.stop(), 0, f"{label}: clean exit")
    evs = [json.loads(b) for _, _, b in drain_with_keys(q, limit=N + 10)]
    c = collections.Counter(e["id"] for e in evs)
    want = {i: t for t, l in ids.items() for i in l}
    is_eq((len(c), sum(c.values()), sum(1 for e in evs if want.get(e["id"]) != e.get("tenant"))),
          (per * spread, per * spread, 0), f"{label}: each row published once, with its tenant")
    for t in tenants[:spread]:
        tenant_query(t, "DELETE FROM outbox_event")
    return per * spread / secs


a1 = run("1 tenant", 1)
b = run(f"{T} tenants", T)
a2 = run("1 tenant again", 1)
ratio = b / ((a1 + a2) / 2)
diag(f"relay throughput: 1 tenant {a1:.0f} ev/s, {T} tenants {b:.0f} ev/s, 1 tenant again {a2:.0f} ev/s; "
     f"ratio {ratio:.2f}")
ok(ratio >= MIN_RATIO, f"{T} tenants / 1 tenant = {ratio:.2f} (at least {MIN_RATIO})")
for t in tenants:
    drop_tenant_db(t)
done()
