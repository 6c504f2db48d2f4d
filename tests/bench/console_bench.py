"""What `sidecar console` costs at size, beside a running relay.

  1. outbox_event filled with BENCH_CONSOLE_FILL (10,000,000) PUBLISHED rows
     of history (v7 ids, a day of created_at) and BENCH_CONSOLE_BACKLOG
     (1,000,000) PENDING rows after them;
  2. each statement a console sample runs, timed alone on that table (best
     and worst of 5), with its plan;
  3. a relay draining the backlog, A-B repeated BENCH_CONSOLE_ROUNDS (3) times: A alone, B with a console
     sampling every second (ten times its default rate) and a page that
     polls the overview and history every second and the PUBLISHING and
     FAILED lists every 5 s; published/s of each window from the relay's
     own /metrics;
  4. the cached endpoints' latency (200 GETs of /api/overview).
Servers: tests/servers' (SC_TEST_* env), build: BENCH_BUILD.
  BENCH_BUILD=build-test python3 tests/bench/console_bench.py"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_lib import AMQP, BUILD, SIDECAR, free_port, metric_sum, q, v7_id_sql  # noqa: E402

import pika  # noqa: E402

FILL = int(os.environ.get("BENCH_CONSOLE_FILL", "10000000"))
BACKLOG = int(os.environ.get("BENCH_CONSOLE_BACKLOG", "1000000"))
ROUNDS = int(os.environ.get("BENCH_CONSOLE_ROUNDS", "3"))
WINDOW_S = float(os.environ.get("BENCH_CONSOLE_WINDOW_S", "15"))
ADMIN = os.environ["SC_TEST_MYSQL_ADMIN_URL"]
RELAY_URL = os.environ["SC_TEST_MYSQL_RELAY_URL"]
EXCHANGE = "bench-console"
PAYLOAD = '{"orderId":12345,"status":"ACCEPTED","amount":19.99,"tenantId":"bench"}'


def fill(n, status, base_ms, chunk=200000):
    done = 0
    t0 = time.time()
    while done < n:
        k = min(chunk, n - done)
        q("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version, payload,"
          f" status, created_at) SELECT {v7_id_sql(base_ms + done)}, 'ORDER', seq + %s, 'ORDER_ACCEPTED', 1, %s, %s,"
          " FROM_UNIXTIME((%s + seq) / 1000.0) FROM seq_1_to_" + str(k),
          (done, PAYLOAD, status, base_ms + done))
        done += k
    return time.time() - t0


def timed(sql, args=None, n=5):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        q(sql, args)
        times.append((time.perf_counter() - t0) * 1000)
    return min(times), max(times)


def start(cmd, config, name):
    d = tempfile.mkdtemp(prefix=f"bench-{name}-")
    path = os.path.join(d, "c.json")
    with open(path, "w") as f:
        json.dump(config, f)
    log = open(os.path.join(d, "log"), "w")
    return subprocess.Popen([SIDECAR, cmd, "-c", path], stdout=log, stderr=subprocess.STDOUT), d


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return r.read()


print(f"# console cost: {FILL} PUBLISHED + {BACKLOG} PENDING rows, build {BUILD}", flush=True)
q("TRUNCATE TABLE outbox_event")
now_ms = int(time.time() * 1000)
took = fill(FILL, "PUBLISHED", now_ms - 86400000 - FILL)
took2 = fill(BACKLOG, "PENDING", now_ms - 3600000)
size = q("SELECT ROUND(data_length / 1048576), ROUND(index_length / 1048576) FROM information_schema.tables "
         "WHERE table_schema = 'app' AND table_name = 'outbox_event'")[0]
print(f"# filled in {took:.0f} s + {took2:.0f} s: data ~{size[0]} MB, secondary indexes ~{size[1]} MB, "
      f"buffer pool {int(q('SELECT @@innodb_buffer_pool_size')[0][0]) >> 20} MB", flush=True)
q("ANALYZE TABLE outbox_event")

# ---- 2. each statement of a sample ------------------------------------------
w = q("SELECT LEAST(COALESCE((SELECT MIN(created_at) FROM outbox_event WHERE status = 'PENDING'), "
      "'9999-12-31'), UTC_TIMESTAMP(6) - INTERVAL 5 SECOND)")[0][0]
statements = [
    ("count PENDING (capped at 100,000)", "SELECT COUNT(*) FROM (SELECT 1 FROM outbox_event FORCE INDEX "
     "(ix_outbox_event_claim) WHERE status = 'PENDING' LIMIT 100001) capped", None),
    ("estimate PENDING (EXPLAIN)", "EXPLAIN SELECT 1 FROM outbox_event FORCE INDEX (ix_outbox_event_claim) "
     "WHERE status = 'PENDING'", None),
    ("estimate PUBLISHED (EXPLAIN)", "EXPLAIN SELECT 1 FROM outbox_event FORCE INDEX (ix_outbox_event_claim) "
     "WHERE status = 'PUBLISHED'", None),
    ("count FAILED (capped)", "SELECT COUNT(*) FROM (SELECT 1 FROM outbox_event FORCE INDEX "
     "(ix_outbox_event_claim) WHERE status = 'FAILED' LIMIT 100001) capped", None),
    ("expired leases (capped)", "SELECT COUNT(*) FROM (SELECT 1 FROM outbox_event FORCE INDEX "
     "(ix_outbox_event_lease) WHERE status = 'PUBLISHING' AND lease_until < UTC_TIMESTAMP(6) LIMIT 100001) capped", None),
    ("oldest PENDING + watermark", "SELECT TIMESTAMPDIFF(MICROSECOND, (SELECT MIN(created_at) FROM outbox_event "
     "WHERE status = 'PENDING'), UTC_TIMESTAMP(6)), LEAST(COALESCE((SELECT MIN(created_at) FROM outbox_event "
     "WHERE status = 'PENDING'), '9999-12-31 00:00:00'), UTC_TIMESTAMP(6) - INTERVAL 5 SECOND)", None),
    ("PUBLISHED since the watermark (capped 1,000,000)", "SELECT COUNT(*) FROM (SELECT 1 FROM outbox_event FORCE "
     "INDEX (ix_outbox_event_claim) WHERE status = 'PUBLISHED' AND created_at >= %s LIMIT 1000001) capped", (w,)),
    ("for comparison: COUNT(*) GROUP BY status (what the console does not do)",
     "SELECT status, COUNT(*) FROM outbox_event GROUP BY status", None),
]
print("| statement | best ms | worst ms |\n| --- | ---: | ---: |", flush=True)
for label, sql, args in statements:
    n = 1 if label.startswith("for comparison") else 5
    lo, hi = timed(sql, args, n)
    print(f"| {label} | {lo:.1f} | {hi:.1f} |", flush=True)

# ---- 3. a relay beside the console ---------------------------------------------
c = pika.BlockingConnection(pika.URLParameters(AMQP))
ch = c.channel()
ch.exchange_declare(EXCHANGE, "topic", durable=True)
ch.queue_declare("bench-console-sink", durable=True, arguments={"x-max-length": 5000})
ch.queue_bind("bench-console-sink", EXCHANGE, "#")
c.close()
rport = free_port()
relay, _ = start("relay", {"amqp": {"url": AMQP}, "mysql": {"url": RELAY_URL}, "http": {"listen": f"127.0.0.1:{rport}"},
                           "relay": {"worker_id": "bench-relay", "exchange": EXCHANGE, "batch": 200}}, "relay")
cport = free_port()
consumers = [{"name": "bench-consumer", "handler": "x.so"}]
console_cfg = {"amqp": {"url": AMQP}, "mysql": {"url": ADMIN}, "consumers": consumers,
               "console": {"listen": f"127.0.0.1:{cport}", "sample_ms": 1000}}


def published():
    return metric_sum(rport, r'^sidecar_relay_published_total\{[^}]*\} (\d+)$')


def window():
    a, t0 = published(), time.time()
    time.sleep(WINDOW_S)
    return (published() - a) / (time.time() - t0)


stop_poll = threading.Event()


def page_poller():
    k = 0
    while not stop_poll.is_set():
        try:
            get(cport, "/api/overview")
            get(cport, "/api/history")
            if k % 5 == 0:
                get(cport, "/api/outbox?status=PUBLISHING&limit=50")
                get(cport, "/api/outbox?status=FAILED&limit=50")
        except OSError:
            pass
        k += 1
        stop_poll.wait(1.0)


time.sleep(5)  # the relay's first claims
rates = {"A": [], "B": []}
console = None
samples = []
for tag in ("A", "B") * ROUNDS:
    if tag == "B":
        console, _ = start("console", console_cfg, "console")
        time.sleep(3)
        stop_poll.clear()
        poller = threading.Thread(target=page_poller, daemon=True)
        poller.start()
    r = window()
    rates[tag].append(r)
    if tag == "B":
        try:
            for line in get(cport, "/metrics").decode().splitlines():
                if line.startswith('sidecar_console_sample_seconds{server="mysql"}'):
                    samples.append(float(line.split()[-1]))
        except OSError:
            pass
        stop_poll.set()
        console.terminate()
        console.wait()
    print(f"relay alone (A) / beside the console (B): {tag} {r:8.0f} ev/s", flush=True)
left = q("SELECT COUNT(*) FROM outbox_event WHERE status = 'PENDING'")[0][0]
a, b = statistics.median(rates["A"]), statistics.median(rates["B"])
print(f"relay beside a console sampling every 1 s and a page polling every 1 s / alone (medians) = {b / a:.2f} "
      f"({b:.0f} / {a:.0f} ev/s; {left} rows still PENDING; the console's last database sample took "
      f"{', '.join(f'{s * 1000:.0f} ms' for s in samples)})", flush=True)

# ---- 4. the cached endpoints -----------------------------------------------------
console, _ = start("console", console_cfg, "console")
time.sleep(3)
lat = []
for _ in range(200):
    t0 = time.perf_counter()
    get(cport, "/api/overview")
    lat.append((time.perf_counter() - t0) * 1000)
lat.sort()
print(f"/api/overview: median {lat[100]:.2f} ms, p99 {lat[198]:.2f} ms over 200 GETs (from the samplers' memory, "
      "no query)", flush=True)
console.terminate()
console.wait()
relay.terminate()
relay.wait()
q("TRUNCATE TABLE outbox_event")
