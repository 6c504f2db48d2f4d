"""relay.source "binlog" against a MariaDB of this test's own that compresses
its binary log (log_bin_compress ON, every event above 10 bytes), on
SC_TEST_BINLOG_MYSQL_PORT (default: the suite's MariaDB port + 2), stopped
and removed at the end. The reader cannot read compressed events, so it
must never pass over one that may hold outbox rows:

1. `check` refuses log_bin_compress, naming it;
2. an outbox insert logged compressed stops the relay (exit 2), naming the
   event's type, its position and log_bin_compress; nothing is published
   and the checkpoint stays where it was; started again, it stops again;
3. the recovery of docs/operations.md (compression off, poll over the gap,
   the checkpoint moved to the end) publishes the row, and binlog mode
   runs again."""
import re
import shutil
import uuid

from harness import *

from binlog_server import Server, binlog_relay, published, recover, setup

srv = Server()


def q(sql, args=None):
    with srv.db() as c, c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def insert(n):
    ids = [str(uuid.uuid4()) for _ in range(n)]
    for i, eid in enumerate(ids):
        q("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version, payload, "
          "created_at) VALUES (%s, 'ORDER', %s, 'ORDER_ACCEPTED', 1, %s, UTC_TIMESTAMP(6))",
          (eid, str(2000 + i), json.dumps({"n": i})))
    return ids


def relay(ex, source="binlog"):
    return binlog_relay(ex, URL, "compressed-a" if source == "binlog" else "compressed-poll", source)


def checkpoint():
    return q("SELECT binlog_file, binlog_pos FROM relay_checkpoint WHERE outbox = 'outbox_event'")[0]


try:
    srv.start("--log-bin-compress=ON", "--log-bin-compress-min-len=10")
    URL, LEAST_URL = setup(srv)
    ok(q("SELECT @@GLOBAL.log_bin_compress, @@GLOBAL.log_bin_compress_min_len") == ((1, 10),),
       "the test's MariaDB compresses every binary log event above 10 bytes")

    # 1. check refuses it
    ex = "compressed-" + suffix()
    cfg = dict(relay(ex).config)
    cfg["relay"] = dict(cfg["relay"], worker_id="compressed-a")
    cfg["mysql"] = {"url": LEAST_URL}
    cfg["http"] = {"listen": "off"}
    rc, out = run_sidecar_cmd(["check"], cfg)
    ok(rc == 1 and "log_bin_compress is on" in out, f"check refuses log_bin_compress (exit {rc})", out)

    # 2. the checkpoint at the log's end, then a row logged compressed
    end_file, end_pos = q("SHOW MASTER STATUS")[0][:2]
    q("INSERT INTO relay_checkpoint (outbox, binlog_file, binlog_pos, updated_at) "
      "VALUES ('outbox_event', %s, %s, UTC_TIMESTAMP(6))", (end_file, end_pos))
    queue = bound_queue(ex)
    gap = insert(1)
    r = relay(ex).start()
    code = r.wait_exit(30)
    text = r.text()
    stop = [l for l in r.lines() if l.get("level") == "error" and "cannot read" in l.get("msg", "")]
    msg = stop[0]["msg"] if stop else ""
    at = re.search(re.escape(end_file) + r":(\d+) an event of type 16[69] \(WRITE_ROWS_COMPRESSED_EVENT(_V1)?\)", msg)
    ok(code == 2 and at and int(at.group(1)) > end_pos and "log_bin_compress" in msg and "never skipping" in msg,
       f"an outbox insert logged compressed stops the relay (exit {code}) naming the event's type, its "
       f"position and log_bin_compress", msg or text[-1500:])
    ok(not drain_with_keys(queue), "nothing was published past it")
    is_eq(tuple(checkpoint()), (end_file, end_pos), "the checkpoint stays before it")
    r = relay(ex).start()
    code = r.wait_exit(30)
    ok(code == 2 and "cannot read" in r.text(), f"started again, it stops again, never skipping (exit {code})")

    # 3. recovery: compression off, the gap by polling, the checkpoint moved
    q("SET GLOBAL log_bin_compress = OFF")
    seen, fresh, r = recover(q, queue, gap, relay(ex, source="poll"), relay(ex), lambda: insert(3))
    ok(set(gap) <= set(seen) and set(fresh) <= set(seen),
       "recovery: poll mode publishes the gap, then binlog mode runs again past the compressed events")
    ok(r.alive(), "and keeps running")
    r.stop()
finally:
    srv.stop()
    shutil.rmtree(srv.dir, ignore_errors=True)
done()
