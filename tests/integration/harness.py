"""Shared pieces of the integration tests: the real sidecar binary against
the real MariaDB and RabbitMQ that tests/servers started (SC_TEST_* env).

Output is TAP; a missing server is a failure ("Bail out!"), never a skip."""

import json
import os
import random
import signal
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import pika
import pymysql

SIDECAR = os.environ.get("SIDECAR_BIN", "")
HANDLER = os.environ.get("SC_HANDLER", "")
TEST_HANDLER = os.environ.get("SC_TEST_HANDLER", "")

_n = 0
_failed = 0


def bail(msg):
    print("Bail out! " + msg, flush=True)
    sys.exit(1)


for var in ("SC_TEST_AMQP_URL", "SC_TEST_MYSQL_PORT", "SC_TEST_MYSQL_SOCKET"):
    if not os.environ.get(var):
        bail(f"{var} is not set: run the suite through tests/run (it starts the servers)")
if not SIDECAR or not os.path.exists(SIDECAR):
    bail("SIDECAR_BIN does not name the built sidecar")


def ok(cond, label, detail=None):
    global _n, _failed
    _n += 1
    label = " ".join(str(label).split())  # one TAP line, whatever the label holds
    print(("ok" if cond else "not ok") + f" {_n} - {label}", flush=True)
    if not cond:
        _failed += 1
        if detail is not None:
            for line in str(detail).splitlines()[:40]:
                print("#   " + line, flush=True)
    return cond


def is_eq(got, want, label):
    return ok(got == want, f"{label} (got {got!r}, expected {want!r})", detail=f"got {got!r}\nexpected {want!r}")


def diag(msg):
    """A TAP comment: every line of msg behind '# '."""
    print("\n".join("# " + line for line in str(msg).splitlines() or [""]), flush=True)


def done():
    print(f"1..{_n}", flush=True)
    sys.exit(1 if _failed else 0)


def suffix():
    return "".join(random.choice(string.ascii_lowercase + string.digits) for _ in range(8))


# ---- servers --------------------------------------------------------------

def admin_db():
    """root over the unix socket, autocommit: for checks and KILL."""
    return pymysql.connect(unix_socket=os.environ["SC_TEST_MYSQL_SOCKET"], user="root",
                           database="app", autocommit=True)


def apply_sql_file(path):
    """Runs a .sql file as root: comment lines dropped, split on ';'."""
    text = "\n".join(l for l in open(path).read().splitlines() if not l.strip().startswith("--"))
    with admin_db() as conn, conn.cursor() as cur:
        for stmt in text.split(";"):
            if stmt.strip():
                cur.execute(stmt)


def query(sql, args=None):
    with admin_db() as c, c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def count_in(table, column, ids, extra=""):
    if not ids:
        return 0
    total = 0
    ids = list(ids)
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        marks = ",".join(["%s"] * len(chunk))
        total += query(f"SELECT COUNT(*) FROM {table} WHERE {column} IN ({marks}) {extra}", chunk)[0][0]
    return total


def amqp():
    return pika.BlockingConnection(pika.URLParameters(os.environ["SC_TEST_AMQP_URL"]))


def rabbitmqctl(*args):
    env = dict(os.environ, HOME=os.environ["SC_TEST_RABBIT_HOME"])
    return subprocess.run(["/usr/lib/rabbitmq/bin/rabbitmqctl", "-n", os.environ["SC_TEST_RABBIT_NODE"], "-q", *args],
                          env=env, capture_output=True, text=True, timeout=60)


def broker_max_message_size(n=None):
    """The broker's max_message_size (set to n first when given): channels
    opened after take it. RabbitMQ 3.x reads it from the application's
    environment as a channel opens, 4.x from a persistent term written at
    boot (the environment is then ignored): both are set. Returns the value
    in force now, or None when unreadable."""
    import re
    if n is not None and rabbitmqctl("eval", f"application:set_env(rabbit, max_message_size, {int(n)}), "
                                     f"persistent_term:put(max_message_size, {int(n)}).").returncode:
        return None
    r = rabbitmqctl("eval", "{application:get_env(rabbit, max_message_size), "
                    "persistent_term:get(max_message_size, undefined)}.")
    m = re.search(r"\{\{ok,(\d+)\},(\d+|undefined)\}", r.stdout)
    if not m:
        return None
    return int(m.group(2)) if m.group(2) != "undefined" else int(m.group(1))


