"""`sidecar check` reads binlog_format, transaction_isolation, the durability
settings (innodb_flush_log_at_trx_commit on every node) and wsrep on every
Galera node and prints them; Galera itself refuses statement-based
binlog, so a standalone server with log_bin=ON and binlog_format=STATEMENT
stands in for the unsafe node: check refuses it for the relay (exit 1,
naming node and setting), and a relay given that node first refuses it at
connect and goes on to the next node."""
from cluster_lib import *

ex = "outbox-" + suffix()
cfg = {"amqp": {"url": AMQP}, "mysql": {"url": MYSQL_RELAY}, "http": {"listen": "off"},
       "relay": {"exchange": ex, "worker_id": "check-" + suffix()}}
rc, out = run_sidecar_cmd(["check"], cfg)
is_eq(rc, 0, "check passes on the healthy cluster")
for port in (23311, 23312, 23313):
    line = [l for l in out.splitlines() if f"127.0.0.1:{port}" in l and "mysql: connected" in l]
    ok(line and "binlog_format=ROW" in line[0] and "wsrep_on=ON" in line[0] and "wsrep_cluster_size=3" in line[0]
       and "transaction_isolation=REPEATABLE-READ" in line[0] and "wsrep_cluster_status=Primary" in line[0]
       and "innodb_flush_log_at_trx_commit=1" in line[0] and "pc.ignore_sb=false" in line[0],
       f"node {port}: settings printed ({line[:1]})", detail=out)
ok(out.count("amqp: connected to node") == 3, "every broker node checked", detail=out)
try:
    node_root_query(3, "SET GLOBAL binlog_format = 'STATEMENT'")
    ok(False, "Galera accepted binlog_format=STATEMENT")
    node_root_query(3, "SET GLOBAL binlog_format = 'ROW'")
except Exception as e:
    ok("1231" in str(e), f"Galera itself refuses binlog_format=STATEMENT ({e})")

ok(servers("start-statement").returncode == 0, "a standalone server with statement-based binlog started")
stmt_url = "mysql://sidecar_relay:relay-secret@127.0.0.1:23319/app"
cfg["mysql"]["url"] = [stmt_url, MYSQL_RELAY[1]]
rc, out = run_sidecar_cmd(["check"], cfg)
ok(rc == 1 and "mysql node 0 (127.0.0.1:23319): unsafe for the relay: binlog_format=STATEMENT with log_bin=ON" in out,
   "check refuses the statement-based node for the relay, naming it and the setting", detail=out)
consumer_only = {k: v for k, v in cfg.items() if k != "relay"}
rc2, out2 = run_sidecar_cmd(["check"], consumer_only)
ok(rc2 == 0 and "unsafe for a relay (none configured here)" in out2, "without a relay it is reported, not refused",
   detail=out2)
q = quorum_queue(ex)
ids = insert_outbox(20)
r = configure(Relay(ex, worker_id="relay-s-" + suffix(), batch=10, lease_ms=10000, poll_ms=20),
              [stmt_url, MYSQL_RELAY[1]], [AMQP[1]])
r.start()
ok(wait_until(lambda: count_in("outbox_event", "event_id", ids, "AND status = 'PUBLISHED'") == 20, timeout=60),
   "the relay published through the next node")
r.stop()
refused = [l for l in r.lines() if "refused: binlog_format=STATEMENT" in l.get("msg", "")]
ok(refused, "the relay refused the statement-based node at connect", detail=r.text()[-2000:])
ok(connects(r, "mysql")[-1:] and connects(r, "mysql")[-1][0] == 1,
   f"and connected to the next node ({connects(r, 'mysql')})")
drain_with_keys(q)
done()
