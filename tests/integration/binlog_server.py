"""A MariaDB of a binlog test's own, with the binary log on (ROW format; the
suite's server runs without one), on SC_TEST_BINLOG_MYSQL_PORT (default: the
suite's MariaDB port + 2): test_relay_binlog.py, test_relay_binlog_compressed.py,
test_relay_binlog_reset.py and
test_relay_binlog_watermark.py. `setup()` creates the app database, the
schema of sql/schema and the binlog relay's role (sql/grants/relay_binlog.sql,
password binlog-secret). test_durability_binlog.py starts one on a port of
its own with its own options."""
import ctypes
import json
import os
import signal
import socket
import subprocess
import tempfile
import time

import pymysql

from harness import Relay, bail, drain_with_keys

PORT = int(os.environ.get("SC_TEST_BINLOG_MYSQL_PORT", str(int(os.environ["SC_TEST_MYSQL_PORT"]) + 2)))
USER = subprocess.getoutput("id -un")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_libc = ctypes.CDLL(None)


def die_with_us():
    _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: nothing outlives a killed test


def port_free(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as mariadbd: TIME_WAIT is no owner
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


class Server:
    """A MariaDB of the test's own with the binary log on, root over its
    socket, on port (named by port_var in errors); start(*extra) adds or
    overrides server options (the last of two wins)."""

    def __init__(self, port=PORT, port_var="SC_TEST_BINLOG_MYSQL_PORT", prefix="sc-binlog-"):
        self.port, self.port_var = port, port_var
        self.dir = tempfile.mkdtemp(prefix=prefix)
        self.sock = os.path.join(self.dir, "mysqld.sock")
        self.data = os.path.join(self.dir, "data")
        self.proc = None
        r = subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={self.data}", f"--user={USER}",
                            "--auth-root-authentication-method=socket", "--skip-test-db"],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            bail("mariadb-install-db: " + (r.stdout + r.stderr)[-800:])

    def start(self, *extra):
        if not port_free(self.port):
            bail(f"port {self.port} ({self.port_var}) is in use")
        self.proc = subprocess.Popen(
            ["mariadbd", "--no-defaults", f"--datadir={self.data}", f"--socket={self.sock}",
             f"--port={self.port}", "--bind-address=127.0.0.1", f"--pid-file={self.dir}/mysqld.pid",
             f"--log-error={self.dir}/error.log", f"--user={USER}", "--skip-name-resolve",
             "--innodb-buffer-pool-size=64M", f"--tmpdir={self.dir}", f"--log-bin={self.dir}/binlog",
             "--server-id=1", "--binlog-format=ROW", "--sync-binlog=1", "--max-connections=200", *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_us)
        for _ in range(240):
            if self.proc.poll() is not None:
                break
            if self.sql("SELECT 1", check=False).returncode == 0:
                return
            time.sleep(0.25)
        bail("the test's MariaDB did not start: " + open(f"{self.dir}/error.log").read()[-1500:])

    def sql(self, text, check=True, database=None):
        """text through the mariadb client, in database (default: app once
        it exists)."""
        if database is None:
            database = "app" if self.proc and os.path.exists(f"{self.data}/app") else "mysql"
        r = subprocess.run(["mariadb", "--no-defaults", "--protocol=socket", f"--socket={self.sock}", "-uroot",
                            "-N", "-B", database], input=text, capture_output=True, text=True, timeout=120)
        if check and r.returncode != 0:
            bail(f"sql {text[:80]!r}: {r.stderr}")
        return r

    def db(self):
        return pymysql.connect(unix_socket=self.sock, user="root", database="app", autocommit=True)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def setup(srv):
    """The database, its schema and the binlog relay's role on a started srv:
    (URL of an all-privileged user, URL of the least-privilege relay role)."""
    srv.sql("CREATE DATABASE app CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;\n"
            "CREATE USER 'sidecar'@'127.0.0.1' IDENTIFIED BY 'sidecar';\n"
            "GRANT ALL ON *.* TO 'sidecar'@'127.0.0.1';")
    for f in sorted(os.listdir(os.path.join(ROOT, "sql", "schema"))):
        if f.endswith(".sql"):
            srv.sql(open(os.path.join(ROOT, "sql", "schema", f)).read())
    srv.sql("SET @sidecar_relay_binlog_password = 'binlog-secret';\n" +
            open(os.path.join(ROOT, "sql", "grants", "relay_binlog.sql")).read())
    return (f"mysql://sidecar:sidecar@127.0.0.1:{PORT}/app",
            f"mysql://sidecar_relay_binlog:binlog-secret@127.0.0.1:{PORT}/app")


def binlog_relay(ex, url, worker_id=None, source="binlog", lease_ms=3000, batch=50, **keys):
    """A relay on exchange ex reading url's outbox with relay.source
    source, poll 100 ms, and any other relay keys; not started."""
    r = Relay(ex, worker_id=worker_id, lease_ms=lease_ms, poll_ms=100, batch=batch)
    r.config["mysql"]["url"] = url
    r.config["relay"]["source"] = source
    r.config["relay"].update(keys)
    with open(r.config_path, "w") as f:
        json.dump(r.config, f)
    return r


def published(queue, want, timeout=30):
    """The message ids drained from queue until every one of want is among
    them, or timeout."""
    seen, deadline = [], time.time() + timeout
    while time.time() < deadline and not set(want) <= set(seen):
        seen += [p.message_id for _, p, _ in drain_with_keys(queue)]
        time.sleep(0.1)
    return seen


def recover(q, queue, gap, poll, binlog, insert):
    """The recovery of docs/operations.md ("Binlog relay"): the end noted,
    a poll relay (poll: not started) until the gap is published, the
    checkpoint moved to the noted end with its GTID cleared, then the binlog
    relay (binlog: not started) again and rows that insert() makes. q runs
    SQL as root. Returns (the ids published, the fresh rows' ids, the
    running binlog relay)."""
    new_file, new_pos = q("SHOW MASTER STATUS")[0][:2]
    poll.start()
    seen = published(queue, gap)
    poll.stop()
    q("UPDATE relay_checkpoint SET binlog_file = %s, binlog_pos = %s, gtid = NULL WHERE outbox = 'outbox_event'",
      (new_file, new_pos))
    binlog.start()
    fresh = insert()
    return seen + published(queue, fresh), fresh, binlog
