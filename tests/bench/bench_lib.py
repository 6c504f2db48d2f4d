"""What the benchmark scripts (bench.py, consumed_bench.py, relay_bench.py,
binlog_bench.py)
share: the servers tests/bench/run started, the database and broker helpers,
reading a process's own /metrics counters (polling them costs the database
nothing), its memory, and the end-to-end latency legs."""
import calendar
import json
import os
import re
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
import uuid

import pika
import pymysql

BUILD = os.environ["BENCH_BUILD"]
AMQP = os.environ["SC_TEST_AMQP_URL"]
MYSQL = os.environ["SC_TEST_MYSQL_URL"]
SOCK = os.environ["SC_TEST_MYSQL_SOCKET"]
SIDECAR = f"{BUILD}/sidecar/sidecar"
HANDLER = f"{BUILD}/handlers/notification_job/notification_job.so"
EXCHANGE = "bench-outbox"
PAYLOAD = '{"orderId":12345,"status":"ACCEPTED","amount":19.99,"tenantId":"bench"}'


def q(sql, args=None):
    with pymysql.connect(unix_socket=SOCK, user="root", database="app", autocommit=True) as c, c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def delete_queue(name):
    c = pika.BlockingConnection(pika.URLParameters(AMQP))
    c.channel().queue_delete(name)
    c.close()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def metric_sum(port, pattern):
    """The sum of the /metrics samples whose line matches pattern (a regex
    with one group, the value, anchored per line); 0 while unreachable."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return 0
    return sum(int(v) for v in re.findall(pattern, text, re.M))


def handled(port, consumer):
    """Deliveries the consumer has settled, every outcome."""
    return metric_sum(port, r'^sidecar_messages_total\{consumer="%s",outcome="[^"]*"\} (\d+)$' % re.escape(consumer))


def status_kib(pid, field):
    """A memory line of /proc/PID/status (VmRSS, VmHWM) in KiB, 0 once gone."""
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def set_pool(size):
    """Resizes InnoDB's buffer pool (online, in chunks) and waits until it is
    done; returns the size before."""
    before = int(q("SELECT @@innodb_buffer_pool_size")[0][0])
    if before != size:
        q(f"SET GLOBAL innodb_buffer_pool_size = {size}")
        end = time.time() + 60
        while time.time() < end and int(q("SELECT @@innodb_buffer_pool_size")[0][0]) != size:
            time.sleep(0.5)
        time.sleep(2)  # the resize status settles after the variable
    return before


def v7_id_sql(base_ms, suffix="seq"):
    """SQL for a UUIDv7-shaped id from MariaDB's sequence column `seq`: a
    48-bit millisecond prefix base_ms + seq (time-ordered, as the producer
    helper makes them), then the version and variant nibbles, then `suffix`
    in hex (unique per row)."""
    return ("CONCAT(LEFT(LPAD(LOWER(HEX(%d + seq)), 12, '0'), 8), '-',"
            " RIGHT(LPAD(LOWER(HEX(%d + seq)), 12, '0'), 4), '-7000-8000-',"
            " LPAD(LOWER(HEX(%s)), 12, '0'))") % (base_ms, base_ms, suffix)


TCK = os.sysconf("SC_CLK_TCK")


def pids_of(name):
    out = subprocess.run(["pgrep", "-f", name], capture_output=True, text=True).stdout.split()
    return [int(p) for p in out]


def beam_pids():
    """The broker's Erlang VM: the beam.smp whose environment names our node."""
    out = []
    for p in pids_of("beam.smp"):
        try:
            if ("RABBITMQ_NODENAME=" + os.environ["SC_TEST_RABBIT_NODE"]).encode() in open(f"/proc/{p}/environ", "rb").read():
                out.append(p)
        except OSError:
            pass
    return out


SERVER_PIDS = {"mariadbd": pids_of("mariadbd --no-defaults --datadir=" + os.environ["SC_TEST_DIR"]),
               "rabbitmq": beam_pids()}


def cpu(pids):
    t = 0
    for p in pids:
        try:
            f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
            t += int(f[11]) + int(f[12])
        except (OSError, IndexError):
            pass
    return t / TCK


