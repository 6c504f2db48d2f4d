#!/usr/bin/python3
"""relay.source binlog against poll and the C publisher with confirms,
A-B-A in one run, on a MariaDB with the binary log on (ROW, sync_binlog=1,
innodb_flush_log_at_trx_commit=1) and RabbitMQ that tests/bench/run
started for BENCH_PART=binlog. Each leg preloads BENCH_BINLOG_N rows (the
relay stopped), starts one relay, and times it from its first message to
the last (the C publisher's time starts after its connection too); it
prints the rate, mariadbd's CPU per event (from /proc) and the rows the
server wrote per event (Handler_write + Handler_update, the producer's
inserts excluded). Then the end-to-end latency (producer COMMIT ->
consumer COMMIT) at 100 and 1,000 events/s through the binlog relay and,
for comparison, the poll relay. The figures are this machine's (2 shared
cores), not a claim about others."""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid

import pika
import pymysql

from bench_lib import AMQP, BUILD, MYSQL, SOCK, e2e_latency

N = int(os.environ.get("BENCH_BINLOG_N", "20000"))
PORT = int(os.environ["SC_TEST_MYSQL_PORT"])
SIDECAR = f"{BUILD}/sidecar/sidecar"
PRELOAD = f"{BUILD}/tests/bench/preload"
PID = int(open(os.path.join(os.environ["SC_TEST_DIR"], "mysql", "mysqld.pid")).read())
TICK = os.sysconf("SC_CLK_TCK")
# The binlog relay connects as the least-privilege role of sql/grants/relay_binlog.sql.
BINLOG_URL = f"mysql://sidecar_relay_binlog:relay-binlog-secret@127.0.0.1:{PORT}/app"
LATENCY_S = float(os.environ.get("BENCH_LATENCY_S", "10"))


