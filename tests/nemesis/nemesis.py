#!/usr/bin/python3
"""The nemesis: the whole chain as users deploy it, random faults from a
printed seed, then heal, drain and check every event by its id.

    tests/nemesis/run [SECONDS] [--seed N] [--cluster]
    tests/nemesis/run --explain EVENT_ID [--dir RUN_DIR]

Run through tests/nemesis/run, which builds, starts the servers on the
nemesis' own ports and passes their environment. What runs:

  producers   examples/order-producer (the producer library) in chunks, and
              plain SQL from Python (the way a Java or Go service would),
              both through a TCP proxy in front of the database; a failed
              COMMIT is UNKNOWN and is reconciled by (tenant, request id)
  relays      two `sidecar relay`, worker ids nem-relay-1 and nem-relay-2
  updates     plain SQL again: later versions of committed orders
              (ORDER_UPDATED, version n+1, the order row and its outbox row in
              one transaction), so an aggregate has a stream of events
  relays      both with relay.ordering per_aggregate; on a single node,
              relay.source "binlog" in half the runs (odd seeds, or
              NEMESIS_RELAY_SOURCE=poll|binlog): one active by the
              checkpoint's lease, the other standing by; published then
              means confirmed into the audit queue, as rows stay PENDING
  consumers   two `sidecar consume`, each with three consumers in one config:
              nem-jobs (the C sample handler, notification_job) and
              nem-effects (sql.so appending to nemesis_effect, which has no
              unique key: a doubled effect is two rows); one classic queue
              and one quorum queue (both quorum with --cluster, where a
              classic queue dies with its node); workers 2; and nem-ordered,
              an ordered consumer (key subject, 2 partitions: single active
              consumer queues, the other process a hot standby) appending
              every version of every order to nemesis_effect: the checker
              wants each order's effects in version order
  audit       a queue bound to the exchange with '#': every copy the relays
              got confirmed, with the time it was seen

Everything writes into the run folder (.local/nemesis/runs/..., the latest
linked as .local/nemesis/last): faults.jsonl, producer.jsonl, audit.jsonl,
logs/<process>.runN.log, rows.json (the tables at the end), dlq.json,
summary.json. --explain reads them.

Prints TAP lines (one per check) and ends with
    nemesis: orders=N lost=L doubled=D stuck=S dead_lettered=X repeats=R faults=F
exit 0 only when L = D = S = X = 0, R > 0, F > 0 and every check passed."""

import argparse
import calendar
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import traceback
import uuid

import pika
import pymysql

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxy import Proxy  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
EXCHANGE = "nem-orders"
TENANT = "nem"
UNORDERED = ("nem-jobs", "nem-effects")   # bound to ORDER_ACCEPTED only
ORDERED = "nem-ordered"                      # every event of an order, in order
CONSUMERS = UNORDERED + (ORDERED,)
ORDERED_PARTITIONS = 2
UPDATE_SHARE = 0.5   # updates per new order, on average
AUDIT_QUEUE = "nem-audit"
HEARTBEAT_S = 3
LEASE_MS = 3000
RETRY_DELAYS_MS = [500, 2000]
DRAIN_S = float(os.environ.get("NEMESIS_DRAIN_S", "240"))
RATE = float(os.environ.get("NEMESIS_RATE", "6"))  # orders per second, both producers together
RELAY_SOURCE = "poll"  # set by main(): "poll" or "binlog"

T0 = time.time()
RUN_DIR = None
_out_lock = threading.Lock()


def now():
    return time.time()


def iso(t):
    return time.strftime("%H:%M:%S", time.gmtime(t)) + f".{int((t % 1) * 1000):03d}"


def parse_iso(s):
    """'2026-01-02T03:04:05.123456Z' -> epoch seconds."""
    try:
        base, frac = s.rstrip("Z").split(".")
        return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + float("0." + frac)
    except (ValueError, AttributeError):
        return 0.0


def say(msg):
    with _out_lock:
        print(f"# [{now() - T0:7.1f}s] {msg}", flush=True)


class JsonlWriter:
    def __init__(self, path):
        self.f = open(path, "a")
        self.lock = threading.Lock()

    def write(self, obj):
        with self.lock:
            self.f.write(json.dumps(obj) + "\n")
            self.f.flush()


# ---- the servers -------------------------------------------------------------

class Topology:
    """Where the servers are and how to break them. Single node: the
    tests/servers pair; --cluster: tests/cluster/servers' three and three."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.dir = os.environ["NEMESIS_SERVERS_DIR"]
        if cluster:
            mbase = int(os.environ["SC_CLUSTER_MYSQL_BASE"])
            abase = int(os.environ["SC_CLUSTER_AMQP_BASE"])
            cname = os.environ["SC_CLUSTER_NAME"]
            self.mysql = [{"port": mbase + i, "socket": os.path.join(self.dir, f"galera{i}", "mysqld.sock"),
                           "errlog": os.path.join(self.dir, f"galera{i}", "error.log"),
                           "pidfile": os.path.join(self.dir, f"galera{i}", "mysqld.pid")} for i in (1, 2, 3)]
            self.amqp = [{"port": abase + i, "node": f"{cname}-{i}@localhost",
                          "home": os.environ["SC_CLUSTER_RABBIT_HOME"]} for i in (1, 2, 3)]
            self.script = os.path.join(ROOT, "tests", "cluster", "servers")
        else:
            self.mysql = [{"port": int(os.environ["SC_TEST_MYSQL_PORT"]),
                           "socket": os.environ["SC_TEST_MYSQL_SOCKET"],
                           "errlog": os.path.join(self.dir, "mysql", "error.log"),
                           "pidfile": os.path.join(self.dir, "mysql", "mysqld.pid")}]
            self.amqp = [{"port": int(os.environ["SC_TEST_AMQP_PORT"]), "node": os.environ["SC_TEST_RABBIT_NODE"],
                          "home": os.environ["SC_TEST_RABBIT_HOME"]}]
            self.script = os.path.join(ROOT, "tests", "servers")
        self.down_db = set()      # node indexes a fault has taken away
        self.down_amqp = set()

    def servers(self, *args, timeout=300):
        r = subprocess.run([self.script, *args, self.dir], capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            say(f"servers {' '.join(args)}: rc {r.returncode}: {r.stderr.strip()[-400:]}")
        return r.returncode == 0

    def root(self, i=None, timeout=10):
        """root over a node's socket (the first node that answers when i is None)."""
        order = [i] if i is not None else [k for k in range(len(self.mysql)) if k not in self.down_db] + \
            list(range(len(self.mysql)))
        err = None
        for k in order:
            try:
                return pymysql.connect(unix_socket=self.mysql[k]["socket"], user="root", database="app",
                                       autocommit=True, connect_timeout=5, read_timeout=timeout,
                                       write_timeout=timeout)
            except pymysql.err.MySQLError as e:
                err = e
        raise err

    def sql(self, stmt, args=None, i=None, timeout=30):
        with self.root(i, timeout) as c, c.cursor() as cur:
            cur.execute(stmt, args)
            return cur.fetchall()

    def rabbitmqctl(self, i, *args, timeout=90):
        a = self.amqp[i]
        env = dict(os.environ, HOME=a["home"])
        return subprocess.run(["/usr/lib/rabbitmq/bin/rabbitmqctl", "-n", a["node"], "-q", *args], env=env,
                              capture_output=True, text=True, timeout=timeout)

    def amqp_conn(self):
        err = None
        order = [k for k in range(len(self.amqp)) if k not in self.down_amqp] + list(range(len(self.amqp)))
        for k in order:
            try:
                p = pika.ConnectionParameters(host="127.0.0.1", port=self.amqp[k]["port"],
                                              credentials=pika.PlainCredentials("guest", "guest"),
                                              heartbeat=30, blocked_connection_timeout=30,
                                              socket_timeout=10, connection_attempts=1)
                return pika.BlockingConnection(p)
            except Exception as e:  # noqa: BLE001 - any failure: next node
                err = e
        raise err

    def db_ready(self, i):
        try:
            if not self.cluster:
                self.sql("SELECT 1", i=i)
                return True
            rows = self.sql("SHOW STATUS WHERE Variable_name IN ('wsrep_ready', 'wsrep_cluster_size',"
                            " 'wsrep_cluster_status', 'wsrep_local_state_comment')", i=i)
            st = dict(rows)
            return (st.get("wsrep_ready") == "ON" and st.get("wsrep_cluster_size") == "3"
                    and st.get("wsrep_cluster_status") == "Primary"
                    and st.get("wsrep_local_state_comment") == "Synced")
        except Exception:  # noqa: BLE001
            return False

    def db_settled(self, timeout=90):
        """Every node ready on three checks in a row, 2 s apart. A node back
        from isolation reads ready at once, then suspects its peers and
        leaves the primary component seconds later (evs.suspect_timeout): a
        fault that took another node down in that window left the whole
        cluster non-primary, with no node to start it again."""
        if not self.cluster:
            return self.db_ready(0)
        end, streak = now() + timeout, 0
        while now() < end:
            streak = streak + 1 if all(self.db_ready(i) for i in range(len(self.mysql))) else 0
            if streak >= 3:
                return True
            time.sleep(2)
        return False

    def bootstrap_if_no_primary(self):
        """Nodes running, none in a primary component (what a lost quorum
        leaves): the most advanced one (highest wsrep_last_committed) is made
        the primary component again with pc.bootstrap, as an operator does."""
        seen = {}
        for i in range(len(self.mysql)):
            try:
                st = dict(self.sql("SHOW STATUS WHERE Variable_name IN ('wsrep_cluster_status',"
                                   " 'wsrep_last_committed')", i=i, timeout=5))
            except Exception:  # noqa: BLE001
                continue
            if st.get("wsrep_cluster_status") == "Primary":
                return None
            seen[i] = int(st.get("wsrep_last_committed") or 0)
        if not seen:
            return None
        i = max(seen, key=lambda k: seen[k])
        self.sql("SET GLOBAL wsrep_provider_options = 'pc.bootstrap=YES'", i=i)
        return i

    def recoveries(self):
        n = 0
        for m in self.mysql:
            # recover.log: the --wsrep-recover run of a bootstrap after every
            # node crashed, where that node's InnoDB recovery happens
            for path in (m["errlog"], os.path.join(os.path.dirname(m["errlog"]), "recover.log")):
                try:
                    with open(path, errors="replace") as f:
                        n += sum(1 for line in f if "Starting crash recovery" in line)
                except OSError:
                    pass
        return n


def queue_messages(topo, queue):
    """Ready messages in queue, or None when it does not exist (or the
    broker cannot be asked)."""
    try:
        c = topo.amqp_conn()
    except Exception:  # noqa: BLE001
        return None
    try:
        return c.channel().queue_declare(queue, passive=True).method.message_count
    except Exception:  # noqa: BLE001
        return None
    finally:
        try:
            c.close()
        except Exception:  # noqa: BLE001
            pass


def queue_names(cluster):
    out = []
    for c in UNORDERED:
        out.append(c)
        out += [f"{c}.retry.{d}ms" for d in RETRY_DELAYS_MS]
        out.append(c + ".dlq")
    # an ordered consumer retries in place: no delay queues
    out += [f"{ORDERED}.p{i}" for i in range(ORDERED_PARTITIONS)] + [ORDERED + ".dlq"]
    return out


# ---- the sidecar processes ---------------------------------------------------

