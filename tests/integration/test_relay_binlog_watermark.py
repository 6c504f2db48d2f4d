"""relay.source "binlog" leaves published rows PENDING; the checkpoint's
watermark W (relay_checkpoint.published_created_before) says which are
published: every row created before it. Against a MariaDB of this test's own
with the binary log (binlog_server.py), the relay as the least-privilege
binlog role:

1. after publishing, W passes every published row, and stays below now;
2. a producer transaction held open with an early created_at keeps W at or
   below that row's created_at while rows after it are published; once it
   commits the row is published and W passes it;
3. the relay's sidecar_relay_pending / oldest_pending_age gauges and the
   console's sidecar_outbox_oldest_pending_age_seconds and PENDING count go
   back to 0 after the drain; the console counts the rows before W
   PUBLISHED, and its publish rate follows W's movement;
4. inspect (and inspect --aggregate) says PUBLISHED (binlog relay:
   checkpoint watermark W) for a published row, PENDING for one created
   after W;
5. purge deletes the published rows (past the retention) and never one at or
   after W."""
import re
import shutil
import uuid

from harness import *

from binlog_server import Server, binlog_relay, setup

srv = Server()


def q(sql, args=None):
    with srv.db() as c, c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def insert(n, conn=None):
    ids = [str(uuid.uuid4()) for _ in range(n)]
    c = conn or srv.db()
    with c.cursor() as cur:
        for i, eid in enumerate(ids):
            cur.execute("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, "
                        "event_version, payload, created_at) VALUES (%s, 'ORDER', %s, 'ORDER_ACCEPTED', 1, "
                        "'{}', UTC_TIMESTAMP(6))", (eid, str(1000 + i)))
    if conn is None:
        c.close()
    return ids


def watermark():
    rows = q("SELECT published_created_before FROM relay_checkpoint WHERE outbox = 'outbox_event'")
    return rows[0][0] if rows else None


def created(ids):
    marks = ",".join(["%s"] * len(ids))
    return [r[0] for r in q(f"SELECT created_at FROM outbox_event WHERE event_id IN ({marks})", ids)]


def published(queue, seen):
    seen += [p.message_id for _, p, _ in drain_with_keys(queue)]
    return seen


def relay_gauge(r, name):
    return metric_sum(r.http_port(), r"^sidecar_relay_%s\{[^}]*\} (\d+)(?:\.\d+)?$" % name, -1)


def admin_cmd(args):
    cfg = {"amqp": {"url": os.environ["SC_TEST_AMQP_URL"]}, "mysql": {"url": URL}, "http": {"listen": "off"}}
    return run_sidecar_cmd(args, cfg)


