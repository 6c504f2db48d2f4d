"""The durability check where the suite's server cannot go: it runs without a
binary log, and log_bin cannot be switched on at runtime. So this test starts
a MariaDB of its own (the suite's mariadbd binary, a new data directory, on
SC_TEST_MYSQL2_PORT, default 23346, and its socket in a scratch folder),
stopped and removed at the end:

1. with --log-bin and sync_binlog 0: `consume` and `relay` refuse to start
   (exit 2) naming sync_binlog=0, `check` exits 1; with
   mysql.allow_unsafe_durability they start, warn and run (an event
   consumed, an outbox row published); at sync_binlog 1 check passes;
2. restarted as a one-node Galera cluster (wsrep_on, gcomm:// bootstrap,
   group communication on the port + 1): `check` prints the node's
   innodb_flush_log_at_trx_commit, wsrep_sync_wait and the pc.* options and
   passes; pc.ignore_sb=true (SET GLOBAL wsrep_provider_options) and then
   innodb_flush_log_at_trx_commit=2 on that node are refused by check and
   consume, each named;
3. restarted with innodb_read_only, since the server is there: a write fails
   with 1036 (1836 is only its warning), read_only still says 0, and a
   consumer does not consume on it (its session's probe asks both)."""
import shutil

from harness import *
from binlog_server import Server, port_free

PORT = int(os.environ.get("SC_TEST_MYSQL2_PORT", "23346"))
GCOMM = PORT + 1
PROVIDER = next((p for p in ("/usr/lib/galera/libgalera_smm.so", "/usr/lib/libgalera_smm.so")
                 if os.path.exists(p)), None)


