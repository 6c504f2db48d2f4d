"""relay.source "binlog": a checkpoint's file and offset name a place on one
server's log only. Against a MariaDB of this test's own (SC_TEST_BINLOG_MYSQL_PORT,
default: the suite's MariaDB port + 2), with the least-privilege binlog role:

1. the relay stores the GTID its place was read after, and this server says
   its log stands at that GTID there (BINLOG_GTID_POS): a restart resumes;
2. after RESET MASTER the checkpoint's file exists again, and its offset is
   now inside other transactions (what a failover behind one address to
   another server looks like too): the relay stops (exit 2) naming the
   checkpoint's GTID and what the log holds there; nothing is published and
   the checkpoint stays where it was; started again, it stops again;
3. the recovery of docs/operations.md (poll over the gap, the checkpoint
   moved to the end with its GTID cleared) publishes every row once more
   or for the first time, and binlog mode runs again."""
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


def insert(n, start=0):
    ids = [str(uuid.uuid4()) for _ in range(n)]
    for i, eid in enumerate(ids):
        q("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version, payload, "
          "created_at) VALUES (%s, 'ORDER', %s, 'ORDER_ACCEPTED', 1, %s, UTC_TIMESTAMP(6))",
          (eid, str(start + i), json.dumps({"n": start + i, "pad": "x" * 200})))
    return ids


def relay(ex, url, source="binlog"):
    return binlog_relay(ex, url, "reset-a" if source == "binlog" else "reset-poll", source)


def checkpoint():
    return q("SELECT binlog_file, binlog_pos, IFNULL(gtid, '') FROM relay_checkpoint WHERE outbox = 'outbox_event'")[0]


try:
    srv.start()
    URL, LEAST_URL = setup(srv)
    ex = "reset-" + suffix()
    queue = bound_queue(ex)

    # 1. the GTID stored with the place is the log's own there
    first = insert(5)
    r = relay(ex, LEAST_URL).start()
    seen = published(queue, first)
    ok(set(first) <= set(seen), "binlog relay publishes the first rows")
    r.stop()
    file, pos, gtid = checkpoint()
    here = q("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))[0][0] or ""
    ok(gtid != "" and gtid in here.split(","),
       f"the checkpoint {file}:{pos} stores GTID {gtid!r}, the server's log stands at {here!r} there")
    r = relay(ex, LEAST_URL).start()
    more = insert(3, 100)
    seen = published(queue, more)
    ok(set(more) <= set(seen) and r.alive(), "restarted, it resumes from the checkpoint and publishes new rows")
    r.stop()
    file, pos, gtid = checkpoint()

    # 2. RESET MASTER: the same file name again, the offset now another
    # transaction's middle or start
    q("RESET MASTER")
    gap = insert(40, 200)
    now_file, now_size = q("SHOW MASTER STATUS")[0][:2]
    ok(now_file == file and now_size > pos,
       f"after RESET MASTER {file} exists again and reaches past the checkpoint's offset {pos} ({now_size})")
    r = relay(ex, LEAST_URL).start()
    code = r.wait_exit(30)
    stop = [l for l in r.lines() if l.get("level") == "error" and "another server" in l.get("msg", "")]
    msg = stop[0]["msg"] if stop else ""
    ok(code == 2 and gtid in msg and "never skipping" in msg and re.search(re.escape(file) + ":" + str(pos), msg),
       f"the relay stops (exit {code}) naming the checkpoint's place and GTID, never skipping", msg or r.text()[-1500:])
    ok(not drain_with_keys(queue), "nothing was published from the other log")
    is_eq(tuple(checkpoint()), (file, pos, gtid), "the checkpoint stays where it was")
    r = relay(ex, LEAST_URL).start()
    code = r.wait_exit(30)
    ok(code == 2 and "another server" in r.text(), f"started again, it stops again (exit {code})")

    # 3. recovery: poll over the gap, then the checkpoint moved to the end
    seen, fresh, r = recover(q, queue, gap, relay(ex, URL, source="poll"), relay(ex, LEAST_URL),
                             lambda: insert(3, 300))
    ok(set(gap) <= set(seen) and set(fresh) <= set(seen),
       "recovery: poll mode publishes the gap, then binlog mode runs again")
    ok(r.alive(), "and keeps running")
    r.stop()
finally:
    srv.stop()
    shutil.rmtree(srv.dir, ignore_errors=True)
done()