try:
    srv.start()
    URL, LEAST_URL = setup(srv)
    ex = "wm-" + suffix()
    queue = bound_queue(ex)
    r = binlog_relay(ex, LEAST_URL, worker_id="wm-a").start()
    seen = []
    # the console from the start: it sees the watermark move
    import urllib.request
    con_dir = tempfile.mkdtemp(prefix="sc-console-")
    con_cfg = os.path.join(con_dir, "console.json")
    with open(con_cfg, "w") as f:
        json.dump({"amqp": {"url": os.environ["SC_TEST_AMQP_URL"], "heartbeat_s": 5},
                   "mysql": {"url": URL}, "consumers": [],
                   "console": {"listen": "127.0.0.1:0", "sample_ms": 1000}}, f)
    con_log = open(os.path.join(con_dir, "console.log"), "w")
    con = subprocess.Popen([SIDECAR, "console", "-c", con_cfg], stdout=con_log, stderr=subprocess.STDOUT)

    def console_port():
        m = re.search(r"console: listening on 127\.0\.0\.1:(\d+)", open(con_log.name).read())
        return int(m.group(1)) if m else None

    port = wait_until(console_port, timeout=20)
    age = lambda: metric_sum(port, r"^sidecar_outbox_oldest_pending_age_seconds (\d+)\.\d+$", -1)
    pending = lambda: metric_sum(port, r'^sidecar_outbox_rows\{status="PENDING"\} (\d+)$', -1)
    published_n = lambda: metric_sum(port, r'^sidecar_outbox_rows\{status="PUBLISHED"\} (\d+)$', -1)

    def max_rate():
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/history", timeout=10) as resp:
            h = json.loads(resp.read().decode())
        return max([v for v in h["database"]["published_per_min"] if v is not None] or [-1])
    ok(port and wait_until(lambda: published_n() == 0 and pending() == 0, timeout=15),
       "the console samples the empty outbox", open(con_log.name).read()[-1500:])

    # 1. W passes every published row
    first = insert(20)
    ok(wait_until(lambda: set(first) <= set(published(queue, seen)), timeout=30),
       f"20 inserts published ({len(set(first) & set(seen))})")
    ok(wait_until(lambda: published_n() == 20, timeout=20),
       f"the console counts them PUBLISHED, the rows before W, though their status is PENDING ({published_n()})")
    ok(wait_until(lambda: max_rate() > 0, timeout=15),
       f"and its publish rate follows W's movement (at most {max_rate():.0f}/min in its history)")
    newest = max(created(first))
    ok(wait_until(lambda: watermark() is not None and watermark() > newest, timeout=20),
       f"W passes the newest published row's created_at ({watermark()} > {newest})", r.text()[-2000:])
    now = q("SELECT UTC_TIMESTAMP(6)")[0][0]
    ok(watermark() < now, f"and stays below the server's time ({watermark()} < {now})")
    st = q("SELECT status, COUNT(*) FROM outbox_event GROUP BY status")
    ok(st == (("PENDING", 20),), f"their rows are untouched, PENDING: {st}")

    # 2. a producer transaction held open with an early created_at
    held = srv.db()
    held.autocommit(False)
    slow = insert(1, conn=held)
    with held.cursor() as cur:
        cur.execute("SELECT created_at FROM outbox_event WHERE event_id = %s", slow)
        slow_at = cur.fetchone()[0]
    time.sleep(1.2)
    after = insert(10)
    ok(wait_until(lambda: set(after) <= set(published(queue, seen)), timeout=30),
       "10 rows inserted after it are published while it is open")
    newest_after = max(created(after))
    # several samples and checkpoints go by (2 s apart, lease renewals 1 s)
    time.sleep(8)
    w_open = watermark()
    ok(w_open is not None and w_open <= slow_at,
       f"W stays at or below the open transaction's row ({w_open} <= {slow_at})")
    ok(w_open is not None and w_open > newest,
       f"and still passed what was published before it opened ({w_open} > {newest})")
    ok(slow[0] not in seen, "the open transaction's row is not published")
    # the rows after the open one count as pending: W cannot tell them yet
    ok(wait_until(lambda: relay_gauge(r, "pending") == 10, timeout=15),
       f"sidecar_relay_pending counts the 10 rows at or after W ({relay_gauge(r, 'pending')})")
    held.commit()
    held.close()
    ok(wait_until(lambda: slow[0] in published(queue, seen), timeout=30),
       "once it commits, its row is published")
    ok(wait_until(lambda: watermark() > max(newest_after, slow_at), timeout=20),
       f"and W passes it and the rows after it ({watermark()} > {max(newest_after, slow_at)})")
    ok(all(seen.count(e) == 1 for e in first + after + slow), f"each once ({len(seen)} messages)")

    # 3. the gauges back to 0 after the drain
    ok(wait_until(lambda: relay_gauge(r, "pending") == 0, timeout=15),
       f"sidecar_relay_pending 0 after the drain ({relay_gauge(r, 'pending')})")
    ok(relay_gauge(r, "oldest_pending_age_seconds") == 0,
       f"sidecar_relay_oldest_pending_age_seconds 0 ({relay_gauge(r, 'oldest_pending_age_seconds')})")
    ok(port and wait_until(lambda: age() == 0 and pending() == 0, timeout=15),
       f"the console: oldest PENDING age 0 and 0 PENDING rows ({age()}, {pending()}; 31 rows PENDING "
       "in the table)", open(con_log.name).read()[-1500:])
    ok(published_n() == 31, f"and 31 PUBLISHED ({published_n()})")

    # 4. inspect, and 5. purge: a row created after W (no relay to pass it)
    r.stop()
    late = insert(1)
    rc, out = admin_cmd(["inspect", slow[0]])
    w_now = watermark()
    w_text = w_now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    ok(rc == 0 and f"outbox:   PUBLISHED (binlog relay: checkpoint watermark {w_text}) (type ORDER_ACCEPTED"
       in out, "inspect: a published row is PUBLISHED (binlog relay: checkpoint watermark W)", out)
    rc, out = admin_cmd(["inspect", "--json", slow[0]])
    j = json.loads(out[out.index("{"):]) if "{" in out else {}
    ob = j.get("outbox") or {}
    ok(ob.get("status") == "PUBLISHED" and ob.get("stored_status") == "PENDING" and
       ob.get("binlog_watermark") == w_text,
       f"inspect --json: status PUBLISHED, stored_status PENDING, binlog_watermark W ({ob})")
    rc, out = admin_cmd(["inspect", late[0]])
    ok(rc == 0 and "outbox:   PENDING (type ORDER_ACCEPTED" in out,
       "inspect: a row created after W is PENDING", out)
    rc, out = admin_cmd(["inspect", "--aggregate", "ORDER", "1000"])
    lines = [l for l in out.splitlines() if " ORDER_ACCEPTED v1 " in l]
    ok(rc == 0 and len(lines) == 4 and
       sum(l.endswith(f"PUBLISHED (binlog relay: checkpoint watermark {w_text})") for l in lines) == 3 and
       late[0] in lines[-1] and lines[-1].endswith("PENDING"),
       "inspect --aggregate: the 3 published events PUBLISHED (binlog relay: ...), the one after W PENDING", out)
    ok(wait_until(lambda: pending() == 1, timeout=15) and published_n() == 31,
       f"and the console counts it PENDING ({pending()}), the 31 still PUBLISHED ({published_n()})")

    def console_event(eid):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/event?id={eid}", timeout=10) as resp:
            return json.loads(resp.read().decode()).get("outbox") or {}
    ev, ev_late = console_event(slow[0]), console_event(late[0])
    ok(ev.get("status") == "PUBLISHED" and ev.get("stored_status") == "PENDING" and
       ev.get("binlog_watermark") == w_text and ev_late.get("status") == "PENDING" and
       "stored_status" not in ev_late,
       f"the console's event search: the same ({ev.get('status')}, {ev.get('stored_status')}; "
       f"{ev_late.get('status')})")
    con.terminate()
    con.wait(20)
    rc, out = admin_cmd(["purge", "--older-than", "1h", "--force"])
    ok(rc == 0 and "created before " in out and "deleted 0 rows" in out.split("binlog relay")[-1] and
       q("SELECT COUNT(*) FROM outbox_event")[0][0] == 32,
       "purge --older-than 1h: the published rows are younger, none deleted", out)
    rc, out = admin_cmd(["purge", "--older-than", "0s", "--force", "--dry-run"])
    ok(rc == 0 and re.search(r"outbox_event \(published by the binlog relay, created before [^)]*\): "
                             r"would delete 31 rows", out), "purge --dry-run counts the 31 published", out)
    rc, out = admin_cmd(["purge", "--older-than", "0s", "--force"])
    left = q("SELECT event_id FROM outbox_event")
    ok(rc == 0 and re.search(r"outbox_event \(published by the binlog relay, created before [^)]*\): "
                             r"deleted 31 rows \(2 batches\)", out),
       "purge deletes the 31 rows the binlog relay published", out)
    ok(left == ((late[0],),), f"and never the row created after W: {left}")
finally:
    if "con" in globals() and con.poll() is None:
        con.terminate()
    srv.stop()
    shutil.rmtree(srv.dir, ignore_errors=True)
done()