class Proc:
    def __init__(self, name, kind, config):
        self.name, self.kind = name, kind
        self.config_path = os.path.join(RUN_DIR, "configs", name + ".json")
        with open(self.config_path, "w") as f:
            json.dump(config, f, indent=1)
        self.p = None
        self.runs = 0
        self.lock = threading.RLock()
        self.expected_down = False  # a fault (or the end) has it stopped or killed
        self.self_exits = []        # (time, rc, log)
        self.term_rcs = []

    def log_path(self, run):
        return os.path.join(RUN_DIR, "logs", f"{self.name}.run{run}.log")

    def start(self):
        with self.lock:
            self.runs += 1
            env = dict(os.environ)
            for k in ("SIDECAR_FAULT", "SIDECAR_FAULT_PAUSE_MS", "SIDECAR_AMQP_URL", "SIDECAR_MYSQL_URL"):
                env.pop(k, None)
            out = open(self.log_path(self.runs), "w")
            self.p = subprocess.Popen([os.environ["SIDECAR_BIN"], self.kind, "-c", self.config_path],
                                      stdout=out, stderr=subprocess.STDOUT, env=env)
            out.close()
            self.expected_down = False

    def alive(self):
        return self.p is not None and self.p.poll() is None

    def signal(self, sig):
        with self.lock:
            if self.alive():
                os.kill(self.p.pid, sig)
                return True
            return False

    def kill9(self):
        with self.lock:
            self.expected_down = True
            if self.alive():
                os.kill(self.p.pid, signal.SIGKILL)
                self.p.wait(30)

    def term(self, timeout=45):
        with self.lock:
            self.expected_down = True
            if not self.alive():
                return self.p.returncode if self.p else None
            os.kill(self.p.pid, signal.SIGCONT)
            os.kill(self.p.pid, signal.SIGTERM)
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.p.pid, signal.SIGKILL)
            self.p.wait(30)
            rc = None
        self.term_rcs.append(rc)
        return rc

    def check_exit(self):
        """Restarts a process that exited on its own (recorded: the daemon
        must never exit because a server went away)."""
        with self.lock:
            if self.p is None or self.expected_down or self.p.poll() is None:
                return
            rc = self.p.returncode
            tail = ""
            try:
                tail = open(self.log_path(self.runs)).read()[-1500:]
            except OSError:
                pass
            self.self_exits.append((now(), rc, tail))
            say(f"{self.name} exited on its own with status {rc}; restarted")
            self.start()


def consumer_config(topo, name, urls_mysql, urls_amqp, cluster):
    jobs = {"name": "nem-jobs", "queue": "nem-jobs",
            "bindings": [{"exchange": EXCHANGE, "routing_key": "ORDER_ACCEPTED"}],
            "handler": os.environ["SC_HANDLER"],
            "queue_type": "quorum" if cluster else "classic",
            "prefetch": 32, "batch_max": 16, "workers": 2,
            "retry_delays_ms": RETRY_DELAYS_MS}
    effects = {"name": "nem-effects", "queue": "nem-effects",
               "bindings": [{"exchange": EXCHANGE, "routing_key": "ORDER_ACCEPTED"}],
               "handler": os.environ["SC_SQL_HANDLER"],
               "handler_config": {"events": {"ORDER_ACCEPTED": [
                   {"sql": "INSERT INTO nemesis_effect (consumer_name, event_id, order_id, created_at)"
                           " VALUES ('nem-effects', ?, ?, UTC_TIMESTAMP(6))",
                    "params": ["id", "subject:int"]}]},
                   "other_events": "ignore"},
               "queue_type": "quorum",
               "prefetch": 32, "batch_max": 16, "workers": 2,
               "retry_delays_ms": RETRY_DELAYS_MS}
    ordered = {"name": ORDERED, "queue": ORDERED,
               "bindings": [{"exchange": EXCHANGE, "routing_key": "ORDER_ACCEPTED"},
                            {"exchange": EXCHANGE, "routing_key": "ORDER_UPDATED"}],
               "handler": os.environ["SC_SQL_HANDLER"],
               "handler_config": {"events": {t: [
                   {"sql": "INSERT INTO nemesis_effect (consumer_name, event_id, order_id, event_version, created_at)"
                           f" VALUES ('{ORDERED}', ?, ?, ?, UTC_TIMESTAMP(6))",
                    "params": ["id", "subject:int", "eventversion"]}] for t in ("ORDER_ACCEPTED", "ORDER_UPDATED")},
                   "other_events": "ignore"},
               "queue_type": "quorum" if cluster else "classic",
               "ordering": {"key": "subject", "partitions": ORDERED_PARTITIONS, "on_dead_letter": "hold"},
               "prefetch": 32, "batch_max": 16, "workers": 2,
               "retry_delays_ms": RETRY_DELAYS_MS}
    return {"amqp": {"url": urls_amqp, "heartbeat_s": HEARTBEAT_S},
            "mysql": {"url": urls_mysql, "lock_wait_timeout_s": HEARTBEAT_S},
            "http": {"listen": "127.0.0.1:0"},
            # debug: the "received" line of every delivery, with its tag and
            # redelivered flag, is the consumer's side of --explain
            "log": {"level": "debug"},
            "consumers": [jobs, effects, ordered]}


