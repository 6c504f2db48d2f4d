#!/usr/bin/python3
"""The consumer side at size (issue 11.4-11.6), measured in one run; prints ratios.

BENCH_CONSUMED_PART (space-separated, default "size rss purge"):
  size   consume ev/s with consumed_event empty, then pre-filled with BENCH_FILL
         rows (default 2,000,000) of history for the same consumer with
         time-ordered (UUIDv7) ids and BENCH_FILL_V4 (default: BENCH_FILL) with
         random (v4) ids, A-B-A: empty, big, big again, (purge), empty again.
  rss    one `consume` over BENCH_RSS_N events (default 300,000): VmRSS after
         warm-up (BENCH_RSS_WARM, 20,000) vs at the end.
  purge  consume ev/s while `sidecar purge` deletes the expired history ÷ without
         (on the size part's table when both run: BENCH_FILL + BENCH_FILL_V4 rows).
Progress comes from the sidecar's /metrics (sidecar_messages_total), never from
COUNT(*) over the big table. Rows are filled by INSERT ... SELECT from
seq_1_to_N with ids made in SQL. The buffer pool is set to BENCH_POOL_MB (128)
with SET GLOBAL before anything is measured."""
import json
import os
import re
import subprocess
import tempfile
import threading
import time
import uuid

import pika

from bench_lib import (AMQP, BUILD, HANDLER, MYSQL, SIDECAR, delete_queue, free_port, handled, q, set_pool,
                       status_kib, v7_id_sql)

FILL = int(os.environ.get("BENCH_FILL", "2000000"))
FILL_V4 = int(os.environ.get("BENCH_FILL_V4", str(FILL)))
MSGS = int(os.environ.get("BENCH_MSGS", "20000"))
PURGE_MSGS = int(os.environ.get("BENCH_PURGE_MSGS", "100000"))
RSS_N = int(os.environ.get("BENCH_RSS_N", "300000"))
RSS_WARM = int(os.environ.get("BENCH_RSS_WARM", "20000"))
POOL_MB = int(os.environ.get("BENCH_POOL_MB", "128"))
PARTS = os.environ.get("BENCH_CONSUMED_PART", "size purge rss").split()


def preload(queue, n, kind):
    return subprocess.run([f"{BUILD}/tests/bench/preload", AMQP, queue, str(n), kind],
                          capture_output=True, text=True, check=True).stdout.strip()


class Consumer:
    def __init__(self, name):
        self.name, self.port = name, free_port()
        d = tempfile.mkdtemp(prefix="bench-consume-")
        path = os.path.join(d, "c.json")
        json.dump({"amqp": {"url": AMQP}, "mysql": {"url": MYSQL}, "log": {"level": "warn"},
                   "http": {"listen": f"127.0.0.1:{self.port}"},
                   "consumers": [{"name": name, "queue": name, "handler": HANDLER, "batch_max": 128,
                                  "workers": 2, "prefetch": 1024}]}, open(path, "w"))
        self.config = path
        self.proc = subprocess.Popen([SIDECAR, "consume", "-c", path], stderr=open(os.path.join(d, "log"), "w"))

    def handled(self):
        return handled(self.port, self.name)

    def rss_kib(self):
        return status_kib(self.proc.pid, "VmRSS")

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def consume_rate(name, n, during=None):
    """Starts a consumer on a queue already holding n events; ev/s from its first
    handled event to the n-th (start-up excluded)."""
    c = Consumer(name)
    t_end = time.time() + 600
    while c.handled() == 0 and time.time() < t_end:
        time.sleep(0.02)
    t0, c0 = time.time(), c.handled()
    extra = during(c) if during else None
    while time.time() < t_end:
        done = c.handled()
        if done >= n:
            break
        if c.proc.poll() is not None:
            raise SystemExit(f"consumer {name} exited with {c.proc.returncode}")
        time.sleep(0.05)
    dt = time.time() - t0
    done = c.handled()
    c.stop()
    if done < n:
        raise SystemExit(f"consumer {name}: only {done} of {n} in time")
    return (done - c0) / dt, extra