def event_body(eid, etype="ORDER_ACCEPTED", subject="1001", version=1, data=None):
    return json.dumps({"specversion": "1.0", "id": eid, "type": etype, "source": "ORDER",
                       "subject": subject, "time": "2026-11-29T10:00:00.000000Z",
                       "eventversion": version, "datacontenttype": "application/json",
                       "data": data if data is not None else {"orderId": subject}})


def publish(ch, exchange, routing_key, body, message_id=None, headers=None):
    props = pika.BasicProperties(content_type="application/cloudevents+json", delivery_mode=2,
                                 message_id=message_id, type=routing_key, headers=headers)
    ch.basic_publish(exchange, routing_key, body, props)


def publish_events(exchange, events, routing_key="ORDER_ACCEPTED", pace_s=0.0):
    """events: list of (event_id, subject). Publishes with confirms."""
    conn = amqp()
    ch = conn.channel()
    ch.confirm_delivery()
    for eid, subject in events:
        publish(ch, exchange, routing_key, event_body(eid, subject=subject), message_id=eid)
        if pace_s:
            time.sleep(pace_s)
    conn.close()


def drain(queue, limit=10000):
    """Gets and acks every message in queue: [(properties, body)]."""
    return [(props, body) for _, props, body in drain_with_keys(queue, limit)]


def queue_depth(queue):
    conn = amqp()
    ch = conn.channel()
    try:
        return ch.queue_declare(queue, passive=True).method.message_count
    finally:
        conn.close()


def wait_until(pred, timeout=60, step=0.1):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return pred()


# ---- the sidecar process ---------------------------------------------------

_children = []


def _reap():
    """No sidecar outlives its test, even one that died of an exception: a
    stray relay would publish the next test's outbox rows."""
    for p in _children:
        if p.poll() is None:
            p.kill()
            p.wait()


import atexit  # noqa: E402
atexit.register(_reap)


def spawn(owner, command, env=None):
    """Starts `sidecar COMMAND -c owner.config_path` (under SIDECAR_WRAPPER,
    e.g. valgrind) with one log file per run in owner.log_paths."""
    e = dict(owner.env)
    e.update(env or {})
    path = os.path.join(owner.dir, f"run{len(owner.log_paths) + 1}.log")
    owner.log_paths.append(path)
    wrapper = os.environ.get("SIDECAR_WRAPPER", "").split()
    proc = subprocess.Popen([*wrapper, SIDECAR, command, "-c", owner.config_path], env=e,
                            stdout=open(path, "w"), stderr=subprocess.STDOUT)
    _children.append(proc)
    return proc


