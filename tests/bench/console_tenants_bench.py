"""What `sidecar console` costs with many tenants (tenants.list).

  1. BENCH_TENANTS (200) tenant databases, each outbox_event and
     consumed_event as sql/schema makes them (CREATE TABLE ... LIKE a
     template), tenant i holding i PENDING rows and i % 7 FAILED;
  2. a console sampling them every second (ten times its default rate):
     the sweep's length (sidecar_console_sample_seconds{server="tenants"})
     over BENCH_SWEEPS (20) sweeps, the sessions the console holds on the
     server, the server's statements per sweep (Questions);
  3. /api/overview (the table of the first 50 and the totals) and
     /api/overview?tenant=NAME latency over 200 GETs each.
Servers: tests/servers' (SC_TEST_* env), build: BENCH_BUILD.
  BENCH_BUILD=build-test python3 tests/bench/console_tenants_bench.py"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_lib import SIDECAR, q  # noqa: E402

N = int(os.environ.get("BENCH_TENANTS", "200"))
SWEEPS = int(os.environ.get("BENCH_SWEEPS", "20"))
ADMIN = os.environ["SC_TEST_MYSQL_ADMIN_URL"]
PREFIX = "tb_"
names = [f"t{i:03d}" for i in range(N)]


def setup():
    for i, t in enumerate(names):
        db = PREFIX + t
        q(f"DROP DATABASE IF EXISTS `{db}`")
        q(f"CREATE DATABASE `{db}`")
        q(f"CREATE TABLE `{db}`.outbox_event LIKE app.outbox_event")
        q(f"CREATE TABLE `{db}`.consumed_event LIKE app.consumed_event")
        q(f"GRANT SELECT ON `{db}`.* TO 'sidecar_admin'@'%'")
        rows = [f"(UUID(), 'ORDER', '{k}', 'ORDER_ACCEPTED', 1, '{{}}', "
                f"'{'FAILED' if k < i % 7 else 'PENDING'}', UTC_TIMESTAMP(6))" for k in range(i + i % 7)]
        if rows:
            q(f"INSERT INTO `{db}`.outbox_event (event_id, aggregate_type, aggregate_id, event_type, "
              "event_version, payload, status, created_at) VALUES " + ",".join(rows))


def teardown():
    for t in names:
        q(f"DROP DATABASE IF EXISTS `{PREFIX + t}`")


def sweep_s(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        m = re.search(r'^sidecar_console_sample_seconds\{server="tenants"\} ([0-9.]+)$', r.read().decode(), re.M)
    return float(m.group(1)) if m else -1


def get(port, path):
    t0 = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        body = r.read()
    return (time.perf_counter() - t0) * 1000, json.loads(body)


t0 = time.time()
setup()
print(f"{N} tenant databases made in {time.time() - t0:.1f} s")
d = tempfile.mkdtemp(prefix="sc-bench-console-tenants-")
cfg = os.path.join(d, "console.json")
with open(cfg, "w") as f:
    json.dump({"amqp": {"url": os.environ["SC_TEST_AMQP_URL"]}, "mysql": {"url": ADMIN}, "consumers": [],
               "console": {"listen": "127.0.0.1:0", "sample_ms": 1000},
               "tenants": {"key": "extension:tenant", "list": names,
                           "database_url": re.sub(r"/app$", "/" + PREFIX + "{tenant}", ADMIN)}}, f)
log = open(os.path.join(d, "console.log"), "w+")
con = subprocess.Popen([SIDECAR, "console", "-c", cfg], stdout=log, stderr=subprocess.STDOUT)
try:
    port = None
    for _ in range(200):
        m = re.search(r"console: listening on 127\.0\.0\.1:(\d+)", open(log.name).read())
        if m:
            port = int(m.group(1))
            break
        time.sleep(0.1)
    # the first full sweep
    while True:
        _, ov = get(port, "/api/overview")
        if ov["tenants"]["total"]["unknown"] == 0:
            break
        time.sleep(0.2)
    want_pending = sum(i for i in range(N))
    got = ov["tenants"]["total"]["counts"]["PENDING"]["n"]
    print(f"totals: PENDING {got} (inserted {want_pending}), FAILED {ov['tenants']['total']['counts']['FAILED']['n']},"
          f" rows shown {len(ov['tenants']['rows'])}, more {ov['tenants']['more']}, first {ov['tenants']['rows'][0]['tenant']}")
    sweeps, questions = [], []
    q0 = int(q("SHOW GLOBAL STATUS LIKE 'Questions'")[0][1])
    t_start = time.time()
    for _ in range(SWEEPS):
        time.sleep(1.0)
        sweeps.append(sweep_s(port))
    q1 = int(q("SHOW GLOBAL STATUS LIKE 'Questions'")[0][1])
    elapsed = time.time() - t_start
    sessions = q("SELECT COUNT(*) FROM information_schema.processlist WHERE user = 'sidecar_admin'")[0][0]
    sweeps = [s for s in sweeps if s >= 0]
    print(f"sweep of {N} tenants: median {statistics.median(sweeps) * 1000:.0f} ms, max {max(sweeps) * 1000:.0f} ms")
    print(f"server statements: {(q1 - q0) / elapsed:.0f}/s (every client; the console's tenants sampler: {N}/s "
          f"at sample_ms 1000), sessions of the admin user: {sessions}")
    for path in ("/api/overview", f"/api/overview?tenant={names[-1]}"):
        lat = sorted(get(port, path)[0] for _ in range(200))
        print(f"{path}: median {statistics.median(lat):.2f} ms, p99 {lat[int(len(lat) * 0.99) - 1]:.2f} ms")
finally:
    con.terminate()
    con.wait(20)
    teardown()