def wait_ready(port, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def parse_time(s):
    """RFC 3339 UTC with microseconds (the log's `time`) -> epoch seconds."""
    base, frac = s.rstrip("Z").split(".")
    return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + int(frac.ljust(6, "0")[:6]) / 1e6


def e2e_latency(rate, seconds, relay_cfg=None, consumer_cfg=None, sock=None, mysql=None, relay_mysql=None,
                before=None):
    """Producer COMMIT -> consumer COMMIT for every event: rows committed one
    per transaction at `rate` (threads on the unix socket, each paced), a
    relay and a consumer (the sample handler) with the default config plus
    the given keys. The consumer's `applied` line is written after its
    COMMIT; its `time` minus the moment the producer's COMMIT returned is
    the latency. sock and mysql name another server than the bench's (the
    relay connects with relay_mysql when given); before() runs once the
    outbox is empty, before the processes start. Returns {p50_ms, p99_ms,
    max_ms, events}."""
    sock, mysql = sock or SOCK, mysql or MYSQL
    with pymysql.connect(unix_socket=sock, user="root", database="app", autocommit=True) as c, c.cursor() as cur:
        cur.execute("TRUNCATE TABLE outbox_event")
    if before:
        before()
    d = tempfile.mkdtemp(prefix="bench-e2e-")
    name = "bench-e2e-" + uuid.uuid4().hex[:6]
    rport, cport = free_port(), free_port()
    relay = {"worker_id": "bench-e2e", "exchange": EXCHANGE}
    relay.update(relay_cfg or {})
    json.dump({"amqp": {"url": AMQP}, "mysql": {"url": relay_mysql or mysql}, "http": {"listen": f"127.0.0.1:{rport}"},
               "log": {"level": "warn"}, "relay": relay}, open(os.path.join(d, "relay.json"), "w"))
    cons = {"name": name, "queue": name, "bindings": [{"exchange": EXCHANGE, "routing_key": "#"}],
            "handler": HANDLER}
    cons.update(consumer_cfg or {})
    json.dump({"amqp": {"url": AMQP}, "mysql": {"url": mysql}, "http": {"listen": f"127.0.0.1:{cport}"},
               "log": {"level": "info"}, "consumers": [cons]}, open(os.path.join(d, "consume.json"), "w"))
    clog = os.path.join(d, "consume.log")
    pc = subprocess.Popen([SIDECAR, "consume", "-c", os.path.join(d, "consume.json")], stderr=open(clog, "w"))
    pr = subprocess.Popen([SIDECAR, "relay", "-c", os.path.join(d, "relay.json")],
                          stderr=open(os.path.join(d, "relay.log"), "w"))
    ready = wait_ready(cport) and wait_ready(rport)
    committed = {}
    threads = max(1, int(rate // 250) + 1)
    n_each = int(rate * seconds / threads)

    def produce(k):
        c = pymysql.connect(unix_socket=sock, user="root", database="app", autocommit=False)
        cur = c.cursor()
        t0 = time.time() + k / rate
        for i in range(n_each):
            due = t0 + i * threads / rate
            wait = due - time.time()
            if wait > 0:
                time.sleep(wait)
            eid = str(uuid.uuid4())
            cur.execute("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version,"
                        " payload, status, created_at) VALUES (%s, 'ORDER', %s, 'ORDER_ACCEPTED', 1, %s, 'PENDING',"
                        " UTC_TIMESTAMP(6))", (eid, str(k * n_each + i + 1), PAYLOAD))
            c.commit()
            committed[eid] = time.time()
        c.close()
    if ready:
        ts = [threading.Thread(target=produce, args=(k,)) for k in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    total = threads * n_each

    def applied():
        out = {}
        try:
            for line in open(clog):
                if '"outcome":"applied"' in line:
                    l_ = json.loads(line)
                    out[l_["event_id"]] = parse_time(l_["time"])
        except OSError:
            pass
        return out
    end = time.time() + 30
    got = applied()
    while ready and len(got) < total and time.time() < end:
        time.sleep(0.5)  # the log file, not the database: polling costs the servers nothing
        got = applied()
    for p_ in (pr, pc):
        p_.terminate()
        p_.wait()
    delete_queue(name)
    lat = sorted((got[e] - t) * 1000 for e, t in committed.items() if e in got)
    if not lat:
        return {"p50_ms": 0, "p99_ms": 0, "max_ms": 0, "events": 0, "of": total}
    pick = lambda x: lat[min(len(lat) - 1, int(round(x / 100 * (len(lat) - 1))))]
    return {"p50_ms": round(pick(50), 1), "p99_ms": round(pick(99), 1), "max_ms": round(lat[-1], 1),
            "events": len(lat), "of": total}