root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
srv = Server(PORT, "SC_TEST_MYSQL2_PORT", "sc-dur2-")
try:
    srv.start("--sync-binlog=0")
    srv.sql("CREATE DATABASE app CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;\n"
            "CREATE USER 'sidecar'@'127.0.0.1' IDENTIFIED BY 'sidecar';\n"
            "GRANT ALL ON app.* TO 'sidecar'@'127.0.0.1';")
    for sub in ("schema", "examples"):
        d = os.path.join(root, "sql", sub)
        for f in sorted(os.listdir(d)):
            if f.endswith(".sql"):
                srv.sql(open(os.path.join(d, f)).read(), database="app")
    url = f"mysql://sidecar:sidecar@127.0.0.1:{PORT}/app"
    log_bin, sync = srv.sql("SELECT @@GLOBAL.log_bin, @@GLOBAL.sync_binlog").stdout.split()
    ok(log_bin == "1" and sync == "0", f"the test's MariaDB runs with the binary log, sync_binlog {sync}")

    ex = "dur2-" + suffix()
    consumer_cfg = {"amqp": {"url": os.environ["SC_TEST_AMQP_URL"]}, "mysql": {"url": url},
                    "http": {"listen": "off"},
                    "consumers": [{"name": "dur2-" + suffix(), "handler": HANDLER,
                                   "bindings": [{"exchange": ex, "routing_key": "#"}]}]}
    relay_cfg = {"amqp": {"url": os.environ["SC_TEST_AMQP_URL"]}, "mysql": {"url": url},
                 "http": {"listen": "off"}, "relay": {"exchange": ex, "worker_id": "dur2-" + suffix()}}
    named = "sync_binlog=0 (with log_bin=ON"
    for cmd, cfg in (("consume", consumer_cfg), ("relay", relay_cfg)):
        rc, out = run_sidecar_cmd([cmd], cfg)
        is_eq(rc, 2, f"sync_binlog=0 with the binary log: {cmd} refuses to start")
        ok(named in out and f"127.0.0.1:{PORT}" in out and "set 1" in out, f"{cmd} names it",
           detail=out[-1500:])
    rc, out = run_sidecar_cmd(["check"], consumer_cfg)
    is_eq(rc, 1, "check exits 1")
    ok("log_bin=ON" in out and "sync_binlog=0 wsrep_on=OFF" in out and f"not durable: {named}" in out,
       "check prints log_bin and sync_binlog and names it", detail=out[-1500:])

    # The override: both run on it.
    s = Sidecar(mysql_url=url, extra={"mysql": {"url": url, "allow_unsafe_durability": True}})
    ok(s.start(), "consume starts with mysql.allow_unsafe_durability", detail=s.text()[-2000:])
    ok(any(l.get("level") == "warn" and named in l.get("msg", "") for l in s.lines()),
       "warning at start naming sync_binlog")
    eid = str(uuid.uuid4())
    publish_events(s.exchange, [(eid, "8001")])
    ok(wait_until(lambda: srv.sql(f"SELECT COUNT(*) FROM consumed_event WHERE event_id = '{eid}'",
                                  database="app").stdout.strip() == "1", timeout=30),
       "and consumes into the test's MariaDB")
    is_eq(s.stop(), 0, "consume stops cleanly")

    q = bound_queue(ex)
    rid = str(uuid.uuid4())
    srv.sql("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version, "
            f"payload, status, created_at) VALUES ('{rid}', 'ORDER', '8002', 'ORDER_ACCEPTED', 1, "
            "'{\"orderId\": 8002}', 'PENDING', UTC_TIMESTAMP(6))", database="app")
    r = Relay(ex)
    r.config["mysql"] = {"url": url, "allow_unsafe_durability": True}
    json.dump(r.config, open(r.config_path, "w"))
    r.start()
    got = []
    ok(wait_until(lambda: got.extend(drain(q)) or any(p.message_id == rid for p, _ in got), timeout=30),
       "relay starts with the override and publishes the row", detail=r.text()[-2000:])
    ok(any(l.get("level") == "warn" and named in l.get("msg", "") for l in r.lines()),
       "with its warning naming sync_binlog")
    is_eq(r.stop(), 0, "the relay stops cleanly")

    srv.sql("SET GLOBAL sync_binlog = 1")
    rc, out = run_sidecar_cmd(["check"], relay_cfg)
    is_eq(rc, 0, f"sync_binlog=1: check passes ({out.strip()[:200]})")

    # The same server as a one-node Galera cluster.
    srv.stop()
    if not PROVIDER:
        bail("no Galera provider (Debian: galera-4)")
    if not port_free(GCOMM):
        bail(f"port {GCOMM} (group communication, SC_TEST_MYSQL2_PORT + 1) is in use")
    srv.start("--sync-binlog=1", "--wsrep-on=ON", f"--wsrep-provider={PROVIDER}",
              "--wsrep-cluster-address=gcomm://", "--wsrep-cluster-name=sc-durability",
              f"--wsrep-node-address=127.0.0.1:{GCOMM}", "--innodb-autoinc-lock-mode=2",
              f"--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:{GCOMM};"
              f"ist.recv_addr=127.0.0.1:{GCOMM + 1};gcache.size=16M")
    ok(wait_until(lambda: "ON" in srv.sql("SHOW STATUS LIKE 'wsrep_ready'").stdout, timeout=60),
       "the test's MariaDB is a one-node Galera cluster")
    rc, out = run_sidecar_cmd(["check"], consumer_cfg)
    line = [l for l in out.splitlines() if "mysql: connected" in l]
    ok(rc == 0 and line and "wsrep_on=ON" in line[0] and "innodb_flush_log_at_trx_commit=1" in line[0]
       and "wsrep_sync_wait=0" in line[0] and "pc.ignore_sb=false" in line[0]
       and "pc.ignore_quorum=false" in line[0] and "wsrep_cluster_size=1" in line[0],
       "check passes and prints the node's flush and wsrep settings", detail=out[-1500:])
    def ignore_sb(value, check=True):
        """pc.ignore_sb at run time: through wsrep_provider_options, or on
        MariaDB 11.1+ with the provider plugin loaded (which refuses that,
        1210) through the plugin's own wsrep_provider_pc_ignore_sb."""
        r = srv.sql(f"SET GLOBAL wsrep_provider_options = 'pc.ignore_sb={value}'", check=False)
        if r.returncode != 0 and "1210" in r.stderr:
            r = srv.sql(f"SET GLOBAL wsrep_provider_pc_ignore_sb = {'ON' if value == 'true' else 'OFF'}",
                        check=check)
        elif check and r.returncode != 0:
            bail(f"pc.ignore_sb={value}: {r.stderr}")

    try:
        ignore_sb("true")
        rc, out = run_sidecar_cmd(["check"], consumer_cfg)
        ok(rc == 1 and "not durable: pc.ignore_sb=true (a Galera component without quorum" in out,
           "pc.ignore_sb=true: check exits 1 naming it", detail=out[-1500:])
        rc, out = run_sidecar_cmd(["consume"], consumer_cfg)
        ok(rc == 2 and "pc.ignore_sb=true" in out, f"and consume refuses to start (exit {rc})",
           detail=out[-1500:])
        ignore_sb("false")
        srv.sql("SET GLOBAL innodb_flush_log_at_trx_commit = 2")
        rc, out = run_sidecar_cmd(["check"], consumer_cfg)
        ok(rc == 1 and f"mysql node 0 (127.0.0.1:{PORT}): not durable: innodb_flush_log_at_trx_commit=2 (" in out,
           "Galera's suggested flush 2 on the node: check exits 1 naming the node", detail=out[-1500:])
        rc, out = run_sidecar_cmd(["consume"], consumer_cfg)
        ok(rc == 2 and "innodb_flush_log_at_trx_commit=2" in out, f"and consume refuses (exit {rc})")
    finally:
        ignore_sb("false", check=False)
        srv.sql("SET GLOBAL innodb_flush_log_at_trx_commit = 1", check=False)

    srv.stop()
    srv.start("--sync-binlog=1", "--innodb-read-only")
    r = srv.sql("INSERT INTO consumed_event (consumer_name, event_id, consumed_at) "
                "VALUES ('x', 'y', UTC_TIMESTAMP(6))", check=False, database="app")
    ok(r.returncode != 0 and "ERROR 1036" in r.stderr and "is read only" in r.stderr,
       f"innodb_read_only: a write fails with 1036 ({r.stderr.strip()})")
    is_eq(srv.sql("SELECT @@GLOBAL.read_only").stdout.strip(), "0", "while read_only says 0")
    s = Sidecar(mysql_url=url, consumer_extra={"name": "dur2-ro-" + suffix()})
    s.start(wait=False)
    ok(wait_until(lambda: any("read-only (@@global.innodb_read_only = 1)" in l.get("msg", "")
                              for l in s.lines()), timeout=30),
       "a consumer's session on it is refused as read-only", detail=s.text()[-2000:])
    ok(not any(l.get("msg", "").startswith("worker 0 consuming") for l in s.lines()),
       "and it does not consume there")
    is_eq(s.stop(), 0, "stops cleanly")
finally:
    srv.stop()
    shutil.rmtree(srv.dir, ignore_errors=True)
done()
