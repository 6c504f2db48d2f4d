"""relay.source "binlog" and a FAILED row, on a MariaDB of this test's own with
the binary log on (binlog_server.py, the suite's MariaDB port + 2):

1. per_aggregate: an aggregate's row the rules refuse, in one transaction
   with its successors, is FAILED and holds them (PENDING with a lease,
   never published), and a later transaction's too; other aggregates flow;
   sidecar_relay_held_aggregates is 1; inspect and purge see the held rows
   as not published;
2. kill -9 and a restart: the held set is read back from the table, and a
   new event of the aggregate is held as well;
3. the row repaired and set PENDING (the console's statement): it is
   published, then every held event, in order, each once, and marked
   PUBLISHED; the aggregate's next event follows them;
4. the broker refuses one message (above its max_message_size): the row is
   FAILED with the broker's reason and its aggregate is held the same way,
   inside one batch; repaired, the aggregate goes out in order;
5. relay.ordering none: nothing is held, and a repaired row is published."""
import re
import tempfile
import uuid

from harness import *

from binlog_server import PORT, Server, binlog_relay, setup

srv = Server()
MIB = 1024 * 1024


def q(sql, args=None):
    with srv.db() as c, c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


VERSION = {}


def insert(rows, conn=None):
    """rows: (aggregate_id, event_type, payload size) in one transaction, each
    aggregate's event_version counting up; the ids."""
    ids = [str(uuid.uuid4()) for _ in rows]
    c = conn or srv.db()
    c.autocommit(False)
    with c.cursor() as cur:
        for eid, (agg, etype, size) in zip(ids, rows):
            VERSION[agg] = VERSION.get(agg, 0) + 1
            cur.execute("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, "
                        "event_version, payload, created_at) VALUES (%s, 'ORDER', %s, %s, %s, %s, "
                        "UTC_TIMESTAMP(6))", (eid, agg, etype, VERSION[agg], json.dumps({"pad": "x" * size})))
    c.commit()
    if conn is None:
        c.close()
    return ids


def status(ids):
    got = dict((r[0], (r[1], r[2] is not None)) for r in
               q("SELECT event_id, status, lease_until FROM outbox_event WHERE event_id IN (%s)"
                 % ",".join(["%s"] * len(ids)), tuple(ids)))
    return [got.get(e) for e in ids]


def relay(ex, ordering):
    return binlog_relay(ex, LEAST_URL, worker_id="held-a", batch=20, ordering=ordering)


class Seen:
    """Every message of a queue, in arrival order."""

    def __init__(self, queue):
        self.queue, self.ids = queue, []

    def until(self, want, timeout=30):
        want = set(want)
        deadline = time.time() + timeout
        while time.time() < deadline:
            self.ids += [p.message_id for _, p, _ in drain_with_keys(self.queue)]
            if want <= set(self.ids):
                return True
            time.sleep(0.05)
        return False


def in_order(seen, ids):
    first = {}
    for i, e in enumerate(seen):
        first.setdefault(e, i)
    return all(e in first for e in ids) and all(first[a] < first[b] for a, b in zip(ids, ids[1:]))


def console(url):
    """sidecar console on url's database, sampling every second: (its port, stop)."""
    d = tempfile.mkdtemp(prefix="sc-console-")
    cfg = os.path.join(d, "console.json")
    with open(cfg, "w") as f:
        json.dump({"amqp": {"url": os.environ["SC_TEST_AMQP_URL"], "heartbeat_s": 5}, "mysql": {"url": url},
                   "consumers": [], "console": {"listen": "127.0.0.1:0", "sample_ms": 1000}}, f)
    log = os.path.join(d, "console.log")
    p = subprocess.Popen([SIDECAR, "console", "-c", cfg], stdout=open(log, "w"), stderr=subprocess.STDOUT)

    def port():
        m = re.search(r"console: listening on 127\.0\.0\.1:(\d+)", open(log).read())
        return int(m.group(1)) if m else None

    def stop():
        p.terminate()
        p.wait(30)
    return wait_until(port, timeout=20), stop


def held_gauge(r):
    return metric_sum(r.http_port(), r"^sidecar_relay_held_aggregates\{[^}]*\} (-?\d+)$", -9)