class Sidecar:
    def __init__(self, name=None, handler=None, mysql_url=None, extra=None, consumer_extra=None,
                 env=None, exchange=None):
        self.name = name or "t-" + suffix()
        self.exchange = exchange or "ex-" + self.name
        self.queue = self.name
        self.dlq = self.name + ".dlq"
        self.dir = tempfile.mkdtemp(prefix="sc-it-")
        consumer = {"name": self.name, "queue": self.queue,
                    "bindings": [{"exchange": self.exchange, "routing_key": "#"}],
                    "handler": handler or HANDLER, "prefetch": 64,
                    "max_attempts": 3, "retry_delays_ms": [200, 400]}
        consumer.update(consumer_extra or {})
        self.config = {"amqp": {"url": os.environ["SC_TEST_AMQP_URL"], "heartbeat_s": 5},
                       # least privilege: the consumer's own user (sql/grants/consumer.sql)
                       "mysql": {"url": mysql_url or os.environ["SC_TEST_MYSQL_CONSUMER_URL"]},
                       "http": {"listen": "127.0.0.1:0"},
                       "consumers": [consumer]}
        self.config.update(extra or {})
        self.config_path = os.path.join(self.dir, "sidecar.json")
        with open(self.config_path, "w") as f:
            json.dump(self.config, f)
        self.env = dict(os.environ)
        self.env.pop("SIDECAR_FAULT", None)
        self.env.update(env or {})
        self.proc = None
        self.log_paths = []

    def start(self, env=None, wait=True):
        self.proc = spawn(self, "consume", env)
        if not wait:
            return True
        # Ready once the worker says it is consuming (the queue is declared)
        # and the process is still running: a start-up that crashed or exited,
        # even after logging that line, is a failed start.
        run = len(self.log_paths)
        wait_until(lambda: self.proc.poll() is not None
                   or any(l.get("msg", "").startswith("worker") for l in self.lines(run)), timeout=30)
        if self.proc.poll() is not None:
            diag(f"sidecar exited during start-up with status {self.proc.returncode}; its log:")
            for line in open(self.log_paths[-1]).read().splitlines()[-20:]:
                diag("  " + line)
            return False
        return any(l.get("msg", "").startswith("worker") for l in self.lines(run))

    def lines(self, run=None):
        paths = self.log_paths if run is None else [self.log_paths[run - 1]]
        out = []
        for p in paths:
            with open(p) as f:
                for line in f:
                    line = line.strip()
                    if line.startswith("{"):
                        try:
                            out.append(json.loads(line))
                        except ValueError:
                            pass
        return out

    def http_port(self):
        """The port the HTTP endpoints were given (http.listen port 0)."""
        for l in self.lines():
            m = l.get("msg", "")
            if m.startswith("http: /metrics"):
                return int(m.rsplit(":", 1)[1])
        return None

    def get(self, path):
        import urllib.request
        import urllib.error
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port()}{path}", timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def outcomes(self, outcome, run=None):
        return [l for l in self.lines(run) if l.get("outcome") == outcome]

    def text(self):
        return "".join(open(p).read() for p in self.log_paths)

    def stop(self, timeout=30):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode if self.proc else None

    def wait_exit(self, timeout=60):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        if self.alive():
            self.proc.kill()
            self.proc.wait()