def scenario(label, consumer, kind, n=MSGS, during=None):
    queue = consumer
    preload(queue, n, kind)
    rate, extra = consume_rate(consumer, n, during)
    delete_queue(queue)
    print(f"{label:<58} {rate:>8.0f} ev/s", flush=True)
    return rate, extra


def fill(consumer, n, kind, chunk=500000):
    """n rows of history for consumer, consumed 30 days ago, ids made in SQL:
    v7 from a counter (48-bit millisecond prefix well before now), v4 random hex."""
    base_ms = int(time.time() * 1000) - 40 * 86400 * 1000
    t0 = time.time()
    for lo in range(0, n, chunk):
        k = min(chunk, n - lo)
        if kind == "v7":
            ident = v7_id_sql(base_ms + lo, f"{lo} + seq")
        else:
            ident = ("CONCAT(LEFT(h, 8), '-', MID(h, 9, 4), '-4', MID(h, 14, 3), '-a', MID(h, 18, 3), '-',"
                     " MID(h, 21, 12))")
        src = f"(SELECT seq, MD5(CONCAT(RAND(), seq)) AS h FROM seq_1_to_{k}) s"
        q(f"INSERT INTO consumed_event (consumer_name, event_id, consumed_at) "
          f"SELECT %s, {ident}, NOW(6) - INTERVAL 30 DAY FROM {src}", (consumer,))
    dt = time.time() - t0
    print(f"# filled {n} rows ({kind} ids) for {consumer} in {dt:.0f} s ({n / dt:.0f} rows/s)", flush=True)


def settle():
    """Waits (bounded) until InnoDB has flushed most dirty pages of the fill."""
    t_end = time.time() + 120
    while time.time() < t_end:
        dirty = int(q("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'")[0][1])
        if dirty < 500:
            break
        time.sleep(1)


set_pool(POOL_MB << 20)
print(f"# MariaDB {q('SELECT VERSION()')[0][0]}, innodb_buffer_pool_size "
      f"{int(q('SELECT @@innodb_buffer_pool_size')[0][0]) >> 20} MB, flush_log_at_trx_commit "
      f"{q('SELECT @@innodb_flush_log_at_trx_commit')[0][0]}; {os.cpu_count()} cores; {MSGS} events per scenario, "
      f"consumer batch 128, 2 workers, prefetch 1024", flush=True)
ratios = []
tag = uuid.uuid4().hex[:6]
c7, c4 = f"bench-v7-{tag}", f"bench-v4-{tag}"

if "size" in PARTS:
    q("TRUNCATE consumed_event")
    scenario("(warm-up, not counted)", f"bench-warm-{tag}", "v7")
    e7, _ = scenario("v7 ids, consumed_event empty (A)", c7, "v7")
    e4, _ = scenario("v4 ids, consumed_event empty (A)", c4, "v4")
    q("TRUNCATE consumed_event")
    fill(c7, FILL, "v7")
    fill(c4, FILL_V4, "v4")
    settle()
    size = q("SELECT ROUND(index_length / 1048576), ROUND(data_length / 1048576) FROM information_schema.tables "
             "WHERE table_schema = 'app' AND table_name = 'consumed_event'")[0]
    print(f"# consumed_event: {FILL + FILL_V4} rows (+ the empty runs'), secondary indexes ~{size[0]} MB, "
          f"data ~{size[1]} MB", flush=True)
    b7, _ = scenario(f"v7 ids, {FILL} rows of history for this consumer (B)", c7, "v7")
    b4, _ = scenario(f"v4 ids, {FILL_V4} rows of history for this consumer (B)", c4, "v4")
    b7b, _ = scenario(f"v7 ids, {FILL} rows of history (B again)", c7, "v7")
    b4b, _ = scenario(f"v4 ids, {FILL_V4} rows of history (B again)", c4, "v4")
    ratios.append((f"v7: at {FILL} rows / empty", None, ">= 0.8"))
    ratios.append((f"v4: at {FILL_V4} rows / empty", None, "(random ids: the sizing rule)"))