try:
    srv.start()
    URL, LEAST_URL = setup(srv)
    ex = "held-" + suffix()
    seen = Seen(bound_queue(ex))

    # 0. check: the binlog grant of 0.3 (UPDATE on status alone) cannot mark a held row
    q("CREATE USER IF NOT EXISTS 'oldgrant'@'127.0.0.1' IDENTIFIED BY 'x'")
    q("GRANT REPLICATION SLAVE, REPLICATION CLIENT, PROCESS ON *.* TO 'oldgrant'@'127.0.0.1'")
    q("GRANT SELECT, UPDATE (status) ON app.outbox_event TO 'oldgrant'@'127.0.0.1'")
    q("GRANT SELECT, INSERT, UPDATE ON app.relay_checkpoint TO 'oldgrant'@'127.0.0.1'")
    cfg = dict(relay(ex, "per_aggregate").config, http={"listen": "off"})
    cfg["mysql"] = {"url": LEAST_URL}
    rc, out = run_sidecar_cmd(["check"], cfg)
    ok(rc == 0, f"check passes with sql/grants/relay_binlog.sql (exit {rc})", out[-400:])
    cfg["mysql"] = {"url": f"mysql://oldgrant:x@127.0.0.1:{PORT}/app"}
    rc, out = run_sidecar_cmd(["check"], cfg)
    ok(rc == 1 and "lacks UPDATE (status, lease_owner, lease_until, published_at)" in out,
       f"check names the columns the 0.3 grant lacks (exit {rc})", out[-400:])

    # 1. a refused row holds its aggregate, in its own batch and after it
    r = relay(ex, "per_aggregate").start()
    a = insert([("A", "ORDER_ACCEPTED", 10), ("A", "", 10), ("A", "ORDER_PAID", 10), ("A", "ORDER_SHIPPED", 10),
                ("B", "ORDER_ACCEPTED", 10)])
    a_ok, a_bad, a_held = a[0], a[1], a[2:4]
    b1 = a[4]
    ok(seen.until([a_ok, b1]), "the aggregate's event before the refused one and another aggregate's go out",
       f"seen {a_ok in seen.ids} {b1 in seen.ids}")
    later = insert([("A", "ORDER_PAID", 10), ("B", "ORDER_PAID", 10)])
    ok(seen.until([later[1]]), "a later transaction: the other aggregate's event goes out")
    ok(status([a_bad]) == [("FAILED", True)], f"the refused row is FAILED, with the held mark: {status([a_bad])}")
    held = a_held + [later[0]]
    ok(not set(held) & set(seen.ids), "its successors, in its batch and after it, are not published")
    ok(status(held) == [("PENDING", True)] * 3, f"they stay PENDING with a lease, held: {status(held)}")
    ok(wait_until(lambda: held_gauge(r) == 1, timeout=10), f"sidecar_relay_held_aggregates 1 ({held_gauge(r)})")
    ok(wait_until(lambda: "every other unpublished event of aggregate ORDER/A is held" in r.text(), timeout=5),
       "the FAILED row's log line says its aggregate is held")
    ok(wait_until(lambda: q("SELECT published_created_before > MAX(o.created_at) FROM relay_checkpoint, "
                            "outbox_event o WHERE o.event_id IN (%s, %s)", tuple(held[1:]))[0][0] == 1,
                  timeout=15), "the checkpoint's watermark passes the held rows")
    gauge = lambda name: metric_sum(r.http_port(), r"^sidecar_relay_%s\{[^}]*\} (\d+)(?:\.\d+)?$" % name, -1)
    ok(wait_until(lambda: gauge("pending") == 3 and gauge("oldest_pending_age_seconds") >= 1, timeout=20),
       f"sidecar_relay_pending counts the 3 held rows, and their age ({gauge('pending')}, "
       f"{gauge('oldest_pending_age_seconds')} s)")
    con_port, stop_console = console(URL)
    c_pending = lambda: metric_sum(con_port, r'^sidecar_outbox_rows\{status="PENDING"\} (\d+)$', -1)
    c_published = lambda: metric_sum(con_port, r'^sidecar_outbox_rows\{status="PUBLISHED"\} (\d+)$', -1)
    ok(wait_until(lambda: c_pending() == 3 and c_published() == 3, timeout=20),
       f"the console counts them PENDING and the 3 published ones PUBLISHED ({c_pending()}, {c_published()})")
    stop_console()
    cfg = dict(r.config, mysql={"url": URL}, http={"listen": "off"})
    rc, out = run_sidecar_cmd(["inspect", held[0]], cfg)
    st = re.search(r"outbox: +(\w+)", out)
    ok(rc == 0 and st and st.group(1) == "PENDING",
       f"inspect: a held row is PENDING, not published by the watermark (exit {rc})", out[-300:])
    rc, out = run_sidecar_cmd(["purge", "--older-than", "1s", "--force"], cfg)
    ok(status(held) == [("PENDING", True)] * 3, f"purge leaves the held rows (exit {rc}): {status(held)}", out[-300:])

    # 2. kill -9, restart: still held, and so is a new event of the aggregate
    r.kill9()
    r = relay(ex, "per_aggregate").start()
    more = insert([("A", "ORDER_PAID", 10), ("B", "ORDER_SHIPPED", 10)])
    ok(seen.until([more[1]]), "after kill -9 and a restart the other aggregate flows")
    held.append(more[0])
    ok(wait_until(lambda: status(held[-1:]) == [("PENDING", True)], timeout=10) and not set(held) & set(seen.ids),
       f"the held set is read back: the aggregate's new event is held too ({status(held)})")
    ok(wait_until(lambda: held_gauge(r) == 1, timeout=10), f"sidecar_relay_held_aggregates 1 again ({held_gauge(r)})")

    # 3. repaired and set PENDING: it, then the held events, in order, each once
    q("UPDATE outbox_event SET event_type = 'ORDER_CANCELLED' WHERE event_id = %s", (a_bad,))
    q("UPDATE outbox_event SET status = 'PENDING' WHERE event_id = %s AND status = 'FAILED'", (a_bad,))
    t0 = time.time()
    ok(seen.until([a_bad] + held, timeout=20),
       f"the repaired row and the held events are published ({time.time() - t0:.1f} s)")
    ok(in_order(seen.ids, [a_ok, a_bad] + held), "in their aggregate's order")
    ok(all(seen.ids.count(e) == 1 for e in [a_bad] + held),
       f"each once ({[seen.ids.count(e) for e in [a_bad] + held]})")
    ok(wait_until(lambda: status([a_bad] + held) == [("PUBLISHED", False)] * 5, timeout=10),
       f"and marked PUBLISHED: {status([a_bad] + held)}")
    nxt = insert([("A", "ORDER_CLOSED", 10)])
    ok(seen.until(nxt) and in_order(seen.ids, held + nxt), "the aggregate's next event follows them")
    ok(wait_until(lambda: held_gauge(r) == 0, timeout=10), f"sidecar_relay_held_aggregates 0 ({held_gauge(r)})")

    # 4. the broker refuses one message: its aggregate is held the same way
    r.stop()
    before = broker_max_message_size()
    ok(before is not None and broker_max_message_size(MIB) == MIB, "the broker's max_message_size is 1 MiB")
    r = relay(ex, "per_aggregate").start()
    big = insert([("C", "ORDER_ACCEPTED", 10), ("C", "ORDER_PAID", 2 * MIB), ("C", "ORDER_SHIPPED", 10),
                  ("C", "ORDER_CLOSED", 10), ("D", "ORDER_ACCEPTED", 10)])
    ok(seen.until([big[0], big[4]]), "the broker refuses one: the rest of the batch's other aggregates go out")
    ok(wait_until(lambda: status(big[1:2]) == [("FAILED", True)], timeout=10),
       f"the refused message's row is FAILED ({status(big[1:2])})")
    ok(wait_until(lambda: "was refused by the broker" in r.text(), timeout=5), "with the broker's reason logged")
    # held in memory at once; their mark comes when the batch after the
    # refusal (the publisher reconnected) reaches them
    ok(wait_until(lambda: status(big[2:4]) == [("PENDING", True)] * 2, timeout=10)
       and not set(big[2:4]) & set(seen.ids),
       f"its aggregate's successors in the same batch are held, not published ({status(big[2:4])})")
    q("UPDATE outbox_event SET payload = '{\"small\": 1}', status = 'PENDING' WHERE event_id = %s", (big[1],))
    ok(seen.until(big[1:4], timeout=20) and in_order(seen.ids, big[:4]),
       "repaired, the aggregate goes out in order")
    broker_max_message_size(before)
    r.stop()

    # 5. ordering none: nothing held; a repaired row is published
    r = relay(ex, "none").start()
    n = insert([("E", "", 10), ("E", "ORDER_PAID", 10)])
    ok(seen.until(n[1:]) and wait_until(lambda: status(n[:1]) == [("FAILED", True)], timeout=10),
       "ordering none: the refused row is FAILED, its successor published")
    q("UPDATE outbox_event SET event_type = 'ORDER_ACCEPTED', status = 'PENDING' WHERE event_id = %s", (n[0],))
    ok(seen.until(n[:1], timeout=20), "the repaired row is published")
    ok(wait_until(lambda: status(n[:1]) == [("PUBLISHED", False)], timeout=10), f"and marked PUBLISHED {status(n[:1])}")
    r.stop()
finally:
    srv.stop()
done()