def run_sidecar_cmd(args, config, env=None, timeout=30):
    d = tempfile.mkdtemp(prefix="sc-it-")
    path = os.path.join(d, "c.json")
    with open(path, "w") as f:
        f.write(config if isinstance(config, str) else json.dumps(config))
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run([SIDECAR, *args, "-c", path], env=e, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def metric_sum(port, pattern, default=0):
    """The sum of the samples on port's /metrics whose line matches pattern
    (a regex with one group, the value, anchored per line); default when the
    endpoint cannot be read or no sample matches."""
    import re
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            values = re.findall(pattern, r.read().decode(), re.M)
    except (OSError, ValueError):  # not listening, or no port yet
        return default
    return sum(int(v) for v in values) if values else default


def new_events(n, start=1000):
    return [(str(uuid.uuid4()), str(start + i)) for i in range(n)]


# ---- a TCP proxy that cuts a MySQL connection right after COMMIT is sent ----

def _shut(*socks):
    for x in socks:
        try:
            x.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def mysql_packets(buf):
    """Takes each whole MySQL packet (3-byte little-endian length, 1-byte
    sequence number, payload) off the front of buf, a bytearray, and yields
    it; a packet not yet whole stays in buf for the next read."""
    while len(buf) >= 4:
        n = int.from_bytes(buf[:3], "little")
        if len(buf) < 4 + n:
            return
        pkt = bytes(buf[:4 + n])
        del buf[:4 + n]
        yield pkt


def is_commit(payload):
    """A COM_QUERY whose text is COMMIT."""
    return payload[:1] == b"\x03" and payload[1:].strip().upper() == b"COMMIT"


def _loopback_listener():
    """A listening socket on a free loopback port: (socket, port)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock, sock.getsockname()[1]


def _accept_each(sock, take):
    """Calls take(conn) for each connection sock accepts, on a thread of its
    own, until sock is shut."""
    def loop():
        while True:
            try:
                c, _ = sock.accept()
            except OSError:
                return
            take(c)
    threading.Thread(target=loop, daemon=True).start()


def _pump(src, dst):
    """Forwards src to dst until either side ends, then shuts both."""
    try:
        while True:
            b = src.recv(65536)
            if not b:
                break
            dst.sendall(b)
    except OSError:
        pass
    _shut(src, dst)


class _Link:
    """One client connection through a proxy and its server connection."""

    def __init__(self, client, server):
        self.client, self.server = client, server
        self.blocked = False          # the server's replies no longer reach the client
        self.lock = threading.Lock()  # writes to the client: the server's and the proxy's own


class _MySQLProxy:
    """A loopback listener in front of MariaDB that forwards both ways and
    splits what the client sends into packets; a subclass decides per packet
    (packet()) and calls _serve() once its state is set."""

    FORWARD, DROP, CUT_AFTER, CUT_BEFORE = "forward", "drop", "cut after", "cut before"

    def __init__(self, target_port):
        self.target = ("127.0.0.1", target_port)
        self.sock, self.port = _loopback_listener()
        self.lock = threading.Lock()

    def packet(self, pkt, link):
        """FORWARD the client's packet; DROP it (the proxy answered it itself
        or swallows it); CUT_AFTER: forward it, keep its reply from the
        client, let the server run it (0.3 s), then close both sides;
        CUT_BEFORE: close both sides without forwarding it."""
        return self.FORWARD

    def _serve(self):
        _accept_each(self.sock, self._take)

    def _take(self, c):
        link = _Link(c, socket.create_connection(self.target))
        threading.Thread(target=self._client_to_server, args=(link,), daemon=True).start()
        threading.Thread(target=self._server_to_client, args=(link,), daemon=True).start()

    @staticmethod
    def _server_to_client(link):
        try:
            while True:
                b = link.server.recv(65536)
                if not b or link.blocked:
                    break
                with link.lock:
                    link.client.sendall(b)
        except OSError:
            pass
        _shut(link.server, link.client)

    def _client_to_server(self, link):
        buf = bytearray()
        try:
            while True:
                b = link.client.recv(65536)
                if not b:
                    break
                buf += b
                out, cut = b"", None
                for pkt in mysql_packets(buf):
                    what = self.packet(pkt, link)
                    if what in (self.FORWARD, self.CUT_AFTER):
                        out += pkt
                    if what in (self.CUT_AFTER, self.CUT_BEFORE):
                        cut = what
                        break
                if cut:
                    link.blocked = True
                if out:
                    link.server.sendall(out)
                if cut == self.CUT_AFTER:
                    time.sleep(0.3)  # the server executes the last packet meanwhile
                if cut:
                    _shut(link.client, link.server)
                    return
        except OSError:
            pass
        _shut(link.client, link.server)

    def url(self, role="CONSUMER"):
        """role's URL (sql/grants/) pointed at the proxy."""
        import re
        return re.sub(r"@127\.0\.0\.1:\d+/", f"@127.0.0.1:{self.port}/", os.environ[f"SC_TEST_MYSQL_{role}_URL"])


class CommitCuttingProxy(_MySQLProxy):
    """Forwards to MariaDB. While `armed` > 0, it
    forwards a client's COMMIT to the server, lets the server execute it,
    then closes both sides before the reply reaches the client: the commit
    happened, the client sees a lost connection (outcome UNKNOWN)."""

    CUT = _MySQLProxy.CUT_AFTER

    def __init__(self, target_port):
        super().__init__(target_port)
        self.armed = 0
        self.commit_seen = 0
        self.cuts = 0
        self._serve()

    def packet(self, pkt, link):
        if not is_commit(pkt[4:]):
            return self.FORWARD
        with self.lock:
            self.commit_seen += 1
            if self.armed <= 0:
                return self.FORWARD
            self.armed -= 1
            self.cuts += 1
            return self.CUT


