"""What the benchmark scripts (bench.py, consumed_bench.py, relay_bench.py)
share: the servers tests/bench/run started, the database and broker helpers,
reading a process's own /metrics counters (polling them costs the database
nothing) and its memory."""
import os
import re
import socket
import subprocess
import time
import urllib.request

import pika
import pymysql

BUILD = os.environ["BENCH_BUILD"]
AMQP = os.environ["SC_TEST_AMQP_URL"]
MYSQL = os.environ["SC_TEST_MYSQL_URL"]
SOCK = os.environ["SC_TEST_MYSQL_SOCKET"]
SIDECAR = f"{BUILD}/sidecar/sidecar"
HANDLER = f"{BUILD}/handlers/notification_job/notification_job.so"


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
