"""Shared pieces of the cluster fault tests: the integration harness pointed
at the clusters tests/cluster/servers started (SC_CLUSTER_* env), plus node
kills that prove the node really died."""

import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import *  # noqa: E402,F401,F403
import harness  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SERVERS = os.path.join(ROOT, "tests", "cluster", "servers")
CDIR = os.environ["SC_CLUSTER_DIR"]
MYSQL_CONSUMER = os.environ["SC_CLUSTER_MYSQL_CONSUMER_URLS"].split(",")
MYSQL_RELAY = os.environ["SC_CLUSTER_MYSQL_RELAY_URLS"].split(",")
AMQP = os.environ["SC_CLUSTER_AMQP_URLS"].split(",")


def servers(*args):
    r = subprocess.run([SERVERS, *args, CDIR], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        diag(f"servers {' '.join(args)} failed: {r.stderr[-2000:]}")
    return r


def kill(kind, n):
    """SIGKILLs node n (kind mysql|rabbit); ok() that it really died."""
    r = servers("kill-" + kind, str(n))
    ok(r.returncode == 0 and r.stdout.strip().isdigit(),
       f"{kind} node {n} killed with SIGKILL (pid {r.stdout.strip()}) and gone", detail=r.stderr)


def restart(kind, n):
    r = servers("start-" + kind, str(n))
    ok(r.returncode == 0, f"{kind} node {n} restarted and back in the cluster", detail=r.stderr)


def node_query(port, sql, args=None):
    import pymysql
    with pymysql.connect(host="127.0.0.1", port=port, user="sidecar", password="sidecar",
                         database="app", autocommit=True) as c, c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def node_root_query(i, sql):
    """root on Galera node i (1..3) over its socket, autocommit."""
    import pymysql
    with pymysql.connect(unix_socket=os.path.join(CDIR, f"galera{i}", "mysqld.sock"), user="root",
                         database="app", autocommit=True) as c, c.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()


def configure(proc_obj, mysql_urls, amqp_urls, log_level="debug"):
    """Points a harness Sidecar/Relay at cluster nodes and rewrites its config."""
    proc_obj.config["mysql"]["url"] = mysql_urls
    proc_obj.config["amqp"]["url"] = amqp_urls
    proc_obj.config["log"] = {"level": log_level}
    with open(proc_obj.config_path, "w") as f:
        json.dump(proc_obj.config, f)
    return proc_obj


def connects(p, server):
    """The nodes p's log says it connected to, in order: [(index, endpoint)]."""
    out = []
    for l in p.lines():
        m = re.match(server + r": (?:.*: )?connected to node (\d+) of \d+ \(([^)]*)\)", l.get("msg", ""))
        if m:
            out.append((int(m.group(1)), m.group(2)))
    return out


def insert_outbox(n, event_type="ORDER_ACCEPTED"):
    """n PENDING rows in one transaction; their ids."""
    ids = [str(uuid.uuid4()) for _ in range(n)]
    with harness.admin_db() as c, c.cursor() as cur:
        cur.execute("BEGIN")
        cur.executemany(
            "INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version,"
            " payload, status, created_at) VALUES (%s, 'ORDER', %s, %s, 1, %s, 'PENDING', UTC_TIMESTAMP(6))",
            [(eid, str(7000 + i), event_type, json.dumps({"orderId": 7000 + i})) for i, eid in enumerate(ids)])
        cur.execute("COMMIT")
    return ids


def quorum_queue(exchange):
    """A durable quorum queue bound to exchange with '#'."""
    q = "q-" + suffix()
    conn = amqp()
    ch = conn.channel()
    ch.exchange_declare(exchange, "topic", durable=True)
    ch.queue_declare(q, durable=True, arguments={"x-queue-type": "quorum"})
    ch.queue_bind(q, exchange, "#")
    conn.close()
    return q


class Publisher(threading.Thread):
    """Publishes events with confirms, paced, retrying a publish whose
    connection failed (the broker decides; a repeat is fine, a loss is not)."""

    def __init__(self, exchange, events, pace_s):
        super().__init__(daemon=True)
        self.exchange, self.events, self.pace_s = exchange, events, pace_s
        self.sent = 0
        self.error = None

    def run(self):
        i = 0
        while i < len(self.events):
            try:
                conn = amqp()
                ch = conn.channel()
                ch.confirm_delivery()
                while i < len(self.events):
                    eid, subject = self.events[i]
                    publish(ch, self.exchange, "ORDER_ACCEPTED", event_body(eid, subject=subject), message_id=eid)
                    i += 1
                    self.sent = i
                    if self.pace_s:
                        time.sleep(self.pace_s)
                conn.close()
            except Exception as e:  # reconnect and go on
                self.error = repr(e)
                time.sleep(0.5)


def final_counters(p, key):
    """The relay's 'stopped: published=... ' counters from its last line."""
    for l in reversed(p.lines()):
        m = re.search(r"stopped: (.*)", l.get("msg", ""))
        if m:
            return dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", m.group(1))).get(key)
    return None