class GateProxy(_MySQLProxy):
    """Forwards to MariaDB until down(): then it cuts every open connection
    and closes each new one at once (the server out of reach from this
    client only) until up()."""

    def __init__(self, target_port):
        super().__init__(target_port)
        self.is_down = False
        self.refused = 0
        self.open = []
        self._serve()

    def down(self):
        with self.lock:
            self.is_down = True
            socks, self.open = self.open, []
        for pair in socks:
            _shut(*pair)

    def up(self):
        with self.lock:
            self.is_down = False

    def _take(self, c):
        with self.lock:
            if self.is_down:
                self.refused += 1
                c.close()
                return
            s = socket.create_connection(self.target)
            self.open.append((c, s))
        link = _Link(c, s)
        for pipe in (self._plain_client_to_server, self._server_to_client):
            threading.Thread(target=pipe, args=(link,), daemon=True).start()

    @staticmethod
    def _plain_client_to_server(link):
        _pump(link.client, link.server)


class StallProxy:
    """Forwards to MariaDB until stall(): then every new connection is
    accepted and sent nothing, not even the server's greeting (a node that
    does not answer its connects: the client waits out its connect
    timeout), while the connections already open go on as before, until
    resume(). held counts the connections it left waiting."""

    def __init__(self, target_port):
        self.target = ("127.0.0.1", target_port)
        self.sock, self.port = _loopback_listener()
        self.lock = threading.Lock()
        self.stalled = False
        self.held = 0
        self.waiting = []
        threading.Thread(target=self._accept, daemon=True).start()

    def stall(self):
        with self.lock:
            self.stalled = True

    def resume(self):
        with self.lock:
            self.stalled = False
            socks, self.waiting = self.waiting, []
        for c in socks:
            _shut(c)
            c.close()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                if self.stalled:
                    self.held += 1
                    self.waiting.append(c)
                    continue
            s = socket.create_connection(self.target)
            threading.Thread(target=_pump, args=(c, s), daemon=True).start()
            threading.Thread(target=_pump, args=(s, c), daemon=True).start()

    def url(self, role="RELAY"):
        """role's URL (sql/grants/) pointed at the proxy."""
        import re
        return re.sub(r"@127\.0\.0\.1:\d+/", f"@127.0.0.1:{self.port}/", os.environ[f"SC_TEST_MYSQL_{role}_URL"])


class CancelDroppingAmqpProxy:
    """A loopback listener in front of a RabbitMQ node that forwards both
    ways, reads the broker's frames and, while dropping is on, swallows
    every basic.cancel: a broker that deletes a queue without telling its
    consumers. dropped counts what it swallowed."""

    BASIC_CANCEL = (60, 30)

    def __init__(self, target_port):
        self.target = ("127.0.0.1", target_port)
        self.sock, self.port = _loopback_listener()
        self.dropping = True
        self.dropped = 0
        _accept_each(self.sock, self._take)

    def url(self):
        return f"amqp://guest:guest@127.0.0.1:{self.port}/%2f"

    def _take(self, c):
        s = socket.create_connection(self.target)
        threading.Thread(target=_pump, args=(c, s), daemon=True).start()
        threading.Thread(target=self._down, args=(c, s), daemon=True).start()

    def _down(self, c, s):
        buf = b""
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                buf += b
                out = b""
                # frame: type(1) channel(2) size(4) payload end(0xCE)
                while len(buf) >= 7:
                    size = int.from_bytes(buf[3:7], "big")
                    if len(buf) < 8 + size:
                        break
                    frame, buf = buf[:8 + size], buf[8 + size:]
                    method = (int.from_bytes(frame[7:9], "big"), int.from_bytes(frame[9:11], "big"))
                    if frame[0] == 1 and method == self.BASIC_CANCEL and self.dropping:
                        self.dropped += 1
                        continue
                    out += frame
                if out:
                    c.sendall(out)
        except OSError:
            pass
        _shut(c, s)


# ---- the relay and the producer ---------------------------------------------

ORDER_PRODUCER = os.environ.get("SC_ORDER_PRODUCER", "")


