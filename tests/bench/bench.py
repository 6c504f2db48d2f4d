#!/usr/bin/python3
"""Throughput and latency of the sidecar against baselines measured in the
same run (tests/bench/run sets the environment). Prints events/s for each
scenario, the ratios the targets are stated in, latency at 100 events/s,
peak RSS, and the CPU each process burned per 1000 events (where the time
goes on this machine)."""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import pika

from bench_lib import (AMQP, BUILD, HANDLER, MYSQL, SERVER_PIDS, SIDECAR, cpu, delete_queue, free_port, handled, q,
                       status_kib)

N = int(os.environ.get("BENCH_N", "100000"))
MAX_S = float(os.environ.get("BENCH_MAX_S", "40"))
HERE = os.path.dirname(os.path.abspath(__file__))


def consumed(name):
    """Rows claimed so far (the per-message baseline has no /metrics): an
    index range count, so measure() polls it only every 0.5 s."""
    return q("SELECT COUNT(*) FROM consumed_event WHERE consumer_name = %s", (name,))[0][0]


def preload(queue, n=N):
    out = subprocess.run([f"{BUILD}/tests/bench/preload", AMQP, queue, str(n)], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def measure(name, start_proc, counter, extra_pids=(), poll_s=0.05):
    """Runs until N are processed or MAX_S; returns (events/s, processed, cpu dict, proc)."""
    before = {k: cpu(v) for k, v in SERVER_PIDS.items()}
    t0 = time.time()
    proc = start_proc()
    done = 0
    while time.time() - t0 < MAX_S:
        done = counter()
        if done >= N:
            break
        time.sleep(poll_s)
    dt = time.time() - t0
    done = counter()
    usage = {k: cpu(v) - before[k] for k, v in SERVER_PIDS.items()}
    usage["client"] = cpu([proc.pid]) if proc and proc.poll() is None else None
    return done / dt, done, usage, proc, dt


def sidecar_config(name, batch, workers, prefetch, level="warn", port=None, handler=None):
    path = os.path.join(tempfile.mkdtemp(), "c.json")
    json.dump({"amqp": {"url": AMQP}, "mysql": {"url": MYSQL}, "log": {"level": level},
               "http": {"listen": f"127.0.0.1:{port}" if port else "off"},
               "consumers": [{"name": name, "queue": name, "handler": handler or HANDLER, "batch_max": batch,
                              "workers": workers, "prefetch": prefetch}]}, open(path, "w"))
    return path


results = {}


def report(key, label, rate, done, usage, dt, extra=""):
    per_k = {k: (round(v / done * 1000, 3) if v is not None and done else None) for k, v in usage.items()}
    results[key] = {"label": label, "events_per_s": round(rate, 1), "processed": done, "seconds": round(dt, 2),
                    "cpu_s_per_1000": per_k}
    print(f"{label:<44} {rate:>10.0f} ev/s  ({done} in {dt:.1f} s)  cpu s/1000 ev: "
          + ", ".join(f"{k} {v}" for k, v in per_k.items()) + extra, flush=True)


def run_sidecar(key, label, batch, workers, prefetch, build=None):
    name = f"bench-{key}-{uuid.uuid4().hex[:6]}"
    preload(name)
    port = free_port()
    build = build or BUILD
    path = sidecar_config(name, batch, workers, prefetch, port=port,
                          handler=f"{build}/handlers/notification_job/notification_job.so")
    holder = {}

    def start():
        holder["p"] = subprocess.Popen([f"{build}/sidecar/sidecar", "consume", "-c", path], stderr=subprocess.DEVNULL)
        return holder["p"]
    rate, done, usage, proc, dt = measure(name, start, lambda: handled(port, name))
    usage["client"] = cpu([proc.pid])
    rss = status_kib(proc.pid, "VmHWM")
    proc.terminate()
    proc.wait()
    delete_queue(name)
    report(key, label, rate, done, usage, dt, f"  peak RSS {rss / 1024:.1f} MiB")
    results[key]["peak_rss_mib"] = round(rss / 1024, 1)


if os.environ.get("BENCH_COMPARE"):
    # Two builds of the sidecar (this one, A, and BENCH_COMPARE, B: e.g. a
    # release build of an older commit), same scenarios interleaved
    # A-B-A-B-A-B, ratios of the means: a change that should not move
    # throughput is checked against the noise of the same run.
    other = os.environ["BENCH_COMPARE"]
    rounds = int(os.environ.get("BENCH_ROUNDS", "3"))
    for key, label, batch, workers, prefetch in (("b64_w2", "batch 64, 2 workers, prefetch 1024", 64, 2, 1024),
                                                 ("b1_w1", "batch 1, 1 worker", 1, 1, 256)):
        rates = {"A": [], "B": []}
        for r in range(rounds):
            for side, build in (("A", BUILD), ("B", other)):
                run_sidecar(f"{key}_{side}{r}", f"{side}: {label}", batch, workers, prefetch, build=build)
                rates[side].append(results[f"{key}_{side}{r}"]["events_per_s"])
        a, b = statistics.mean(rates["A"]), statistics.mean(rates["B"])
        if not a or not b:
            sys.exit(f"{label}: a build handled nothing (A {rates['A']}, B {rates['B']}): see its log")
        print(f"{label}: A (this build) {a:.0f} ev/s, B ({other}) {b:.0f} ev/s, A / B = {a / b:.2f}  "
              f"(A runs {', '.join(f'{x:.0f}' for x in rates['A'])}; B runs {', '.join(f'{x:.0f}' for x in rates['B'])})",
              flush=True)
    sys.exit(0)

print(f"# N = {N} persistent CloudEvents messages per scenario, time-boxed at {MAX_S:.0f} s; "
      f"MariaDB with innodb_flush_log_at_trx_commit=1; {os.cpu_count()} cores", flush=True)

# (c) the broker limit
name = "bench-broker-" + uuid.uuid4().hex[:6]
print("# " + preload(name), flush=True)
before = cpu(SERVER_PIDS["rabbitmq"])
out = subprocess.run([f"{BUILD}/tests/bench/broker_limit", AMQP, name, str(N), "1024"], capture_output=True, text=True)
b = json.loads(out.stdout)
delete_queue(name)
report("broker_limit", "(c) broker limit: C consumer, no database", b["events_per_s"], b["events"],
       {"rabbitmq": cpu(SERVER_PIDS["rabbitmq"]) - before}, b["seconds"])

# (d) the database limit
out = subprocess.run([f"{BUILD}/tests/bench/db_limit", MYSQL, "bench-db-" + uuid.uuid4().hex[:6], str(min(N, 50000)), "64"],
                     capture_output=True, text=True)
d = json.loads(out.stdout)
report("db_limit", "(d) database limit: same statements, batch 64", d["events_per_s"], d["events"], {}, d["seconds"])
out = subprocess.run([f"{BUILD}/tests/bench/db_limit", MYSQL, "bench-dbr-" + uuid.uuid4().hex[:6], str(min(N, 20000)), "64", "rows"],
                     capture_output=True, text=True)
d = json.loads(out.stdout)
report("db_limit_rows", "(d') database, per-delivery path, batch 64", d["events_per_s"], d["events"], {}, d["seconds"])

# (b) the per-message baseline
name = "bench-baseline-" + uuid.uuid4().hex[:6]
preload(name)
host_port = MYSQL.split("@", 1)[1].split("/", 1)[0]
rate, done, usage, proc, dt = measure(name, lambda: subprocess.Popen(
    ["/usr/bin/python3", os.path.join(HERE, "baseline.py"), AMQP, host_port.split(":")[0], host_port.split(":")[1],
     name, name, str(MAX_S)]), lambda: consumed(name), poll_s=0.5)
proc.wait()
delete_queue(name)
report("baseline", "(b) baseline: pika + MySQLdb, 1 txn/message", rate, done, usage, dt)

# (a) the sidecar
run_sidecar("sidecar_b1_w1", "(a) sidecar batch 1, 1 worker", 1, 1, 256)
run_sidecar("sidecar_b64_w1", "(a) sidecar batch 64, 1 worker", 64, 1, 1024)
run_sidecar("sidecar_b64_w2", "(a) sidecar batch 64, 2 workers, prefetch 1024", 64, 2, 1024)

# latency at a fixed low rate
def latency(batch):
    name = f"bench-lat-{batch}-{uuid.uuid4().hex[:6]}"
    path = sidecar_config(name, batch, 1, 256, level="info")
    log = tempfile.NamedTemporaryFile(delete=False)
    proc = subprocess.Popen([SIDECAR, "consume", "-c", path], stderr=log)
    time.sleep(1)
    c = pika.BlockingConnection(pika.URLParameters(AMQP))
    ch = c.channel()
    t0 = time.time()
    for i in range(1000):
        eid = str(uuid.uuid4())
        body = json.dumps({"specversion": "1.0", "id": eid, "type": "ORDER_ACCEPTED", "source": "ORDER",
                           "subject": str(i + 1), "eventversion": 1, "data": {}})
        ch.basic_publish("", name, body, pika.BasicProperties(content_type="application/cloudevents+json",
                                                              delivery_mode=2, message_id=eid))
        sleep = t0 + (i + 1) / 100.0 - time.time()
        if sleep > 0:
            time.sleep(sleep)
    c.close()
    time.sleep(1)
    proc.terminate()
    proc.wait()
    lat = sorted(json.loads(l)["duration_us"] / 1000.0 for l in open(log.name) if '"outcome":"applied"' in l)
    delete_queue(name)
    p = lambda x: lat[min(len(lat) - 1, int(round(x / 100 * (len(lat) - 1))))]
    return {"p50_ms": round(p(50), 3), "p99_ms": round(p(99), 3), "samples": len(lat)}


lat64, lat1 = latency(64), latency(1)
print(f"{'receive-to-commit at 100 ev/s, batch 64':<44} p50 {lat64['p50_ms']} ms  p99 {lat64['p99_ms']} ms  ({lat64['samples']})")
print(f"{'receive-to-commit at 100 ev/s, batch 1':<44} p50 {lat1['p50_ms']} ms  p99 {lat1['p99_ms']} ms  ({lat1['samples']})")

best = max(("sidecar_b64_w1", "sidecar_b64_w2"), key=lambda k: results[k]["events_per_s"])
r_base = results[best]["events_per_s"] / results["baseline"]["events_per_s"]
r_broker = results[best]["events_per_s"] / results["broker_limit"]["events_per_s"]
r_db = results[best]["events_per_s"] / results["db_limit"]["events_per_s"]
r_lat = lat64["p99_ms"] / lat1["p99_ms"]
rss = results["sidecar_b64_w2"]["peak_rss_mib"]
print()
print(f"best sidecar: {results[best]['label']}")
checks = [
    (f"sidecar / baseline           = {r_base:6.2f}   (target >= 10)", r_base >= 10),
    (f"sidecar / broker limit       = {r_broker:6.2f}   (target >= 0.6)", r_broker >= 0.6),
    (f"sidecar / database limit     = {r_db:6.2f}", None),
    (f"p99 batch 64 / p99 batch 1   = {r_lat:6.2f}   (target <= 1.5)", r_lat <= 1.5),
    (f"peak RSS, 2 workers, pf 1024 = {rss:6.1f} MiB (target <= 32)", rss <= 32),
]
for text, met in checks:
    print(text + ("" if met is None else ("   MET" if met else "   MISSED")))
json.dump({"results": results, "latency": {"batch64": lat64, "batch1": lat1},
           "ratios": {"sidecar_over_baseline": r_base, "sidecar_over_broker": r_broker, "sidecar_over_db": r_db,
                      "p99_batch_over_batch1": r_lat}}, open(os.environ.get("BENCH_JSON", "/dev/null"), "w"), indent=1)