if "purge" in PARTS:
    if not q("SELECT 1 FROM consumed_event WHERE consumed_at < NOW() - INTERVAL 8 DAY LIMIT 1"):
        fill(c7, FILL, "v7")
        settle()
    # an estimate: a COUNT(*) here would sweep the pool just before A
    before = q("SELECT table_rows FROM information_schema.tables WHERE table_schema = 'app'"
               " AND table_name = 'consumed_event'")[0][0]
    dl0 = int(q("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'")[0][1])
    r0, _ = scenario("v7 ids, no purge running (A)", c7, "v7", PURGE_MSGS)

    def start_purge(c):
        t0 = time.time()
        p = subprocess.Popen([SIDECAR, "purge", "-c", c.config, "--older-than", "8d"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return (p, t0)
    r1, (p, t0) = scenario("v7 ids, while `sidecar purge --older-than 8d` runs (B)", c7, "v7", PURGE_MSGS,
                           during=start_purge)
    running = p.poll() is None
    if running:
        p.terminate()  # it stops after its current batch and prints what it deleted
    out = p.communicate()[0]
    took = time.time() - t0
    if not running and p.returncode != 0:
        raise SystemExit(f"purge failed: {out}")
    m = re.search(r"consumed_event: deleted (\d+) rows", out)
    deleted = int(m.group(1)) if m else 0
    print(f"# purge {'stopped at the end of B' if running else 'finished'} after {took:.0f} s: {out.strip()[-200:]}"
          f" ({deleted / took:.0f} rows/s; ~{before} rows in the table before)", flush=True)
    if not running:
        print("# (the purge ended before the consumer: B includes time without purge)", flush=True)
    r2, _ = scenario("v7 ids, no purge running (A again)", c7, "v7", PURGE_MSGS)
    dl = int(q("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'")[0][1]) - dl0
    waits = q("SHOW GLOBAL STATUS LIKE 'Innodb_row_lock_time_max'")[0][1]
    ratios.append(("consume during purge / without", r1 / ((r0 + r2) / 2), ">= 0.7"))
    ratios.append(("deadlocks during the purge part", dl, "0"))
    print(f"# Innodb_deadlocks during the purge part: {dl}; Innodb_row_lock_time_max (server-wide) {waits} ms",
          flush=True)

if "size" in PARTS:
    q("TRUNCATE consumed_event")
    e7b, _ = scenario("v7 ids, consumed_event empty (A again)", c7, "v7")
    e4b, _ = scenario("v4 ids, consumed_event empty (A again)", c4, "v4")
    ratios = [(f"v7: at {FILL} rows / empty", (b7 + b7b) / (e7 + e7b), t) if v is None and lbl.startswith("v7") else
              (f"v4: at {FILL_V4} rows / empty", (b4 + b4b) / (e4 + e4b), t) if v is None else (lbl, v, t)
              for lbl, v, t in ratios]

if "rss" in PARTS:
    name = f"bench-rss-{tag}"
    c = pika.BlockingConnection(pika.URLParameters(AMQP))
    c.channel().queue_declare(name, durable=True)
    c.close()
    cons = Consumer(name)
    feeder = threading.Thread(target=preload, args=(name, RSS_N, "v7"))
    feeder.start()
    warm = None
    t_end = time.time() + 1800
    peak = 0
    while time.time() < t_end:
        done = cons.handled()
        rss = cons.rss_kib()
        peak = max(peak, rss)
        if warm is None and done >= RSS_WARM:
            warm = rss
        if done >= RSS_N:
            break
        time.sleep(0.5)
    end = cons.rss_kib()
    feeder.join()
    cons.stop()
    delete_queue(name)
    print(f"consume RSS: {warm / 1024:.2f} MiB after {RSS_WARM} events, {end / 1024:.2f} MiB after {done} "
          f"(growth {(end - warm) / 1024:+.2f} MiB, peak {peak / 1024:.2f} MiB)", flush=True)
    ratios.append(("consume RSS growth after warm-up, MiB", (end - warm) / 1024, "<= 2"))

print()
for label, v, target in ratios:
    print(f"{label:<44} = {v:6.2f}   (target {target})")