def relay_config(name, urls_mysql, urls_amqp, source):
    return {"amqp": {"url": urls_amqp, "heartbeat_s": HEARTBEAT_S},
            "mysql": {"url": urls_mysql, "lock_wait_timeout_s": HEARTBEAT_S},
            "http": {"listen": "127.0.0.1:0"},
            "log": {"level": "info"},
            "relay": {"worker_id": name.replace("relay", "nem-relay"), "exchange": EXCHANGE, "batch": 50,
                      "ordering": "per_aggregate", "source": source,
                      "lease_ms": LEASE_MS, "poll_ms": 100, "confirm_timeout_ms": LEASE_MS // 3}}


# ---- the producers -----------------------------------------------------------

class Producers:
    """Both producers. Every request ends in producer.jsonl with its final
    outcome: committed / already_accepted (with the event id the database
    holds), or failed / abandoned (never known to have committed)."""

    def __init__(self, topo, db_proxies, rate, seed):
        self.topo = topo
        self.rng = random.Random(seed ^ 0x5EED)  # bursts: the same seed, the same bursts
        self.proxies = db_proxies
        self.rate = rate
        self.stop = threading.Event()
        self.out = JsonlWriter(os.path.join(RUN_DIR, "producer.jsonl"))
        self.records = {}        # request_id -> final record
        self.lock = threading.Lock()
        self.c_pending = {}      # request_id -> tries so far (C producer requests not settled)
        self.order_ids = []      # committed orders, the ones updates pick from
        self.updates = {}        # event_id -> final record of an update (committed or not)
        self.up_out = JsonlWriter(os.path.join(RUN_DIR, "updates.jsonl"))
        self.threads = [threading.Thread(target=self._sql_loop, name="sql-producer", daemon=True),
                        threading.Thread(target=self._c_loop, name="c-producer", daemon=True),
                        threading.Thread(target=self._update_loop, name="update-producer", daemon=True)]

    def url(self, k):
        return f"mysql://sidecar_producer:producer-secret@127.0.0.1:{self.proxies[k % len(self.proxies)].port}/app"

    def start(self):
        for t in self.threads:
            t.start()

    def record(self, rec):
        with self.lock:
            self.records[rec["request_id"]] = rec
            if rec.get("outcome") in ("committed", "already_accepted") and rec.get("order_id"):
                self.order_ids.append(rec["order_id"])
        self.out.write(rec)

    # -- later versions of committed orders: one aggregate, a stream of events.
    # This thread is the only writer of orders.version, so after an UNKNOWN
    # COMMIT the version it finds tells whether its update committed.
    def _update_loop(self):
        conn = None
        node = 0
        interval = 1.0 / (self.rate * UPDATE_SHARE)
        rng = random.Random(self.rng.random())
        while not self.stop.is_set():
            t_start = now()
            with self.lock:
                ids = list(self.order_ids[-200:])
            if ids:
                # recent orders, so several versions of one order are in flight together
                rec = {"producer": "update", "order_id": ids[rng.randrange(len(ids))], "t": t_start,
                       "attempts": 0, "unknown": 0, "history": []}
                conn, node = self._update_request(rec, conn, node)
            wait = t_start + interval - now()
            if wait > 0:
                self.stop.wait(wait)

    def _update_request(self, rec, conn, node):
        deadline = now() + 120
        hist = rec["history"]
        eid, stage, version = None, "", None
        while now() < deadline:
            conn, node = self._connection(conn, node, lambda what: hist.append([now(), what]))
            if conn is None:
                continue
            rec["attempts"] += 1
            eid = str(uuid.uuid4())
            stage = "statements"
            version = None
            try:
                with conn.cursor() as cur:
                    cur.execute("START TRANSACTION")
                    cur.execute("SELECT version FROM orders WHERE id = %s FOR UPDATE", (rec["order_id"],))
                    version = cur.fetchone()[0] + 1
                    cur.execute("UPDATE orders SET version = %s, status = 'UPDATED' WHERE id = %s",
                                (version, rec["order_id"]))
                    cur.execute("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type,"
                                " event_version, payload, status, created_at) VALUES (%s, 'ORDER', %s,"
                                " 'ORDER_UPDATED', %s, %s, 'PENDING', UTC_TIMESTAMP(6))",
                                (eid, str(rec["order_id"]), version,
                                 json.dumps({"orderId": rec["order_id"], "status": "UPDATED", "version": version})))
                    stage = "commit"
                    cur.execute("COMMIT")
                self._update_done(rec, eid, version, "committed")
                return conn, node
            except pymysql.err.MySQLError as e:
                code = e.args[0] if e.args else 0
                hist.append([now(), f"attempt {rec['attempts']}: error {code} in {stage}"])
                try:
                    conn.close()
                except Exception:  # noqa: BLE001
                    pass
                conn = None
                if stage != "commit":
                    time.sleep(0.2)
                    continue
                rec["unknown"] += 1
                found = self._update_reconcile(rec, version, deadline, node)
                if found is None:
                    break
                if found:
                    self._update_done(rec, eid, version, "committed")
                    return None, node
                self._update_done(dict(rec, history=list(hist)), eid, version, "not_committed")
                eid = None
        # no answer: if the last COMMIT did commit, its event is one no
        # record explains, and the checker says so
        self._update_done(rec, eid if stage == "commit" else None, version, "abandoned")
        return conn, node

    def _update_reconcile(self, rec, version, deadline, node):
        """True when the order is at the version the UNKNOWN COMMIT wrote
        (this thread is the only writer of versions, one request at a time).
        A causal read on Galera (wsrep_sync_wait): a node that has not
        applied the first attempt's writeset yet answered 'not committed',
        and the retry doubled the update (seen: an order read at version 1 on
        a node behind, retried, and both attempts committed a version 2)."""
        while now() < deadline:
            try:
                conn = self._connect(node)
                with conn.cursor() as cur:
                    if self.topo.cluster:
                        cur.execute("SET SESSION wsrep_sync_wait = 1")
                    cur.execute("SELECT version FROM orders WHERE id = %s", (rec["order_id"],))
                    got = cur.fetchone()[0]
                conn.close()
                rec["history"].append([now(), f"reconciled: the order is at version {got}"])
                return got == version
            except pymysql.err.MySQLError as e:
                rec["history"].append([now(), f"reconcile failed: error {e.args[0] if e.args else e}"])
                node += 1
                time.sleep(0.5)
        return None

    def _update_done(self, rec, eid, version, outcome):
        r = dict(rec, event_id=eid, version=version, outcome=outcome)
        with self.lock:
            if eid:
                self.updates[eid] = r
        self.up_out.write(r)
        return None

    # -- plain SQL, the way any language does it (docs/contract.md)
    def _connect(self, k):
        p = self.proxies[k % len(self.proxies)]
        return pymysql.connect(host="127.0.0.1", port=p.port, user="sidecar_producer", password="producer-secret",
                               database="app", autocommit=True, connect_timeout=5, read_timeout=15,
                               write_timeout=15, init_command="SET time_zone = '+00:00'")

    def _connection(self, conn, node, note):
        """conn, or a new one to node; after a failed connect (noted, 0.5 s
        later) None and the next node, for the caller to try again."""
        if conn is not None:
            return conn, node
        try:
            return self._connect(node), node
        except pymysql.err.MySQLError as e:
            note(f"connect failed: {e.args[0] if e.args else e}")
            time.sleep(0.5)
            return None, node + 1

    def _sql_loop(self):
        n = 0
        conn = None
        node = 0
        interval = 2.0 / self.rate
        while not self.stop.is_set():
            n += 1
            t_start = now()
            rec = {"producer": "sql", "request_id": f"s-{n}", "event_id": str(uuid.uuid4()), "t": t_start,
                   "attempts": 0, "unknown": 0, "reconciled": 0, "history": []}
            conn, node = self._sql_request(rec, conn, node)
            self.record(rec)
            wait = t_start + interval - now()
            if wait > 0:
                self.stop.wait(wait)
        if conn:
            try:
                conn.close()
            except Exception:  # noqa: BLE001
                pass

    def _sql_request(self, rec, conn, node):
        """One request until it is settled (bounded: 120 s). Returns the
        connection to keep and the node it is on."""
        deadline = now() + 120
        hist = rec["history"]

        def note(what):
            hist.append([now(), what])

        while now() < deadline:
            conn, node = self._connection(conn, node, note)
            if conn is None:
                continue
            rec["attempts"] += 1
            stage = "statements"
            try:
                with conn.cursor() as cur:
                    cur.execute("START TRANSACTION")
                    cur.execute("INSERT INTO orders (tenant_id, request_id, acceptance_event_id, version, status,"
                                " created_at) VALUES (%s, %s, %s, 1, 'ACCEPTED', UTC_TIMESTAMP(6))",
                                (TENANT, rec["request_id"], rec["event_id"]))
                    order_id = cur.lastrowid
                    cur.execute("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type,"
                                " event_version, payload, status, created_at) VALUES (%s, 'ORDER', %s,"
                                " 'ORDER_ACCEPTED', 1, %s, 'PENDING', UTC_TIMESTAMP(6))",
                                (rec["event_id"], str(order_id),
                                 json.dumps({"orderId": order_id, "status": "ACCEPTED", "version": 1})))
                    stage = "commit"
                    cur.execute("COMMIT")
                rec.update(outcome="committed", order_id=order_id)
                note(f"attempt {rec['attempts']}: committed (order {order_id})")
                return conn, node
            except pymysql.err.MySQLError as e:
                code = e.args[0] if e.args else 0
                unknown = stage == "commit"
                if not unknown:
                    try:
                        conn.rollback()
                    except Exception:  # noqa: BLE001 - the rollback raised: the outcome is unknown
                        unknown = True
                if not unknown:
                    note(f"attempt {rec['attempts']}: rolled back after error {code}")
                    if code != 1062:
                        time.sleep(0.2)
                        continue
                    # 1062: the request exists already (uq_orders_tenant_request): reconcile
                else:
                    rec["unknown"] += 1
                    note(f"attempt {rec['attempts']}: UNKNOWN ({stage} raised error {code})")
                try:
                    conn.close()
                except Exception:  # noqa: BLE001
                    pass
                conn = None
                found, conn, node = self._reconcile(rec, node, deadline, note)
                if found is None:
                    break
                if found:
                    rec["outcome"] = "committed" if unknown else "already_accepted"
                    return conn, node
                # not there: the retry reuses the same event id
        rec["outcome"] = "abandoned"
        note("abandoned: deadline passed without an answer")
        return conn, node

    def _reconcile(self, rec, node, deadline, note):
        """Asks the database whether the request committed. Returns (True |
        False | None when no answer came before the deadline, conn, node)."""
        while now() < deadline:
            try:
                conn = self._connect(node)
            except pymysql.err.MySQLError:
                node += 1
                time.sleep(0.5)
                continue
            try:
                with conn.cursor() as cur:
                    cur.execute("START TRANSACTION")
                    cur.execute("SELECT id, acceptance_event_id FROM orders WHERE tenant_id = %s AND request_id = %s"
                                " FOR UPDATE", (TENANT, rec["request_id"]))
                    row = cur.fetchone()
                    cur.execute("COMMIT")
                rec["reconciled"] += 1
                if row:
                    note(f"reconciled: found order {row[0]} with event {row[1]}")
                    rec["order_id"] = row[0]
                    rec["event_id"] = row[1]
                    return True, conn, node
                note("reconciled: not committed; retrying with the same event id")
                return False, conn, node
            except pymysql.err.MySQLError as e:
                note(f"reconcile failed: error {e.args[0] if e.args else e}")
                try:
                    conn.close()
                except Exception:  # noqa: BLE001
                    pass
                node += 1
                time.sleep(0.5)
        return None, None, node

    # -- the producer library, through examples/order-producer
    def _run_c(self, prefix, start, count, k, rate=None):
        env = dict(os.environ, SIDECAR_MYSQL_URL=self.url(k))
        env.pop("SIDECAR_FAULT", None)
        t = now()
        try:
            r = subprocess.run([os.environ["SC_ORDER_PRODUCER"], "--count", str(count),
                                "--rate", str(self.rate / 2 if rate is None else rate),
                                "--tenant", TENANT, "--prefix", prefix, "--start", str(start)],
                               env=env, capture_output=True, text=True, timeout=60 + count * 5)
            stdout = r.stdout
        except subprocess.TimeoutExpired as e:
            stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        got = {}
        for line in stdout.splitlines():
            if line.startswith("{"):
                try:
                    d = json.loads(line)
                    got[d["request_id"]] = d
                except (ValueError, KeyError):
                    pass
        for i in range(start, start + count):
            rid = f"{prefix}-{i}"
            d = got.get(rid)
            if d and d.get("outcome") in ("committed", "already_accepted"):
                with self.lock:
                    tries = self.c_pending.pop(rid, 0)
                self.record({"producer": "c", "request_id": rid, "event_id": d["event_id"], "t": t,
                             "outcome": d["outcome"], "order_id": d.get("order_id"), "attempts": d.get("attempts"),
                             "reconciled": d.get("reconciled"), "runs": tries + 1})
            else:
                with self.lock:
                    self.c_pending[rid] = self.c_pending.get(rid, 0) + 1
                    tries = self.c_pending[rid]
                if tries >= 8:
                    with self.lock:
                        self.c_pending.pop(rid, None)
                    self.record({"producer": "c", "request_id": rid, "event_id": d["event_id"] if d else None,
                                 "t": t, "outcome": "failed", "attempts": d.get("attempts") if d else None,
                                 "reconciled": d.get("reconciled") if d else None, "runs": tries,
                                 "last_error": d.get("last_error") if d else None})

    def rerun_pending(self, k):
        with self.lock:
            pending = list(self.c_pending)
        for rid in pending:
            prefix, i = rid.rsplit("-", 1)
            self._run_c(prefix, int(i), 1, k)

    def _c_loop(self):
        chunk = 0
        while not self.stop.is_set():
            chunk += 1
            self.rerun_pending(chunk)
            if self.rng.random() < 0.08:
                # a burst: 60 orders as fast as one connection commits them,
                # so consumers see full batches and the relay full claims
                self._run_c(f"c{chunk}", 1, 60, chunk, rate=0)
            else:
                self._run_c(f"c{chunk}", 1, 10, chunk)

    def finish(self):
        """Stops producing; settles what the C producer left unsettled
        (bounded). Returns once both producers are idle."""
        self.stop.set()
        for t in self.threads:
            t.join(180)
        for k in range(8):
            with self.lock:
                if not self.c_pending:
                    break
            self.rerun_pending(k)
        with self.lock:
            left = list(self.c_pending)
        for rid in left:
            self.record({"producer": "c", "request_id": rid, "event_id": None, "t": now(), "outcome": "failed"})


# ---- the audit queue -----------------------------------------------------------

class Audit(threading.Thread):
    """Reads every copy the relays got onto the exchange, with the time it
    was seen (at least once: its own redeliveries are marked)."""

    def __init__(self, topo):
        super().__init__(name="audit", daemon=True)
        self.topo = topo
        self.out = JsonlWriter(os.path.join(RUN_DIR, "audit.jsonl"))
        self.stop = threading.Event()
        self.seen = 0
        self.ids = set()  # every event id the broker confirmed a copy of

    def run(self):
        while not self.stop.is_set():
            try:
                c = self.topo.amqp_conn()
                ch = c.channel()
                ch.basic_qos(prefetch_count=200)
                while not self.stop.is_set():
                    m, props, body = ch.basic_get(AUDIT_QUEUE, auto_ack=False)
                    if m is None:
                        c.sleep(0.2)
                        continue
                    self.out.write({"t": now(), "event_id": props.message_id, "redelivered": m.redelivered})
                    self.ids.add(props.message_id)
                    self.seen += 1
                    ch.basic_ack(m.delivery_tag)
                c.close()
            except Exception:  # noqa: BLE001 - the broker is being broken on purpose
                self.stop.wait(1.0)

    def drain_until_empty(self, timeout=60):
        end = now() + timeout
        while now() < end:
            if queue_messages(self.topo, AUDIT_QUEUE) == 0:
                time.sleep(1.0)
                if queue_messages(self.topo, AUDIT_QUEUE) == 0:
                    break
            time.sleep(0.5)
        self.stop.set()
        self.join(15)


# ---- faults -------------------------------------------------------------------

class Nemesis:
    def __init__(self, topo, procs, db_proxies, amqp_proxies, seed, seconds):
        self.topo = topo
        self.procs = procs
        self.dbp = db_proxies
        self.amqpp = amqp_proxies
        self.rng = random.Random(seed)
        self.seconds = seconds
        self.busy = set()
        self.lock = threading.Lock()
        self.out = JsonlWriter(os.path.join(RUN_DIR, "faults.jsonl"))
        self.threads = []
        self.count = 0
        self.by_kind = {}
        self.fault_errors = []
        self.crashes = []  # (first kill, back up) of each coordinated crash
        c = topo.cluster
        self.catalog = [
            # name, weight, resources, function
            ("kill-relay", 1.0, lambda r: {self._pick(r, ["relay-1", "relay-2"])}, self.f_kill),
            ("kill-consumer", 1.5, lambda r: {self._pick(r, ["consume-1", "consume-2"])}, self.f_kill),
            ("pause-relay", 1.0, lambda r: {self._pick(r, ["relay-1", "relay-2"])}, self.f_pause_relay),
            ("pause-consumer", 1.0, lambda r: {self._pick(r, ["consume-1", "consume-2"])}, self.f_pause_consumer),
            ("kill-db-connections", 1.0, lambda r: {"db-conns"}, self.f_kill_db_conns),
            ("close-broker-connections", 1.0, lambda r: {"broker-conns"}, self.f_close_broker_conns),
            # with --cluster these take one node: kill -9 (InnoDB recovery,
            # then IST) and clean restarts of a Galera or a RabbitMQ node
            ("rabbit-node-restart" if c else "broker-restart", 0.6, lambda r: {"broker"}, self.f_broker_restart),
            ("galera-node-kill" if c else "db-crash", 0.6, lambda r: {"db"}, self.f_db_crash),
            ("galera-node-restart" if c else "db-restart", 0.4, lambda r: {"db"}, self.f_db_restart),
            # every database node kill -9'd within one second under load
            ("galera-crash-all" if c else "db-crash-all", 0.4, lambda r: {"db"}, self.f_db_crash_all),
            ("db-read-only", 0.8, lambda r: {"db"}, self.f_db_read_only),
            ("queue-deleted", 0.8, lambda r: {"*"}, self.f_queue_deleted),
            ("proxy-cut", 1.0, lambda r: {self._pick(r, ["proxy-db", "proxy-amqp"])}, self.f_proxy_cut),
            ("proxy-stall", 1.0, lambda r: {self._pick(r, ["proxy-db", "proxy-amqp"])}, self.f_proxy_stall),
            ("proxy-delay", 0.8, lambda r: {self._pick(r, ["proxy-db", "proxy-amqp"])}, self.f_proxy_delay),
            ("proxy-delay-cut", 1.0, lambda r: {self._pick(r, ["proxy-db", "proxy-amqp"])},
             self.f_proxy_delay_cut),
        ]
        if c:
            self.catalog += [
                ("galera-node-isolated", 1.0, lambda r: {"db"}, self.f_galera_isolate),
                ("rabbit-node-kill", 0.8, lambda r: {"broker"}, self.f_rabbit_kill),
            ]

        # NEMESIS_FAULTS=name,...: only those (one fault kind studied alone)
        only = [f for f in os.environ.get("NEMESIS_FAULTS", "").split(",") if f]
        if only:
            unknown = sorted(set(only) - {f[0] for f in self.catalog})
            if unknown:
                raise SystemExit(f"NEMESIS_FAULTS names no fault of this topology: {unknown}")
            self.catalog = [f for f in self.catalog if f[0] in only]

    @staticmethod
    def _pick(r, options):
        return options[r.randrange(len(options))]

    def log(self, fault, phase, **detail):
        t = now()
        self.out.write({"t": t, "elapsed": round(t - T0, 3), "fault": fault, "phase": phase, **detail})
        extra = " ".join(f"{k}={v}" for k, v in detail.items())
        say(f"fault {fault} {phase} {extra}".rstrip())

    def run(self):
        end = T0 + self.seconds
        tick = 0
        while True:
            gap = self.rng.uniform(2, 8)
            order = list(range(len(self.catalog)))
            weights = [w for _, w, _, _ in self.catalog]
            # a weighted order without replacement, decided by the seed alone
            keys = sorted(order, key=lambda i: -(self.rng.random() ** (1.0 / weights[i])))
            param_seed = self.rng.randrange(1 << 30)
            if now() + gap > end:
                break
            time.sleep(max(0.0, gap - 0.0))
            tick += 1
            for i in keys:
                name, _, res_fn, fn = self.catalog[i]
                r = random.Random(param_seed)
                res = res_fn(r)
                with self.lock:
                    if "*" in self.busy or ("*" in res and self.busy) or (res & self.busy):
                        continue
                    self.busy |= res
                t = threading.Thread(target=self._run_fault, args=(name, fn, r, res), daemon=True)
                self.threads.append(t)
                t.start()
                break

    def _run_fault(self, name, fn, r, res):
        try:
            target = next(iter(res)) if len(res) == 1 else None
            counted = fn(name, r, target)
            if counted is not False:
                with self.lock:
                    self.count += 1
                    self.by_kind[name] = self.by_kind.get(name, 0) + 1
        except Exception as e:  # noqa: BLE001 - record, never stop the run
            self.fault_errors.append(f"{name}: {e!r}")
            self.log(name, "error", error=repr(e)[:300], trace=traceback.format_exc()[-600:])
        finally:
            with self.lock:
                self.busy -= res

    def join(self, timeout=300):
        end = now() + timeout
        for t in self.threads:
            t.join(max(0.1, end - now()))

    # -- the faults (each returns False when it did not happen)
    def f_kill(self, name, r, target):
        p = self.procs[target]
        self.log(name, "start", target=target)
        p.kill9()
        time.sleep(r.uniform(0.2, 3.0))
        p.start()
        self.log(name, "end", target=target, run=p.runs)

    def _pause(self, name, target, seconds):
        p = self.procs[target]
        with p.lock:
            if not p.signal(signal.SIGSTOP):
                return False
            p.expected_down = True
        self.log(name, "start", target=target, seconds=round(seconds, 1))
        time.sleep(seconds)
        with p.lock:
            p.signal(signal.SIGCONT)
            p.expected_down = False
        self.log(name, "end", target=target)

    def f_pause_relay(self, name, r, target):
        """Past its lease, caught holding leased rows when it can be (polled
        for up to 3 s): the other relay takes the rows and publishes them
        again, and this one confirms late and must not mark them."""
        owner = target.replace("relay", "nem-relay")
        p = self.procs[target]
        held = 0
        end = now() + (3.0 if RELAY_SOURCE == "poll" else 0.0)  # binlog rows are never PUBLISHING
        while now() < end:
            try:
                n = self.topo.sql("SELECT COUNT(*) FROM outbox_event WHERE status = 'PUBLISHING' AND lease_owner = %s",
                                  (owner,), timeout=5)[0][0]
            except Exception:  # noqa: BLE001
                break
            if n:
                with p.lock:
                    if not p.signal(signal.SIGSTOP):
                        return False
                    p.expected_down = True
                held = self.topo.sql("SELECT COUNT(*) FROM outbox_event WHERE status = 'PUBLISHING'"
                                     " AND lease_owner = %s", (owner,), timeout=5)[0][0]
                break
            time.sleep(0.02)
        secs = LEASE_MS / 1000 + r.uniform(1.0, 3.0)
        if held:
            self.log(name, "start", target=target, seconds=round(secs, 1), holding_leases=held)
            time.sleep(secs)
            with p.lock:
                p.signal(signal.SIGCONT)
                p.expected_down = False
            self.log(name, "end", target=target)
            return None
        with p.lock:
            p.signal(signal.SIGCONT)  # caught between batches (or not at all): a plain pause
            p.expected_down = False
        return self._pause(name, target, secs)

    def f_pause_consumer(self, name, r, target):
        # past its heartbeat: the broker closes its connections and requeues
        return self._pause(name, target, 3 * HEARTBEAT_S + r.uniform(0.5, 3.0))

    def f_kill_db_conns(self, name, r, target):
        killed = 0
        for i in range(len(self.topo.mysql)):
            if i in self.topo.down_db:
                continue
            try:
                ids = self.topo.sql("SELECT ID FROM information_schema.PROCESSLIST WHERE USER IN"
                                    " ('sidecar_consumer', 'sidecar_relay', 'sidecar_relay_binlog')", i=i)
                for (tid,) in ids:
                    try:
                        self.topo.sql(f"KILL CONNECTION {int(tid)}", i=i)
                        killed += 1
                    except pymysql.err.MySQLError:
                        pass
            except Exception:  # noqa: BLE001
                pass
        self.log(name, "start", killed=killed)
        return killed > 0

    def f_close_broker_conns(self, name, r, target):
        i = r.randrange(len(self.topo.amqp))
        if i in self.topo.down_amqp:
            return False
        args = ["close_all_connections", "nemesis: closing every connection"]
        if self.topo.cluster:
            args = ["close_all_connections", "--global", "nemesis: closing every connection"]
        res = self.topo.rabbitmqctl(i, *args)
        self.log(name, "start", node=i + 1, rc=res.returncode)
        return res.returncode == 0

    def f_broker_restart(self, name, r, target):
        if self.topo.cluster:
            i = r.randrange(3)
            self.log(name, "start", node=i + 1)
            self.topo.down_amqp.add(i)
            self.topo.rabbitmqctl(i, "stop", timeout=120)
            time.sleep(r.uniform(0.5, 3.0))
            ok = self.topo.servers("start-rabbit", str(i + 1))
            self.topo.down_amqp.discard(i)
        else:
            self.log(name, "start")
            self.topo.down_amqp.add(0)
            ok = self.topo.servers("restart-rabbit")
            self.topo.down_amqp.discard(0)
        self.log(name, "end", ok=ok)

    def _mysql_pid(self, i):
        try:
            return int(open(self.topo.mysql[i]["pidfile"]).read().strip())
        except (OSError, ValueError):
            return None

    def _wait_gone(self, pid, timeout=120):
        end = now() + timeout
        while now() < end:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            time.sleep(0.1)
        return False

    def _all_db_ready(self):
        return self.topo.db_settled(timeout=30)

    def f_db_crash(self, name, r, target):
        i = r.randrange(len(self.topo.mysql))
        if self.topo.cluster and not self._all_db_ready():
            return False
        pid = self._mysql_pid(i)
        if not pid:
            return False
        self.log(name, "start", node=i + 1, pid=pid)
        self.topo.down_db.add(i)
        os.kill(pid, signal.SIGKILL)
        self._wait_gone(pid)
        time.sleep(r.uniform(1.0, 4.0))
        if self.topo.cluster:
            ok = self.topo.servers("start-mysql", str(i + 1))
        else:
            ok = self.topo.servers("restart-mysql")
        self.topo.down_db.discard(i)
        self.log(name, "end", node=i + 1, ok=ok)

    def f_db_crash_all(self, name, r, target):
        """kill -9 of every database node within one second, under load,
        then a restart: the single server restarted (InnoDB recovery); on
        Galera every node is down, so the cluster is bootstrapped from the
        most advanced node found by --wsrep-recover and the others join. An
        acked effect must survive: the checker finds none lost."""
        if self.topo.cluster and not self._all_db_ready():
            return False
        pids = [self._mysql_pid(i) for i in range(len(self.topo.mysql))]
        if not all(pids):
            return False
        gaps = [round(r.uniform(0.0, 0.9 / len(pids)), 3) for _ in pids]
        self.log(name, "start", pids=pids, gaps=gaps)
        t0 = now()
        for i, (pid, gap) in enumerate(zip(pids, gaps)):
            self.topo.down_db.add(i)
            os.kill(pid, signal.SIGKILL)
            time.sleep(gap)
        for pid in pids:
            self._wait_gone(pid)
        time.sleep(r.uniform(1.0, 3.0))
        if self.topo.cluster:
            ok = self.topo.servers("recover-mysql")
        else:
            ok = self.topo.servers("restart-mysql")
        self.topo.down_db.clear()
        self.crashes.append((t0, now()))
        self.log(name, "end", ok=ok, seconds=round(now() - t0, 1))

    def f_db_restart(self, name, r, target):
        i = r.randrange(len(self.topo.mysql))
        if self.topo.cluster and not self._all_db_ready():
            return False
        self.log(name, "start", node=i + 1)
        self.topo.down_db.add(i)
        if self.topo.cluster:
            pid = self._mysql_pid(i)
            if pid:
                os.kill(pid, signal.SIGTERM)
                if not self._wait_gone(pid, 120):
                    os.kill(pid, signal.SIGKILL)
                    self._wait_gone(pid)
            time.sleep(r.uniform(0.5, 2.0))
            ok = self.topo.servers("start-mysql", str(i + 1))
        else:
            ok = self.topo.servers("restart-mysql")
        self.topo.down_db.discard(i)
        self.log(name, "end", node=i + 1, ok=ok)

    def f_db_read_only(self, name, r, target):
        i = r.randrange(len(self.topo.mysql))
        secs = r.uniform(2.0, 6.0)
        self.topo.sql("SET GLOBAL read_only = 1", i=i)
        self.log(name, "start", node=i + 1, seconds=round(secs, 1))
        time.sleep(secs)
        for _ in range(30):
            try:
                self.topo.sql("SET GLOBAL read_only = 0", i=i)
                break
            except Exception:  # noqa: BLE001
                time.sleep(1)
        self.log(name, "end", node=i + 1)

    def f_queue_deleted(self, name, r, target):
        """The consumer's queue deleted under its consumers. A queue deleted
        under live publishes loses what is routed to it meanwhile, and a
        delay queue expiring into it loses its message: that is the broker's
        semantics, not the sidecar's to fix. So the relays are paused (less
        than a lease), the queue and its delay queues are let run empty, and
        only then is it deleted: what the sidecars hold (prefetched, in a
        batch) must still be settled, and the queue must come back."""
        q = UNORDERED[r.randrange(len(UNORDERED))]
        relays = [self.procs["relay-1"], self.procs["relay-2"]]
        for p in relays:
            p.signal(signal.SIGSTOP)
        try:
            time.sleep(0.3)
            names = [q] + [f"{q}.retry.{d}ms" for d in RETRY_DELAYS_MS]
            empty = False
            end = now() + 2.0
            while now() < end:
                if all(queue_messages(self.topo, n) == 0 for n in names):
                    empty = True
                    break
                time.sleep(0.2)
            if not empty:
                self.log(name, "skipped", queue=q, why="queue or its delay queues not empty")
                return False
            time.sleep(0.7)  # what the consumers hold gets settled
            c = self.topo.amqp_conn()
            try:
                c.channel().queue_delete(q)
            finally:
                c.close()
            t_del = now()
            self.log(name, "start", queue=q)
            back = False
            while now() < t_del + 20:
                if queue_messages(self.topo, q) is not None:
                    back = True
                    break
                time.sleep(0.1)
            time.sleep(0.5)  # declared, now bound
            self.log(name, "end", queue=q, declared_again=back, after_s=round(now() - t_del, 2))
        finally:
            for p in relays:
                p.signal(signal.SIGCONT)

    def _proxy(self, r, target):
        ps = self.dbp if target == "proxy-db" else self.amqpp
        i = r.randrange(len(ps))
        return i, ps[i]

    def f_proxy_cut(self, name, r, target):
        i, p = self._proxy(r, target)
        n = p.cut()
        self.log(name, "start", proxy=p.name, cut=n)
        return n > 0

    def f_proxy_stall(self, name, r, target):
        i, p = self._proxy(r, target)
        secs = r.uniform(2.0, 6.0)
        p.stall(secs)
        self.log(name, "start", proxy=p.name, seconds=round(secs, 1))
        time.sleep(secs)
        self.log(name, "end", proxy=p.name)

    def f_proxy_delay(self, name, r, target):
        i, p = self._proxy(r, target)
        secs = r.uniform(3.0, 8.0)
        d = r.uniform(0.02, 0.25)
        p.delay(d, secs)
        self.log(name, "start", proxy=p.name, seconds=round(secs, 1), delay_ms=int(d * 1000))
        time.sleep(secs)
        self.log(name, "end", proxy=p.name)

    def f_proxy_delay_cut(self, name, r, target):
        """Latency, then a partition: whatever waits in the proxy (an ack, a
        publisher confirm, a COMMIT's reply) when the cut comes is lost."""
        i, p = self._proxy(r, target)
        secs = r.uniform(1.0, 4.0)
        d = r.uniform(0.1, 0.4)
        p.delay(d, secs + 5)
        self.log(name, "start", proxy=p.name, seconds=round(secs, 1), delay_ms=int(d * 1000))
        time.sleep(secs)
        n = p.cut()
        p.clear()
        self.log(name, "end", proxy=p.name, cut=n)

    def f_galera_isolate(self, name, r, target):
        i = r.randrange(3)
        if not self._all_db_ready():
            return False
        secs = r.uniform(3.0, 8.0)
        self.topo.sql("SET GLOBAL wsrep_provider_options = 'gmcast.isolate=1'", i=i)
        self.log(name, "start", node=i + 1, seconds=round(secs, 1))
        time.sleep(secs)
        self.topo.sql("SET GLOBAL wsrep_provider_options = 'gmcast.isolate=0'", i=i)
        self.log(name, "end", node=i + 1, rejoined=self.topo.db_settled(timeout=90))

    def f_rabbit_kill(self, name, r, target):
        i = r.randrange(3)
        self.log(name, "start", node=i + 1)
        self.topo.down_amqp.add(i)
        ok = self.topo.servers("kill-rabbit", str(i + 1))
        time.sleep(r.uniform(1.0, 4.0))
        ok = self.topo.servers("start-rabbit", str(i + 1)) and ok
        self.topo.down_amqp.discard(i)
        self.log(name, "end", node=i + 1, ok=ok)


# ---- the run --------------------------------------------------------------------

def setup_schema(topo):
    topo.sql("CREATE TABLE IF NOT EXISTS nemesis_effect ("
             " id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,"
             " consumer_name VARCHAR(128) NOT NULL, event_id CHAR(36) NOT NULL, order_id BIGINT NOT NULL,"
             " event_version INT NULL,"
             " created_at DATETIME(6) NOT NULL, KEY ix_nemesis_effect_event (event_id)"
             ") ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin")
    topo.sql("GRANT SELECT, INSERT ON app.nemesis_effect TO 'sidecar_consumer'@'%'")
    c = topo.amqp_conn()
    ch = c.channel()
    ch.exchange_declare(EXCHANGE, "topic", durable=True)
    ch.queue_declare(AUDIT_QUEUE, durable=True,
                     arguments={"x-queue-type": "quorum"} if topo.cluster else None)
    ch.queue_bind(AUDIT_QUEUE, EXCHANGE, "#")
    c.close()


def wait_ready(procs, timeout=90):
    end = now() + timeout
    want = {"consume": 4, "relay": 1}
    while now() < end:
        ready = True
        for p in procs.values():
            lines = read_log(p.log_path(p.runs))
            if p.kind == "consume":
                n = sum(1 for l in lines if "consuming from" in l.get("msg", ""))
            else:
                n = sum(1 for l in lines if "publishing outbox_event" in l.get("msg", ""))
            if n < want[p.kind] or not p.alive():
                ready = False
        if ready:
            return True
        time.sleep(0.5)
    return False


def read_log(path):
    out = []
    try:
        with open(path, errors="replace") as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass
    except OSError:
        pass
    return out


def all_log_lines(run_dir):
    """[(epoch, process, run, line)] over every sidecar log of the run."""
    out = []
    d = os.path.join(run_dir, "logs")
    for fn in sorted(os.listdir(d)):
        if not fn.endswith(".log"):
            continue
        proc, run = fn[:-4].rsplit(".run", 1)
        for l in read_log(os.path.join(d, fn)):
            out.append((parse_iso(l.get("time", "")), proc, int(run), l))
    return out


def heal(topo, procs, dbp, amqpp):
    """Every fault undone: proxies forward, nothing paused, every server up
    and writable, every process running."""
    for p in dbp + amqpp:
        p.clear()
    for p in procs.values():
        if p.alive():
            p.signal(signal.SIGCONT)
    if topo.cluster:
        for i in range(3):
            if not topo.db_ready(i):
                try:
                    topo.sql("SET GLOBAL wsrep_provider_options = 'gmcast.isolate=0'", i=i)
                except Exception:  # noqa: BLE001
                    pass
        for i in range(3):
            start, end = now(), now() + 60
            while now() < end and not topo.db_ready(i):
                # not while a view change may still be under way
                if now() > start + 15 and topo.bootstrap_if_no_primary() is not None:
                    say("no Galera node in a primary component: bootstrapped the most advanced")
                time.sleep(1)
            pid = None
            try:
                pid = int(open(topo.mysql[i]["pidfile"]).read().strip())
                os.kill(pid, 0)
            except (OSError, ValueError):
                pid = None
            if not topo.db_ready(i) and pid is None:
                topo.servers("start-mysql", str(i + 1))  # only a node that is not running
        topo.db_settled(timeout=120)
        for i in range(3):
            r = topo.rabbitmqctl(i, "status", timeout=60)
            if r.returncode != 0:
                topo.servers("start-rabbit", str(i + 1))
    else:
        if not topo.db_ready(0):
            topo.servers("restart-mysql")
        topo.servers("start")  # idempotent: starts whichever is down
    for i in range(len(topo.mysql)):
        try:
            topo.sql("SET GLOBAL read_only = 0", i=i)
        except Exception as e:  # noqa: BLE001
            say(f"read_only off on node {i + 1} failed: {e!r}")
    for p in procs.values():
        p.check_exit()
        if not p.alive():
            p.start()
        p.expected_down = False


def drained(topo, audit):
    """(done, why-not) — every order published (PUBLISHED; with the binlog
    source, seen in the audit queue), claimed by both consumers, and nothing
    left in the consumers' queues and delay queues."""
    try:
        if RELAY_SOURCE == "binlog":
            seen = set(audit.ids)
            left = sum(1 for (e,) in topo.sql("SELECT event_id FROM outbox_event WHERE status <> 'FAILED'")
                       if e not in seen)
        else:
            left = topo.sql("SELECT COUNT(*) FROM outbox_event WHERE status IN ('PENDING', 'PUBLISHING')")[0][0]
        orders = topo.sql("SELECT COUNT(*) FROM orders WHERE tenant_id = %s", (TENANT,))[0][0]
        claims = topo.sql("SELECT COUNT(*) FROM orders o JOIN consumed_event c ON c.event_id = o.acceptance_event_id"
                          " WHERE o.tenant_id = %s AND c.consumer_name IN %s", (TENANT, UNORDERED))[0][0]
        events = topo.sql("SELECT COUNT(*) FROM outbox_event")[0][0]
        ordered = topo.sql("SELECT COUNT(*) FROM consumed_event WHERE consumer_name = %s", (ORDERED,))[0][0]
    except Exception as e:  # noqa: BLE001
        return False, f"database: {e!r}"
    if left:
        return False, f"{left} outbox rows not published"
    want = len(UNORDERED) * orders + events
    if claims + ordered < want:
        dead = sum(queue_messages(topo, c + ".dlq") or 0 for c in CONSUMERS)
        if claims + ordered + dead < want:
            return False, f"{claims + ordered} of {want} claims"
    for q in queue_names(topo.cluster):
        if q.endswith(".dlq"):
            continue
        n = queue_messages(topo, q)
        if n:
            return False, f"{n} messages in {q}"
    return True, ""


def drain_dlqs(topo):
    out = []
    c = topo.amqp_conn()
    ch = c.channel()
    for cons in CONSUMERS:
        while True:
            try:
                m, props, body = ch.basic_get(cons + ".dlq", auto_ack=True)
            except Exception:  # noqa: BLE001
                ch = c.channel()
                break
            if m is None:
                break
            h = props.headers or {}
            out.append({"consumer": cons, "event_id": props.message_id,
                        "reason": str(h.get("x-sidecar-reason", "")),
                        "attempts": h.get("x-sidecar-attempts"),
                        "failed_at": str(h.get("x-sidecar-failed-at", ""))})
    c.close()
    return out


def queue_depths(topo):
    """ready + unacked per queue of the run, from rabbitmqctl."""
    for i in range(len(topo.amqp)):
        r = topo.rabbitmqctl(i, "list_queues", "name", "messages_ready", "messages_unacknowledged", timeout=60)
        if r.returncode == 0:
            out = {}
            for line in r.stdout.splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[1].isdigit():
                    out[parts[0]] = (int(parts[1]), int(parts[2]))
            return out
    return None


def dump_rows(topo):
    q = topo.sql
    rows = {
        "orders": [list(r) for r in q("SELECT id, request_id, acceptance_event_id, DATE_FORMAT(created_at,"
                                      " '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ') FROM orders WHERE tenant_id = %s",
                                      (TENANT,), timeout=120)],
        "outbox": [list(r) for r in q("SELECT event_id, status, lease_owner, publish_attempts,"
                                      " DATE_FORMAT(created_at, '%Y-%m-%dT%H:%i:%s.%fZ'),"
                                      " DATE_FORMAT(published_at, '%Y-%m-%dT%H:%i:%s.%fZ'),"
                                      " aggregate_id, event_version, event_type FROM outbox_event",
                                      timeout=120)],
        "consumed": [list(r) for r in q("SELECT consumer_name, event_id, DATE_FORMAT(consumed_at,"
                                        " '%Y-%m-%dT%H:%i:%s.%fZ') FROM consumed_event", timeout=120)],
        "jobs": [list(r) for r in q("SELECT event_id, order_id, DATE_FORMAT(created_at, '%Y-%m-%dT%H:%i:%s.%fZ')"
                                    " FROM notification_job", timeout=120)],
        "effects": [list(r) for r in q("SELECT id, consumer_name, event_id, order_id,"
                                       " DATE_FORMAT(created_at, '%Y-%m-%dT%H:%i:%s.%fZ'), event_version"
                                       " FROM nemesis_effect",
                                       timeout=120)],
    }
    with open(os.path.join(RUN_DIR, "rows.json"), "w") as f:
        json.dump(rows, f)
    return rows


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, label, detail=None):
        self.n += 1
        print(("ok" if cond else "not ok") + f" {self.n} - {' '.join(str(label).split())}", flush=True)
        if not cond:
            self.failed += 1
            for line in str(detail or "").splitlines()[:30]:
                print("#   " + line, flush=True)
        return cond


def check(topo, procs, producers, nem, audit_path, rows, dlq, depths, tap, windows=True):
    """Every event by its id. Returns the summary dict and the ids per class."""
    orders = rows["orders"]
    # With the binlog source rows stay PENDING: published is a copy the
    # broker confirmed, which the audit queue saw.
    audited = set()
    if RELAY_SOURCE == "binlog":
        try:
            with open(audit_path) as f:
                audited = {json.loads(line)["event_id"] for line in f}
        except OSError:
            pass
    by_event = {}
    for oid, rid, eid, created in orders:
        by_event.setdefault(eid, []).append((oid, rid))
    outbox = {}
    event_of = {}  # event_id -> (aggregate_id, event_version)
    for eid, status, owner, attempts, created, published, agg, ver, etype in rows["outbox"]:
        outbox.setdefault(eid, []).append((status, owner, attempts))
        event_of[eid] = (agg, ver)
    updates = {e: u for e, u in producers.updates.items() if u.get("outcome") == "committed"}
    claims = {c: {} for c in CONSUMERS}
    for cname, eid, at in rows["consumed"]:
        if cname in claims:
            claims[cname][eid] = claims[cname].get(eid, 0) + 1
    jobs = {}
    for eid, oid, at in rows["jobs"]:
        jobs[eid] = jobs.get(eid, 0) + 1
    effects = {c: {} for c in CONSUMERS}
    ordered_effects = {}  # order id -> [(row id, version, event id)]
    for rid_, cname, eid, oid, at, ver in rows["effects"]:
        effects.setdefault(cname, {})[eid] = effects.setdefault(cname, {}).get(eid, 0) + 1
        if cname == ORDERED:
            ordered_effects.setdefault(oid, []).append((rid_, ver, eid))
    dead = {}
    for d in dlq:
        dead.setdefault(d["event_id"], []).append(d)
    queued = {}
    for q, (ready, unacked) in (depths or {}).items():
        if q.startswith("nem-") and q != AUDIT_QUEUE and not q.endswith(".dlq") and ready + unacked:
            queued[q] = ready + unacked

    lost, doubled, stuck, dead_ids, out_of_order = {}, {}, {}, {}, {}
    missed = {}  # event id -> the consumers that never consumed it
    for eid, os_ in list(by_event.items()) + [(e, None) for e in updates]:
        bound = CONSUMERS if os_ is not None else (ORDERED,)
        if os_ is not None and len(os_) > 1:
            doubled[eid] = f"{len(os_)} orders with one event id"
        ob = outbox.get(eid, [])
        if not ob:
            lost[eid] = "committed order without an outbox row"
            continue
        if len(ob) > 1:
            doubled[eid] = f"{len(ob)} outbox rows"
        if ob[0][0] != "PUBLISHED" and not (ob[0][0] == "PENDING" and eid in audited):
            stuck[eid] = f"outbox row {ob[0][0]} (lease owner {ob[0][1]}, {ob[0][2]} publish attempts)"
            continue
        if eid in dead:
            dead_ids[eid] = "; ".join(f"{d['consumer']}: {d['reason']}" for d in dead[eid])
        why = []
        for cname in CONSUMERS:
            n = claims[cname].get(eid, 0)
            e = jobs.get(eid, 0) if cname == "nem-jobs" else effects[cname].get(eid, 0)
            if cname not in bound:
                if n or e:
                    doubled[eid] = f"{cname} is not bound to updates but has {n} claims and {e} effects"
                continue
            if n > 1 or e > 1:
                doubled[eid] = f"{cname}: {n} consumed_event rows, {e} effect rows"
            elif n == 0 and e == 0:
                if not any(d["consumer"] == cname for d in dead.get(eid, [])):
                    why.append(f"{cname}: never consumed (no consumed_event row, no effect)")
                    missed.setdefault(eid, set()).add(cname)
            elif n != e:
                why.append(f"{cname}: {n} consumed_event rows but {e} effect rows")
        if why and eid not in doubled:
            lost[eid] = "; ".join(why)
        if len(why) != len(missed.get(eid, ())):
            missed.pop(eid, None)  # lost for another reason too
    # effects, claims or outbox rows no committed order explains
    for cname, per in effects.items():
        for eid, n in per.items():
            if eid not in by_event and eid not in updates:
                doubled[eid] = f"{cname}: {n} effect rows without a committed order or update"
    for eid in jobs:
        if eid not in by_event:
            doubled[eid] = "a notification_job without a committed order"
    for eid in outbox:
        if eid not in by_event and eid not in updates:
            doubled.setdefault(eid, "an outbox row without a committed order or update")
    # per-key order: the ordered consumer's effects of one order, in the
    # order they were written, carry increasing versions
    for oid, effs in ordered_effects.items():
        effs.sort()
        for (_, v0, e0), (_, v1, e1) in zip(effs, effs[1:]):
            if v1 is None or v0 is None or v1 <= v0:
                out_of_order[e1] = (f"{ORDERED}: order {oid} applied version {v1} after version {v0}"
                                    f" ({' '.join(str(v) for _, v, _ in effs)})")
                break
    # and the relays' side: the first copy of each event on the audit queue
    relay_order = {}
    try:
        seen_first = set()
        last = {}
        with open(audit_path) as f:
            for line in f:
                d = json.loads(line)
                e = d["event_id"]
                if e in seen_first or e not in event_of:
                    continue
                seen_first.add(e)
                agg, ver = event_of[e]
                if agg in last and ver <= last[agg]:
                    relay_order[e] = f"relays published version {ver} of order {agg} after version {last[agg]}"
                last[agg] = max(ver, last.get(agg, ver))
    except OSError:
        pass
    for e, why in relay_order.items():
        out_of_order.setdefault(e, why)
    lost_in_window, windows = deletion_windows_lost(lost, missed, audit_path) if windows else ({}, [])
    for eid, ds in dead.items():
        if eid not in by_event:
            dead_ids[eid] = "; ".join(f"{d['consumer']}: {d['reason']}" for d in ds)

    # the producers
    recs = list(producers.records.values())
    known = {r["request_id"]: r for r in recs}
    order_by_req = {rid: eid for _, rid, eid, _ in orders}
    accepted_missing = [r for r in recs if r.get("outcome") in ("committed", "already_accepted")
                        and order_by_req.get(r["request_id"]) != r.get("event_id")]
    for r in accepted_missing:
        lost[r.get("event_id") or r["request_id"]] = (f"producer {r['producer']} says request {r['request_id']}"
                                                      f" {r['outcome']} but orders holds"
                                                      f" {order_by_req.get(r['request_id'])}")
    unsettled = [r for r in recs if r.get("outcome") not in ("committed", "already_accepted")]
    unsettled += [u for u in producers.updates.values() if u.get("outcome") == "abandoned"]
    unreconciled = [r for r in unsettled if r.get("request_id") in order_by_req]
    unknown_orders = [rid for rid in order_by_req if rid not in known]
    sql_unknown = sum(r.get("unknown", 0) for r in recs if r["producer"] == "sql")
    c_reconciled = sum(1 for r in recs if r["producer"] == "c" and (r.get("reconciled") or 0) > 0)

    # what the faults did
    lines = all_log_lines(RUN_DIR)
    outcome = {}
    redelivered = 0
    lease_lost = 0
    relay_unconfirmed = 0
    for t, proc, run, l in lines:
        oc = l.get("outcome")
        if proc.startswith("consume"):
            if oc:
                outcome[oc] = outcome.get(oc, 0) + 1
            if l.get("redelivered"):
                redelivered += 1
        else:
            if oc == "lease_lost":
                lease_lost += 1
            elif oc in ("unconfirmed", "nacked", "returned"):
                relay_unconfirmed += 1
    # Coordinated crashes of every database node: the deliveries acked in
    # the second before the first kill (their effects committed, the broker
    # told to forget them: a lost effect there is lost for good) and the
    # COMMITs whose outcome the crash made unknown (never acked; settled by
    # the redelivery).
    crash_acked, crash_unknown = set(), 0
    for t0, t1 in nem.crashes:
        for t, proc, run, l in lines:
            if not proc.startswith("consume") or t is None:
                continue
            if l.get("outcome") == "applied" and t0 - 1.0 <= t <= t0 and l.get("event_id"):
                crash_acked.add((l.get("consumer"), l["event_id"]))
            elif l.get("outcome") == "unknown" and t0 <= t <= t1 + 5.0:
                crash_unknown += 1
    crash_lost = sorted({e for _, e in crash_acked if e in lost})
    copies = {}
    try:
        with open(audit_path) as f:
            for line in f:
                d = json.loads(line)
                if not d.get("redelivered"):
                    copies[d["event_id"]] = copies.get(d["event_id"], 0) + 1
    except OSError:
        pass
    republished = sum(n - 1 for n in copies.values() if n > 1)
    reclaimed = sum(max(0, a - 1) for ob in outbox.values() for (_, _, a) in ob)
    self_exits = [(p.name, t, rc) for p in procs.values() for (t, rc, _) in p.self_exits]
    bad_stops = [(p.name, p.term_rcs[-1]) for p in procs.values() if p.term_rcs and p.term_rcs[-1] != 0]

    for q, n in queued.items():
        stuck[f"queue:{q}"] = f"{n} messages left in {q}"

    summary = {
        "orders": len(by_event), "lost": len(lost), "doubled": len(doubled), "stuck": len(stuck),
        "dead_lettered": len(dead_ids), "out_of_order": len(out_of_order), "relay_out_of_order": len(relay_order),
        "updates": len(updates), "ordered_keys_with_versions": sum(1 for e in ordered_effects.values() if len(e) > 1),
        "repeats": outcome.get("duplicate", 0), "faults": nem.count,
        "faults_by_kind": nem.by_kind, "redelivered": redelivered, "consumer_unknown_commits": outcome.get("unknown", 0),
        "consumer_returned": outcome.get("returned", 0), "consumer_retried": outcome.get("retried", 0),
        "consumer_applied_lines": outcome.get("applied", 0),
        "relay_lease_lost": lease_lost, "relay_unconfirmed": relay_unconfirmed,
        "relay_republished_copies": republished, "outbox_reclaims": reclaimed,
        "producer_sql_unknown": sql_unknown, "producer_c_reconciled": c_reconciled,
        "producer_requests": len(recs), "producer_unsettled": len(unsettled),
        "producer_unreconciled": len(unreconciled), "innodb_recoveries": topo.recoveries(),
        "coordinated_crashes": len(nem.crashes), "crash_acked_in_flight": len(crash_acked),
        "crash_unknown_commits": crash_unknown, "crash_acked_lost": len(crash_lost),
        "process_self_exits": len(self_exits), "audit_copies": sum(copies.values()),
        "lost_in_deletion_window": len(lost_in_window), "queue_deletions": len(windows),
    }

    tap.ok(summary["faults"] > 0, f"faults injected: {summary['faults']} ({json.dumps(nem.by_kind, sort_keys=True)})")
    tap.ok(not nem.fault_errors, f"every fault ran ({len(nem.fault_errors)} errors)", "\n".join(nem.fault_errors))
    tap.ok(not lost,
           f"every committed order has exactly one outbox row, PUBLISHED, and exactly one consumed_event row"
           f" and one effect per consumer: lost {len(lost)}", "\n".join(f"{k}: {v}" for k, v in list(lost.items())[:20]))
    slow = [w for w in windows if w[2] is None or w[2] > QUEUE_BACK_BOUND_S]
    tap.ok(not slow, f"every deleted queue was declared again within {QUEUE_BACK_BOUND_S} s"
           f" ({len(windows)} deletions; {len(lost_in_window)} events routed while a queue was gone, the"
           f" operator's loss, counted apart)", "\n".join(str(w) for w in slow[:10]))
    tap.ok(not doubled, f"no effect twice, no effect without its order: doubled {len(doubled)}",
           "\n".join(f"{k}: {v}" for k, v in list(doubled.items())[:20]))
    tap.ok(not stuck, f"nothing stuck (outbox rows not PUBLISHED, messages left in queues or delay queues):"
           f" stuck {len(stuck)}", "\n".join(f"{k}: {v}" for k, v in list(stuck.items())[:20]))
    tap.ok(not dead_ids, f"nothing dead-lettered: {len(dead_ids)}",
           "\n".join(f"{k}: {v}" for k, v in list(dead_ids.items())[:20]))
    tap.ok(not out_of_order and summary["ordered_keys_with_versions"] > 0,
           f"per order, the relays published and {ORDERED} applied versions in order: out of order"
           f" {len(out_of_order)} ({summary['ordered_keys_with_versions']} orders with several versions,"
           f" {len(updates)} updates)", "\n".join(f"{k}: {v}" for k, v in list(out_of_order.items())[:20]))
    tap.ok(not unreconciled and not unknown_orders,
           f"the producers' UNKNOWN outcomes all reconciled ({sql_unknown} UNKNOWN COMMITs on the SQL producer,"
           f" {c_reconciled} C requests reconciled; {len(unreconciled)} committed but never learned,"
           f" {len(unknown_orders)} orders no request explains)",
           "\n".join(str(r) for r in unreconciled[:10]) + "\n" + " ".join(unknown_orders[:10]))
    tap.ok(not unsettled, f"every request settled ({len(unsettled)} gave up)",
           "\n".join(json.dumps(r)[:300] for r in unsettled[:10]))
    tap.ok(summary["repeats"] > 0, f"repeats recognised as duplicates: {summary['repeats']}"
           f" ({redelivered} redeliveries, {republished} relay republishes, {lease_lost} lease_lost,"
           f" {summary['consumer_unknown_commits']} unknown consumer COMMITs, {sql_unknown} unknown producer COMMITs,"
           f" {summary['innodb_recoveries']} InnoDB recoveries)")
    tap.ok(not crash_lost, f"every database node crashed at once {len(nem.crashes)} times: none of the"
           f" {len(crash_acked)} deliveries acked in the second before lost its effect"
           f" ({crash_unknown} COMMITs left unknown by the crashes, settled by redelivery)",
           " ".join(crash_lost[:20]))
    tap.ok(not self_exits, f"no sidecar process exited on its own ({len(self_exits)})",
           "\n".join(f"{n} at +{t - T0:.1f}s rc {rc}" for n, t, rc in self_exits))
    tap.ok(not bad_stops, f"every sidecar process stopped cleanly on SIGTERM ({bad_stops})")
    classes = {"lost": lost, "doubled": doubled, "stuck": stuck, "dead_lettered": dead_ids,
               "out_of_order": out_of_order}
    return summary, classes


# A deleted queue has no binding until it is declared again: the broker drops
# what is routed to it meanwhile (the operator's loss, not the sidecar's).
# The sidecar bounds that window; the checker holds it to the bound.
QUEUE_BACK_BOUND_S = 5.0


def deletion_windows_lost(lost, missed, audit_path):
    """Moves out of lost the events whose every miss is a consumer whose
    queue was deleted when the event was routed (its first copy on the audit
    queue, which the same publish reaches, within [deleted, back + 1 s]).
    Returns ({event id: why}, [(queue, deleted at, seconds until back)])."""
    windows = []
    try:
        for line in open(os.path.join(RUN_DIR, "faults.jsonl")):
            d = json.loads(line)
            if d.get("fault") != "queue-deleted" or d.get("phase") not in ("start", "end"):
                continue
            if d["phase"] == "start":
                windows.append([d["queue"], d["t"], None])
            elif windows and windows[-1][0] == d["queue"] and d.get("declared_again"):
                windows[-1][2] = d.get("after_s")
    except OSError:
        pass
    first = {}
    try:
        with open(audit_path) as f:
            for line in f:
                d = json.loads(line)
                first.setdefault(d["event_id"], d["t"])
    except OSError:
        pass
    out = {}
    for eid in list(lost):
        cs, t = missed.get(eid), first.get(eid)
        if not cs or t is None:
            continue
        hits = [w for w in windows if w[0] in cs and w[1] <= t <= w[1] + min(w[2] or 20, 20) + 1.0]
        if {w[0] for w in hits} == cs:
            out[eid] = f"{lost.pop(eid)} (routed {t - hits[0][1]:.2f} s after {hits[0][0]} was deleted)"
    return out, [tuple(w) for w in windows]


class _QuietTap(Tap):
    def ok(self, cond, label, detail=None):
        self.n += 1
        self.failed += 0 if cond else 1
        return cond


def self_check(topo, procs, producers, nem, audit_path, rows, dlq, depths):
    """The checker must not be vacuous: on a copy of this run's rows with one
    effect row dropped, one claim and its effect dropped, one effect row
    repeated, one outbox row left PUBLISHING and one event moved to a DLQ,
    it must find exactly those. Returns (found as expected, what it found)."""
    import copy
    r = copy.deepcopy(rows)
    eids = [o[2] for o in r["orders"]]
    if len(eids) < 5:
        return False, "fewer than 5 orders"
    r["effects"] = [e for e in r["effects"] if e[2] != eids[0]]
    r["consumed"] = [c for c in r["consumed"] if not (c[1] in (eids[1], eids[4]) and c[0] == "nem-jobs")]
    r["jobs"] = [j for j in r["jobs"] if j[0] not in (eids[1], eids[4])]
    twin = [e for e in r["effects"] if e[2] == eids[2]]
    if twin:
        r["effects"].append([-1] + twin[0][1:])
    for o in r["outbox"]:
        if o[0] == eids[3]:
            o[1] = "PUBLISHING"
    d = list(dlq) + [{"consumer": "nem-jobs", "event_id": eids[4], "reason": "self-check", "attempts": 0,
                      "failed_at": ""}]
    # two versions of one order applied the other way round
    want_order = set()
    planted = {o[0] for o in r["orders"] if o[2] in eids[:5]}
    by_order = {}
    for e in r["effects"]:
        if e[1] == ORDERED and e[3] not in planted:
            by_order.setdefault(e[3], []).append(e)
    several = [sorted(v) for v in by_order.values() if len(v) > 1]
    if several:
        a, b = several[0][0], several[0][1]
        a[0], b[0] = b[0], a[0]
        want_order = {a[2]}
    s, cl = check(topo, procs, producers, nem, audit_path, r, d, depths, _QuietTap(), windows=False)
    want = {"lost": {eids[0], eids[1]}, "doubled": {eids[2]}, "stuck": {eids[3]}, "dead_lettered": {eids[4]},
            "out_of_order": want_order}
    if not want_order:
        return False, "no order with two versions to plant a reordering in"
    got = {k: set(v) - {x for x in v if x.startswith("queue:")} for k, v in cl.items()}
    good = all(want[k] <= got[k] for k in want)
    extra = {k: len(got[k] - want[k]) for k in want}
    return good, f"found {', '.join(f'{k} {len(got[k] & want[k])}/{len(want[k])}' for k in want)}; other ids {extra}"


def explain(run_dir, eid, out=sys.stdout):
    """One event's whole history, from the files of a run."""
    def p(s=""):
        print(s, file=out)
    rows = {}
    try:
        rows = json.load(open(os.path.join(run_dir, "rows.json")))
    except (OSError, ValueError):
        p(f"(no rows.json in {run_dir}: the run did not reach its end)")
    faults = []
    try:
        faults = [json.loads(l) for l in open(os.path.join(run_dir, "faults.jsonl"))]
    except OSError:
        pass
    try:
        t0 = json.load(open(os.path.join(run_dir, "start.json")))["t0"]
    except (OSError, ValueError, KeyError):
        t0 = faults[0]["t"] - faults[0]["elapsed"] if faults else 0.0
    prod = []
    try:
        prod = [json.loads(l) for l in open(os.path.join(run_dir, "producer.jsonl"))]
    except OSError:
        pass
    try:
        prod += [json.loads(l) for l in open(os.path.join(run_dir, "updates.jsonl"))]
    except OSError:
        pass
    order = [o for o in rows.get("orders", []) if o[2] == eid]
    req_ids = {o[1] for o in order}
    p(f"event {eid}")
    for o in order:
        p(f"  order {o[0]}, request {o[1]}, created {o[3]}")
    if not order:
        p("  no committed order carries this event id")
    events = []  # (t, text)
    for r in prod:
        if r.get("event_id") == eid or r.get("request_id") in req_ids:
            p(f"  producer {r['producer']}: request {r.get('request_id', 'order ' + str(r.get('order_id')))}"
              f" -> {r.get('outcome')}"
              f" (attempts {r.get('attempts')}, reconciled {r.get('reconciled')}, unknown {r.get('unknown', '-')})")
            events.append((r["t"], f"producer {r['producer']}: request {r.get('request_id', '')} submitted"))
            for t, what in r.get("history", []):
                events.append((t, f"producer {r['producer']}: {what}"))
    for ob in rows.get("outbox", []):
        if ob[0] == eid:
            p(f"  outbox: status {ob[1]}, lease owner {ob[2]}, publish attempts {ob[3]}, created {ob[4]},"
              f" published {ob[5]}")
            events.append((parse_iso(ob[4]), "outbox row created (created_at)"))
            if ob[5]:
                events.append((parse_iso(ob[5]), "outbox row marked PUBLISHED (published_at)"))
    for c in rows.get("consumed", []):
        if c[1] == eid:
            p(f"  consumed_event: {c[0]} at {c[2]}")
            events.append((parse_iso(c[2]), f"consumed_event row {c[0]} (consumed_at)"))
    for j in rows.get("jobs", []):
        if j[0] == eid:
            p(f"  notification_job: order {j[1]} at {j[2]}")
    for e in rows.get("effects", []):
        if e[2] == eid:
            p(f"  nemesis_effect: row {e[0]} ({e[1]}, order {e[3]}) at {e[4]}")
    try:
        for d in json.load(open(os.path.join(run_dir, "dlq.json"))):
            if d["event_id"] == eid:
                p(f"  dead-lettered by {d['consumer']}: {d['reason']} (attempts {d['attempts']}, at {d['failed_at']})")
    except (OSError, ValueError):
        pass
    try:
        n = 0
        for line in open(os.path.join(run_dir, "audit.jsonl")):
            d = json.loads(line)
            if d["event_id"] == eid:
                n += 1
                events.append((d["t"], "broker copy seen on the audit queue" +
                               (" (audit redelivery)" if d.get("redelivered") else "")))
        p(f"  copies the broker confirmed (audit queue): {n}")
    except OSError:
        pass
    for t, proc, run, l in all_log_lines(run_dir):
        if l.get("event_id") == eid:
            bits = [l.get("level", ""), l.get("consumer", ""), l.get("outcome", ""),
                    f"tag {l['delivery_tag']}" if l.get("delivery_tag") else "",
                    f"attempt {l['attempt']}" if l.get("attempt") else "",
                    "redelivered" if l.get("redelivered") else "",
                    f"error {l['error_code']}" if l.get("error_code") else ""]
            events.append((t, f"{proc}.run{run}: " + " ".join(b for b in bits if b) + f": {l.get('msg', '')}"))
    if events:
        lo = min(t for t, _ in events) - 3
        hi = max(t for t, _ in events) + 3
        # faults in the window, and those that began before it and were
        # still going (their end, or the next fault of that name, is later)
        ongoing = set()
        for k, f in enumerate(faults):
            if f["phase"] == "start" and f["t"] < lo:
                ends = [g["t"] for g in faults[k + 1:] if g["fault"] == f["fault"] and g["phase"] == "end"]
                if ends and ends[0] >= lo:
                    ongoing.add(k)
        for k, f in enumerate(faults):
            if lo <= f["t"] <= hi or k in ongoing:
                detail = " ".join(f"{k}={v}" for k, v in f.items() if k not in ("t", "elapsed", "fault", "phase",
                                                                                  "trace"))
                events.append((f["t"], f"FAULT {f['fault']} {f['phase']} {detail}".rstrip()))
    p("  history:")
    for t, what in sorted(events, key=lambda e: e[0]):
        p(f"    {iso(t)} +{t - t0:7.2f}s  {what}")


def main():
    global RUN_DIR, T0
    ap = argparse.ArgumentParser(prog="tests/nemesis/run")
    ap.add_argument("seconds", nargs="?", type=float, default=300)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--cluster", action="store_true")
    ap.add_argument("--explain", metavar="EVENT_ID")
    ap.add_argument("--dir", help="the run folder --explain reads (default: the last run)")
    a = ap.parse_args()
    base = os.path.join(ROOT, ".local", "nemesis")
    if a.explain:
        explain(a.dir or os.path.join(base, "last"), a.explain.lower())
        return 0

    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1, 1 << 31)
    mode = "cluster" if a.cluster else "single"
    global RELAY_SOURCE
    # The binlog source on one server only: its position is a file and
    # offset of that server's binary log (docs/scale.md).
    RELAY_SOURCE = os.environ.get("NEMESIS_RELAY_SOURCE") or ("binlog" if not a.cluster and seed % 2 else "poll")
    if RELAY_SOURCE not in ("poll", "binlog") or (a.cluster and RELAY_SOURCE == "binlog"):
        print(f"# NEMESIS_RELAY_SOURCE={RELAY_SOURCE}: poll, or binlog on a single node", flush=True)
        return 2
    T0 = time.time()
    RUN_DIR = os.path.join(base, "runs", time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + f"-{mode}-seed{seed}")
    os.makedirs(os.path.join(RUN_DIR, "logs"))
    os.makedirs(os.path.join(RUN_DIR, "configs"))
    last = os.path.join(base, "last")
    try:
        os.remove(last)
    except OSError:
        pass
    os.symlink(RUN_DIR, last)
    with open(os.path.join(RUN_DIR, "start.json"), "w") as f:
        json.dump({"t0": T0, "seed": seed, "seconds": a.seconds, "mode": mode, "relay_source": RELAY_SOURCE}, f)
    print(f"# nemesis: seed {seed}, {a.seconds:.0f} s of faults, {mode}, relay.source {RELAY_SOURCE}; replay:"
          f" tests/nemesis/run {a.seconds:.0f} --seed {seed}{' --cluster' if a.cluster else ''}", flush=True)
    print(f"# run folder {RUN_DIR}", flush=True)

    topo = Topology(a.cluster)
    setup_schema(topo)
    dbp = [Proxy(f"db{i + 1}", m["port"]) for i, m in enumerate(topo.mysql)]
    amqpp = [Proxy(f"amqp{i + 1}", m["port"]) for i, m in enumerate(topo.amqp)]
    cons_urls = [f"mysql://sidecar_consumer:consumer-secret@127.0.0.1:{p.port}/app" for p in dbp]
    relay_user = "sidecar_relay_binlog:relay-binlog-secret" if RELAY_SOURCE == "binlog" else "sidecar_relay:relay-secret"
    relay_urls = [f"mysql://{relay_user}@127.0.0.1:{p.port}/app" for p in dbp]
    amqp_urls = [f"amqp://guest:guest@127.0.0.1:{p.port}/%2f" for p in amqpp]

    def one(urls):
        return urls if len(urls) > 1 else urls[0]
    procs = {}
    for k in (1, 2):
        # each process starts at another node of the lists
        rot = lambda u: u[(k - 1) % len(u):] + u[:(k - 1) % len(u)]  # noqa: E731
        procs[f"relay-{k}"] = Proc(f"relay-{k}", "relay", relay_config(f"relay-{k}", one(relay_urls), one(rot(amqp_urls)),
                                                                 RELAY_SOURCE))
        procs[f"consume-{k}"] = Proc(f"consume-{k}", "consume",
                                     consumer_config(topo, f"consume-{k}", one(rot(cons_urls)), one(rot(amqp_urls)),
                                                     a.cluster))
    children = list(procs.values())

    def reap(*_):
        for p in children:
            try:
                if p.alive():
                    os.kill(p.p.pid, signal.SIGCONT)
                    os.kill(p.p.pid, signal.SIGKILL)
            except OSError:
                pass
    import atexit
    atexit.register(reap)
    signal.signal(signal.SIGTERM, lambda *_: (reap(), os._exit(3)))

    tap = Tap()
    for p in procs.values():
        p.start()
    if not tap.ok(wait_ready(procs), "two relays and two consume processes (3 consumers x 2 workers each) started"):
        for p in procs.values():
            print("#   " + p.name + ": " + open(p.log_path(p.runs)).read()[-600:].replace("\n", "\n#   "))
        print(f"nemesis: orders=0 lost=0 doubled=0 stuck=0 dead_lettered=0 repeats=0 faults=0", flush=True)
        return 1
    audit = Audit(topo)
    audit.start()
    producers = Producers(topo, dbp, RATE, seed)
    producers.start()
    nem = Nemesis(topo, procs, dbp, amqpp, seed, a.seconds)
    sched = threading.Thread(target=nem.run, name="nemesis", daemon=True)
    sched.start()
    while sched.is_alive():
        for p in procs.values():
            p.check_exit()
        sched.join(1.0)
    say("faults stop; waiting for the faults in progress to end")
    nem.join(300)
    say(f"{nem.count} faults; healing")
    heal(topo, procs, dbp, amqpp)
    say("stopping the producers")
    producers.finish()
    t_drain = now()
    done_, why = False, ""
    last_say = 0
    while now() - t_drain < DRAIN_S:
        for p in procs.values():
            p.check_exit()
        done_, why = drained(topo, audit)
        if done_:
            break
        if now() - last_say > 15:
            say(f"draining: {why}")
            last_say = now()
        time.sleep(2)
    say(f"drained in {now() - t_drain:.1f} s" if done_ else f"drain did not finish in {DRAIN_S:.0f} s: {why}")
    time.sleep(2)  # the last acks
    for p in procs.values():
        rc = p.term()
        if rc != 0:
            say(f"{p.name} stopped with status {rc}")
    audit.drain_until_empty()
    rows = dump_rows(topo)
    dlq = drain_dlqs(topo)
    with open(os.path.join(RUN_DIR, "dlq.json"), "w") as f:
        json.dump(dlq, f)
    depths = queue_depths(topo)
    tap.ok(depths is not None, "queue depths read from rabbitmqctl")
    summary, classes = check(topo, procs, producers, nem, os.path.join(RUN_DIR, "audit.jsonl"), rows, dlq, depths, tap)
    good_check, what = self_check(topo, procs, producers, nem, os.path.join(RUN_DIR, "audit.jsonl"), rows, dlq,
                                  depths)
    tap.ok(good_check, f"the checker finds a dropped effect, a dropped claim, a doubled effect, a stuck row, a"
           f" dead letter and two versions applied out of order planted in a copy of this run's rows ({what})")
    summary.update(seed=seed, seconds=a.seconds, mode=mode, relay_source=RELAY_SOURCE, drain_s=round(now() - t_drain, 1), drained=done_,
                   wall_s=round(now() - T0, 1))
    with open(os.path.join(RUN_DIR, "summary.json"), "w") as f:
        json.dump({"summary": summary, "ids": {k: v for k, v in classes.items()}}, f, indent=1)
    shown = 0
    for cls, ids in classes.items():
        for eid in ids:
            if shown >= 4 or eid.startswith("queue:"):
                continue
            shown += 1
            print(f"# --- {cls}: tests/nemesis/run --explain {eid} --dir {RUN_DIR}")
            import io
            buf = io.StringIO()
            explain(RUN_DIR, eid, buf)
            for line in buf.getvalue().splitlines()[:80]:
                print("# " + line)
    print("# " + json.dumps({k: v for k, v in summary.items() if k != "faults_by_kind"}), flush=True)
    print(f"1..{tap.n}", flush=True)
    s = summary
    print(f"nemesis: orders={s['orders']} lost={s['lost']} doubled={s['doubled']} stuck={s['stuck']}"
          f" dead_lettered={s['dead_lettered']} repeats={s['repeats']} faults={s['faults']}", flush=True)
    good = (s["lost"] == s["doubled"] == s["stuck"] == s["dead_lettered"] == s["out_of_order"] == 0
            and s["repeats"] > 0
            and s["faults"] > 0 and tap.failed == 0)
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