class Relay:
    """`sidecar relay` with its own config; logs per run like Sidecar."""

    def __init__(self, exchange, worker_id=None, batch=50, lease_ms=2000, poll_ms=100, confirm_timeout_ms=None):
        if confirm_timeout_ms is None:  # the lease must outlast two confirm waits
            confirm_timeout_ms = min(5000, lease_ms // 3)
        self.worker_id = worker_id or "relay-" + suffix()
        self.dir = tempfile.mkdtemp(prefix="sc-relay-")
        self.config = {"amqp": {"url": os.environ["SC_TEST_AMQP_URL"], "heartbeat_s": 5},
                       "mysql": {"url": os.environ["SC_TEST_MYSQL_RELAY_URL"]},
                       "http": {"listen": "127.0.0.1:0"},
                       "relay": {"worker_id": self.worker_id, "exchange": exchange, "batch": batch,
                                 "lease_ms": lease_ms, "poll_ms": poll_ms,
                                 "confirm_timeout_ms": confirm_timeout_ms}}
        self.config_path = os.path.join(self.dir, "relay.json")
        with open(self.config_path, "w") as f:
            json.dump(self.config, f)
        self.proc = None
        self.log_paths = []

    def start(self, env=None):
        self.env = dict(os.environ)
        self.env.pop("SIDECAR_FAULT", None)
        self.proc = spawn(self, "relay", env)
        return self

    lines = Sidecar.lines
    http_port = Sidecar.http_port
    get = Sidecar.get
    outcomes = Sidecar.outcomes
    text = Sidecar.text
    stop = Sidecar.stop
    wait_exit = Sidecar.wait_exit
    alive = Sidecar.alive
    kill9 = Sidecar.kill9


def clear_outbox():
    query("DELETE FROM outbox_event")


def insert_outbox(n, event_type="ORDER_ACCEPTED", status="PENDING", lease_owner=None, lease_until_sql="NULL"):
    """Inserts n outbox rows; returns their event ids in created_at order."""
    ids = []
    with admin_db() as c, c.cursor() as cur:
        for i in range(n):
            eid = str(uuid.uuid4())
            ids.append(eid)
            cur.execute(
                "INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version,"
                " payload, status, lease_owner, lease_until, created_at) VALUES"
                f" (%s, 'ORDER', %s, %s, %s, %s, %s, %s, {lease_until_sql}, UTC_TIMESTAMP(6))",
                (eid, str(5000 + i), event_type, 1 + i % 3,
                 json.dumps({"orderId": 5000 + i, "note": "quote ' and \u00e9"}), status, lease_owner))
    return ids


# The x-delivery-limit the sidecar declares on every quorum queue.
QUORUM_DELIVERY_LIMIT = 2147483647


def insert_sized(size, aggregate_id="7", aggregate_type="ORDER"):
    """Inserts one PENDING row whose payload is exactly size bytes of JSON;
    returns its event id."""
    eid = str(uuid.uuid4())
    payload = '{"blob":"' + "x" * (size - 11) + '"}'
    query("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version, payload,"
          " status, created_at) VALUES (%s, %s, %s, 'ORDER_ACCEPTED', 1, %s, 'PENDING', UTC_TIMESTAMP(6))",
          (eid, aggregate_type, aggregate_id, payload))
    return eid


def bound_queue(exchange, routing_key="#", queue=None, quorum=False):
    """A durable queue (fresh unless named) bound to exchange (declared
    durable topic): a consumer's queue declared before it starts, so that
    what is published first waits for it."""
    q = queue or "q-" + suffix()
    conn = amqp()
    ch = conn.channel()
    ch.exchange_declare(exchange, "topic", durable=True)
    # A quorum queue as the sidecar declares it, with its delivery limit.
    args = {"x-queue-type": "quorum", "x-delivery-limit": QUORUM_DELIVERY_LIMIT} if quorum else None
    ch.queue_declare(q, durable=True, arguments=args)
    ch.queue_bind(q, exchange, routing_key)
    conn.close()
    return q


def drain_with_keys(queue, limit=100000):
    """Gets and acks every message in queue: [(routing_key, properties, body)]."""
    conn = amqp()
    ch = conn.channel()
    out = []
    while len(out) < limit:
        m, props, body = ch.basic_get(queue, auto_ack=True)
        if m is None:
            break
        out.append((m.routing_key, props, body))
    conn.close()
    return out


def run_order_producer(args, env=None, timeout=120):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run([ORDER_PRODUCER, *args], env=e, capture_output=True, text=True, timeout=timeout)
    lines = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    return r.returncode, lines, r.stderr