def q(sql, args=None):
    with pymysql.connect(unix_socket=SOCK, user="root", database="app", autocommit=True) as c, c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def cpu_s():
    f = open(f"/proc/{PID}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK


def writes():
    st = {k.lower(): int(v) for k, v in q("SHOW GLOBAL STATUS LIKE 'Handler_%'")}
    return st["handler_write"] + st["handler_update"]


def preload(n):
    with pymysql.connect(unix_socket=SOCK, user="root", database="app") as c, c.cursor() as cur:
        for k in range(0, n, 500):
            rows = [(str(uuid.uuid4()), "ORDER", str(i % 97), "ORDER_ACCEPTED", json.dumps({"n": i}))
                    for i in range(k, min(n, k + 500))]
            cur.executemany("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, "
                            "event_version, payload, created_at) VALUES (%s, %s, %s, %s, 1, %s, UTC_TIMESTAMP(6))",
                            rows)
            c.commit()


def checkpoint_here():
    """The binlog relay's checkpoint at the server's end of log: it starts
    from there."""
    q("DELETE FROM relay_checkpoint")
    f, pos = q("SHOW MASTER STATUS")[0][:2]
    q("INSERT INTO relay_checkpoint (outbox, binlog_file, binlog_pos, updated_at) "
      "VALUES ('outbox_event', %s, %s, UTC_TIMESTAMP(6))", (f, pos))


def depth(ch, queue):
    return ch.queue_declare(queue, passive=True).method.message_count


def leg(source):
    ex, queue = "bench-binlog", "bench-binlog-" + source
    conn = pika.BlockingConnection(pika.URLParameters(AMQP))
    ch = conn.channel()
    ch.exchange_declare(ex, "topic", durable=True)
    ch.queue_delete(queue)
    ch.queue_declare(queue, durable=True)
    ch.queue_bind(queue, ex, "#")
    q("DELETE FROM outbox_event")
    checkpoint_here()
    preload(N)
    cfg = {"amqp": {"url": AMQP}, "mysql": {"url": BINLOG_URL if source == "binlog" else MYSQL},
           "http": {"listen": "off"}, "log": {"level": "warn"},
           "relay": {"exchange": ex, "source": source, "batch": 500, "worker_id": "bench"}}
    d = tempfile.mkdtemp(prefix="sc-binlog-bench-")
    path = os.path.join(d, "r.json")
    json.dump(cfg, open(path, "w"))
    c0, w0, t_start = cpu_s(), writes(), time.time()
    p = subprocess.Popen([SIDECAR, "relay", "-c", path], stderr=open(os.path.join(d, "log"), "w"))
    t0 = None
    while time.time() - t_start < 600:
        got = depth(ch, queue)  # the broker's count: polling costs the database nothing
        if got and t0 is None:
            t0 = time.time()
        if got >= N:
            break
        time.sleep(0.02)
    t1, c1, w1 = time.time(), cpu_s(), writes()
    t0 = t0 or t1
    p.terminate()
    p.wait(30)
    got = depth(ch, queue)
    ch.queue_delete(queue)
    conn.close()
    return {"source": source, "events": got, "s": t1 - t0, "ev_s": got / (t1 - t0),
            "db_cpu_ms_per_ev": (c1 - c0) * 1000 / max(got, 1), "rows_written_per_ev": (w1 - w0) / max(got, 1)}


def publisher():
    """The C publisher with confirms (tests/bench/preload, batches of 500,
    persistent, mandatory, a CloudEvents body of the relay's size)."""
    queue = "bench-binlog-pub-" + uuid.uuid4().hex[:6]
    out = subprocess.run([PRELOAD, AMQP, queue, str(N), "v4", "500"], capture_output=True, text=True,
                         timeout=600).stdout
    conn = pika.BlockingConnection(pika.URLParameters(AMQP))
    conn.channel().queue_delete(queue)
    conn.close()
    return float(re.search(r"\(([0-9.]+)/s\)", out).group(1))


# Interleaved: each binlog leg between two publisher legs, its ratio taken
# against their mean (the machine's speed drifts between legs).
order = ("pub", "binlog", "poll", "pub", "binlog", "pub")
legs = []
for s in order:
    legs.append({"source": "pub", "ev_s": publisher()} if s == "pub" else leg(s))
for r in legs:
    if r["source"] == "pub":
        print(f"C publisher with confirms: {r['ev_s']:8.0f} ev/s", flush=True)
    else:
        print(f"{r['source']:6} {r['events']:6d} events in {r['s']:6.2f} s: {r['ev_s']:8.0f} ev/s, "
              f"mariadbd {r['db_cpu_ms_per_ev']:.4f} ms CPU/event (target binlog <= 0.02), "
              f"{r['rows_written_per_ev']:.4f} rows written/event beyond the producer's", flush=True)


def around(i):
    """The mean rate of the publisher legs nearest before and after leg i."""
    before = next(legs[j]["ev_s"] for j in range(i, -1, -1) if legs[j]["source"] == "pub")
    after = next(legs[j]["ev_s"] for j in range(i, len(legs)) if legs[j]["source"] == "pub")
    return (before + after) / 2


ratios = [r["ev_s"] / around(i) for i, r in enumerate(legs) if r["source"] == "binlog"]
poll = next(r["ev_s"] for r in legs if r["source"] == "poll")
b = [r["ev_s"] for r in legs if r["source"] == "binlog"]
print(f"binlog / poll: {min(b) / poll:.2f}-{max(b) / poll:.2f}")
print(f"binlog / C publisher (each against the publisher legs around it): "
      f"{', '.join(f'{x:.2f}' for x in ratios)} (target >= 0.85)", flush=True)
results = [r for r in legs if r["source"] != "pub"]
# Producer COMMIT -> consumer COMMIT, binlog then poll then binlog again at
# each rate (the poll relay at its low-latency setting, relay.poll_ms 10).
lat_ok = True
for rate, target in ((100, 10), (1000, 20)):
    for source in ("binlog", "poll", "binlog"):
        rcfg = {"source": "binlog", "batch": 500} if source == "binlog" else {"poll_ms": 10}
        r = e2e_latency(rate, LATENCY_S, rcfg, sock=SOCK, mysql=MYSQL,
                        relay_mysql=BINLOG_URL if source == "binlog" else None, before=checkpoint_here)
        lat_ok = lat_ok and r["events"] == r["of"]
        print(f"end to end, {rate:4d} ev/s, {source:6} p50 {r['p50_ms']:>6} ms  p99 {r['p99_ms']:>6} ms  "
              f"max {r['max_ms']:>6} ms  ({r['events']} of {r['of']})"
              + (f"   (target binlog p99 <= {target} ms)" if source == "binlog" else ""), flush=True)
sys.exit(0 if lat_ok and all(r["events"] >= N for r in results) else 1)
