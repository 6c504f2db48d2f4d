#!/usr/bin/python3
"""relay.source binlog against poll, A-B-A in one run, on a MariaDB with the
binary log on (BENCH_BINLOG_SOCKET, BENCH_BINLOG_PORT; the suite's server
has none) and the test RabbitMQ (SC_TEST_AMQP_URL). Each leg preloads
BENCH_BINLOG_N rows (the relay stopped), starts one relay, and times it
until the queue holds all of them; it prints the rate, mariadbd's CPU per
event (from /proc) and the rows the server wrote per event (Handler_write +
Handler_update, the producer's inserts excluded). The figures
are this machine's (2 shared cores), not a claim about others."""
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

N = int(os.environ.get("BENCH_BINLOG_N", "20000"))
SOCK = os.environ["BENCH_BINLOG_SOCKET"]
PORT = int(os.environ["BENCH_BINLOG_PORT"])
AMQP = os.environ["SC_TEST_AMQP_URL"]
SIDECAR = os.environ.get("SIDECAR_BIN", "build-test/sidecar/sidecar")
PRELOAD = os.environ.get("SC_PRELOAD_BIN", os.path.join(os.path.dirname(SIDECAR), "..", "tests", "bench", "preload"))
PID = int(open(os.environ["BENCH_BINLOG_PIDFILE"]).read())
TICK = os.sysconf("SC_CLK_TCK")


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
    q("DELETE FROM relay_checkpoint")
    f, pos = q("SHOW MASTER STATUS")[0][:2]
    q("INSERT INTO relay_checkpoint (outbox, binlog_file, binlog_pos, updated_at) "
      "VALUES ('outbox_event', %s, %s, UTC_TIMESTAMP(6))", (f, pos))
    preload(N)
    cfg = {"amqp": {"url": AMQP}, "mysql": {"url": f"mysql://sidecar:sidecar@127.0.0.1:{PORT}/app"},
           "http": {"listen": "off"}, "log": {"level": "warn"},
           "relay": {"exchange": ex, "source": source, "batch": 500, "worker_id": "bench"}}
    d = tempfile.mkdtemp(prefix="sc-binlog-bench-")
    path = os.path.join(d, "r.json")
    json.dump(cfg, open(path, "w"))
    c0, w0, t0 = cpu_s(), writes(), time.time()
    p = subprocess.Popen([SIDECAR, "relay", "-c", path], stderr=open(os.path.join(d, "log"), "w"))
    while depth(ch, queue) < N and time.time() - t0 < 600:
        time.sleep(0.02)
    t1, c1, w1 = time.time(), cpu_s(), writes()
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


results = []
pub = []
for s in ("binlog", "poll", "pub", "binlog", "pub"):
    if s == "pub":
        pub.append(publisher())
    else:
        results.append(leg(s))
for r in results:
    print(f"{r['source']:6} {r['events']:6d} events in {r['s']:6.2f} s: {r['ev_s']:8.0f} ev/s, "
          f"mariadbd {r['db_cpu_ms_per_ev']:.4f} ms CPU/event (target binlog <= 0.02), "
          f"{r['rows_written_per_ev']:.4f} rows written/event beyond the producer's")
b = [r["ev_s"] for r in results if r["source"] == "binlog"]
print(f"binlog / poll: {min(b) / results[1]['ev_s']:.2f}-{max(b) / results[1]['ev_s']:.2f}")
print(f"C publisher with confirms: {', '.join(f'{p:.0f}' for p in pub)} ev/s; binlog / publisher: "
      f"{min(b) / max(pub):.2f}-{max(b) / min(pub):.2f} (target >= 0.85)")
sys.exit(0 if all(r["events"] >= N for r in results) else 1)
