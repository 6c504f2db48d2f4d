#!/usr/bin/python3
"""Ordered consumers (consumers[].ordering) against the same consumer
without ordering, in the same run, A-B-A (tests/bench/run BENCH_PART=ordering
sets the environment):

  (1) ordered / unordered throughput: the same queue content, BENCH_N events
      (default 20000) over 1,000 keys (subject), each key's versions
      1..N/1000 in order, version by version across keys.
  (2) one key stalled by retries (its handler answers RETRY for the whole
      run, retried in place) / no stall: the throughput of the other 999 keys.

Each run declares its topology by starting the sidecar once, stops it, fills
the queues (the ordered consumer's through its consistent-hash exchange, with
header x-ordering-key), then times a fresh start until the other keys' events
are applied (counted from the sidecar's own /metrics) or BENCH_MAX_S."""
import json
import os
import re
import statistics
import subprocess
import tempfile
import time
import uuid

import pika

from bench_lib import AMQP, BUILD, HANDLER, MYSQL, SIDECAR, free_port, metric_sum, q

N = int(os.environ.get("BENCH_N", "20000"))
MAX_S = float(os.environ.get("BENCH_MAX_S", "60"))
KEYS = 1000
VERSIONS = max(1, N // KEYS)
N = KEYS * VERSIONS
PARTITIONS, WORKERS, BATCH, PREFETCH = 2, 2, 64, 1024
STALLED = "1"  # the key whose handler answers RETRY in part (2)
TEST_HANDLER = f"{BUILD}/tests/integration/test_handler.so"
BLOCK = os.path.join(tempfile.mkdtemp(prefix="sc-orderbench-"), "block")

# The test handler's ORDERED_BLOCKED type (RETRY while BLOCK exists, then a
# t_order_seen row); every other key's events take the sample effect.
q("CREATE TABLE IF NOT EXISTS t_order_seen (seq BIGINT AUTO_INCREMENT PRIMARY KEY, "
  "event_id CHAR(36) NOT NULL, subject VARCHAR(100) NOT NULL, version BIGINT NOT NULL, "
  "at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))")


def config(name, ordered, handler, port):
    c = {"name": name, "queue": name, "handler": handler, "batch_max": BATCH, "workers": WORKERS,
         "prefetch": PREFETCH, "max_attempts": 1000, "retry_delays_ms": [100]}
    if ordered:
        c["ordering"] = {"key": "subject", "partitions": PARTITIONS}
    path = os.path.join(tempfile.mkdtemp(), "c.json")
    json.dump({"amqp": {"url": AMQP}, "mysql": {"url": MYSQL}, "log": {"level": "error"},
               "http": {"listen": f"127.0.0.1:{port}"}, "consumers": [c]}, open(path, "w"))
    return path


def queues(name, ordered):
    return [f"{name}.p{i}" for i in range(PARTITIONS)] if ordered else [name]


def depth(ch, names):
    return sum(ch.queue_declare(n, passive=True).method.message_count for n in names)


def declared(name, ordered):
    """True once the sidecar has declared every queue this run fills."""
    c = pika.BlockingConnection(pika.URLParameters(AMQP))
    try:
        for n in queues(name, ordered):
            c.channel().queue_declare(n, passive=True)
        if ordered:
            c.channel().exchange_declare(f"{name}.ordering", passive=True)
        return True
    except pika.exceptions.ChannelClosedByBroker:
        return False
    finally:
        c.close()


def fill(name, ordered, stall):
    """N persistent CloudEvents, version by version across the keys; waits
    until the broker holds them all (publishing without confirms is several
    times faster from Python, and the depth check catches a loss)."""
    c = pika.BlockingConnection(pika.URLParameters(AMQP))
    ch = c.channel()
    exchange, rk = (f"{name}.ordering", "") if ordered else ("", name)
    t0 = time.time()
    for v in range(1, VERSIONS + 1):
        for k in range(1, KEYS + 1):
            key = str(k)
            eid = str(uuid.uuid4())
            etype = "ORDERED_BLOCKED" if stall and key == STALLED else "ORDER_ACCEPTED"
            body = json.dumps({"specversion": "1.0", "id": eid, "type": etype, "source": "ORDER", "subject": key,
                               "eventversion": v, "datacontenttype": "application/json",
                               "data": {"orderId": k, "tenantId": "bench"}})
            ch.basic_publish(exchange, rk, body, pika.BasicProperties(
                content_type="application/cloudevents+json", delivery_mode=2, message_id=eid, type=etype,
                headers={"x-ordering-key": key}))
    end = time.time() + 60
    while depth(ch, queues(name, ordered)) < N:
        if time.time() > end:
            raise SystemExit(f"{name}: the broker holds {depth(ch, queues(name, ordered))} of {N}")
        time.sleep(0.2)
    c.close()
    return time.time() - t0


def applied(port, name):
    return metric_sum(port, r'^sidecar_messages_total\{consumer="%s",outcome="applied"\} (\d+)$' % re.escape(name))


def run(label, ordered, handler, stall=False):
    """Events/s of the keys that are not stalled (all N - VERSIONS of them,
    the same count with and without a stall)."""
    name = f"bench-ord-{uuid.uuid4().hex[:6]}"
    port = free_port()
    path = config(name, ordered, handler, port)
    p = subprocess.Popen([SIDECAR, "consume", "-c", path], stderr=subprocess.DEVNULL)
    end = time.time() + 30
    while not declared(name, ordered):
        if time.time() > end or p.poll() is not None:
            raise SystemExit(f"{label}: the sidecar did not declare its queues")
        time.sleep(0.2)
    p.terminate()
    p.wait()
    fill_s = fill(name, ordered, stall)
    if stall:
        open(BLOCK, "w").close()
    target = N - VERSIONS
    t0 = time.time()
    p = subprocess.Popen([SIDECAR, "consume", "-c", path], stderr=subprocess.DEVNULL,
                         env=dict(os.environ, SC_TEST_BLOCK_FILE=BLOCK))
    done = 0
    while time.time() - t0 < MAX_S:
        done = applied(port, name)
        if done >= target:
            break
        time.sleep(0.05)
    dt = time.time() - t0
    done = min(applied(port, name), target) if done < target else target
    retried = metric_sum(port, r'^sidecar_messages_total\{consumer="%s",outcome="retried"\} (\d+)$' % re.escape(name))
    p.terminate()
    p.wait()
    if os.path.exists(BLOCK):
        os.unlink(BLOCK)
    c = pika.BlockingConnection(pika.URLParameters(AMQP))
    ch = c.channel()
    for n in queues(name, ordered):
        ch.queue_delete(n)
    if ordered:
        ch.exchange_delete(f"{name}.ordering")
    c.close()
    rate = done / dt
    print(f"{label:<52} {rate:>8.0f} ev/s  ({done} in {dt:.1f} s; filled in {fill_s:.1f} s"
          + (f"; {retried} retries counted" if stall else "") + ")", flush=True)
    return rate


print(f"# {N} persistent CloudEvents per run over {KEYS} keys x {VERSIONS} versions; batch {BATCH}, "
      f"workers {WORKERS}, prefetch {PREFETCH}, ordered: partitions {PARTITIONS}; time-boxed at {MAX_S:.0f} s; "
      f"{os.cpu_count()} cores", flush=True)
# (1) A-B-A: unordered, ordered, unordered
u1 = run("(1) A: unordered", False, HANDLER)
o1 = run("(1) B: ordered, key subject", True, HANDLER)
u2 = run("(1) A: unordered", False, HANDLER)
# (2) A-B-A: ordered, ordered with one key stalled, ordered
s1 = run("(2) A: ordered, no stall", True, TEST_HANDLER)
s2 = run(f"(2) B: ordered, key {STALLED} stalled by RETRY", True, TEST_HANDLER, stall=True)
s3 = run("(2) A: ordered, no stall", True, TEST_HANDLER)

r1 = o1 / statistics.mean([u1, u2]) if u1 and u2 else 0.0
r2 = s2 / statistics.mean([s1, s3]) if s1 and s3 else 0.0
print()
print(f"ordered / unordered, 1,000 keys          = {r1:5.2f}   (target >= 0.7)   {'MET' if r1 >= 0.7 else 'MISSED'}")
print(f"one key stalled / no stall, other keys   = {r2:5.2f}   (target >= 0.8)   {'MET' if r2 >= 0.8 else 'MISSED'}")
json.dump({"unordered": [u1, u2], "ordered": o1, "unstalled": [s1, s3], "stalled": s2,
           "ratios": {"ordered_over_unordered": r1, "stalled_over_unstalled": r2}},
          open(os.environ.get("BENCH_JSON", "/dev/null"), "w"), indent=1)
