"""relay.source "binlog" against a MariaDB of this test's own with the binary
log on (ROW format; the suite's server runs without one), on
SC_TEST_BINLOG_MYSQL_PORT (default: the suite's MariaDB port + 2), stopped
and removed at the end:

1. a bad relay.source stops start-up naming the key; check passes the
   binlog reader's needs, and refuses binlog_format STATEMENT or MIXED,
   binlog_row_image MINIMAL and a server_id equal to the relay's replica
   id, each set with SET GLOBAL and put back;
2. inserts are published once each, in both content modes, and no outbox
   row is updated (they stay PENDING); the checkpoint row holds a position;
3. a rolled-back transaction is never published; other tables' rows and
   DDL are ignored; a row the rules refuse is FAILED on its own;
4. one transaction of 1,000 rows; 2,000 rows from 8 concurrent producers
   (a read-back right after the binlog event must wait, never skip);
5. per_aggregate: each aggregate's events arrive in commit order;
6. kill -9 between the confirm and the checkpoint write: the batch comes
   again after the restart, nothing is missing;
7. a database restart, and a binlog rotation;
8. two relays, one active; kill -9 of the active one: the standby takes
   over within lease_ms + poll_ms; SIGTERM hands the lease over at once;
9. a purge past the checkpoint: the relay stops (exit 2) naming the file;
   the recovery (poll over the gap, then the checkpoint moved to the end)
   publishes the gap and binlog mode runs again;
10. trace context (traceparent, tracestate) and x-ordering-key: each
   message the binlog source sends is the poll source's for the same rows,
   in both content modes."""
import re
import shutil
import threading
import uuid

from harness import *

from binlog_server import PORT, Server, binlog_relay, setup

srv = Server()


def q(sql, args=None):
    with srv.db() as c, c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def insert(n, agg="ORDER", agg_id=None, etype="ORDER_ACCEPTED", conn=None):
    ids = [str(uuid.uuid4()) for _ in range(n)]
    own = conn is None
    c = conn or srv.db()
    with c.cursor() as cur:
        for i, eid in enumerate(ids):
            cur.execute("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, "
                        "event_version, payload, created_at) VALUES (%s, %s, %s, %s, 1, %s, UTC_TIMESTAMP(6))",
                        (eid, agg, agg_id or str(1000 + i), etype, json.dumps({"n": i, "big": 12345678901234567890})))
    if own:
        c.close()
    return ids


def ids_in(msgs):
    out = []
    for _, props, body in msgs:
        out.append(props.message_id)
    return out


def wait_ids(queue, want, timeout=60):
    """Drains queue until every id of want has arrived: the ids seen, in order."""
    seen, want = [], set(want)
    deadline = time.time() + timeout
    while time.time() < deadline:
        seen += ids_in(drain_with_keys(queue))
        if want <= set(seen):
            time.sleep(0.3)
            seen += ids_in(drain_with_keys(queue))
            return seen
        time.sleep(0.1)
    return seen


def relay(ex, **kw):
    return binlog_relay(ex, URL, **kw)


def checkpoint():
    rows = q("SELECT binlog_file, binlog_pos, IFNULL(gtid, ''), lease_owner FROM relay_checkpoint "
             "WHERE outbox = 'outbox_event'")
    return rows[0] if rows else None


try:
    srv.start()
    URL, LEAST_URL = setup(srv)

    # 1. a bad value stops start-up, naming the key
    ex = "binlog-" + suffix()
    bad = relay(ex, source="logfile")
    p = subprocess.run([SIDECAR, "relay", "--config", bad.config_path], capture_output=True, text=True, timeout=30)
    ok(p.returncode == 2 and "relay.source" in p.stderr,
       f"relay.source \"logfile\" stops start-up naming the key (exit {p.returncode}: {p.stderr.strip()[-160:]})")

    # sidecar check: what the binlog reader needs, here and on the suite's server (no binlog)
    cfg = dict(bad.config)
    cfg["relay"] = dict(bad.config["relay"], source="binlog", worker_id="binlog-a")
    cfg["mysql"] = {"url": LEAST_URL}
    cfg["http"] = {"listen": "off"}
    rc, out = run_sidecar_cmd(["check"], cfg)
    ok(rc == 0 and "log_bin on, ROW events, grants" in out and "replica server_id" in out,
       f"check passes the binlog reader's needs as the relay_binlog role (exit {rc})", out)
    cfg["mysql"] = {"url": os.environ["SC_TEST_MYSQL_URL"]}
    rc, out = run_sidecar_cmd(["check"], cfg)
    ok(rc == 1 and "log_bin is off" in out, f"check refuses a server without the binary log (exit {rc})", out)
    q("CREATE USER IF NOT EXISTS 'nobinlog'@'127.0.0.1' IDENTIFIED BY 'x'")
    q("GRANT SELECT, UPDATE ON app.* TO 'nobinlog'@'127.0.0.1'")
    q("GRANT INSERT ON app.relay_checkpoint TO 'nobinlog'@'127.0.0.1'")
    cfg["mysql"] = {"url": f"mysql://nobinlog:x@127.0.0.1:{PORT}/app"}
    rc, out = run_sidecar_cmd(["check"], cfg)
    ok(rc == 1 and "lacks REPLICATION SLAVE" in out, f"check names a missing replication grant (exit {rc})", out)
    # what the reader needs of the server, changed one at a time and put back
    cfg["mysql"] = {"url": LEAST_URL}

    def replica_id(worker_id):  # sc_binlog_replica_id: FNV-1a in 0x40000000-0x7fffffff
        h = 2166136261
        for ch in worker_id.encode():
            h = ((h ^ ch) * 16777619) & 0xffffffff
        return 0x40000000 | (h & 0x3fffffff)

    for setting, back, want in [
            ("binlog_format = 'STATEMENT'", "binlog_format = 'ROW'", "binlog_format is STATEMENT: the reader needs ROW"),
            ("binlog_format = 'MIXED'", "binlog_format = 'ROW'", "binlog_format is MIXED: the reader needs ROW"),
            ("binlog_row_image = 'MINIMAL'", "binlog_row_image = 'FULL'", "binlog_row_image is MINIMAL"),
            (f"server_id = {replica_id('binlog-a')}", "server_id = 1",
             f"the relay's replica server_id {replica_id('binlog-a')} (from relay.worker_id) is in use")]:
        q(f"SET GLOBAL {setting}")
        try:
            rc, out = run_sidecar_cmd(["check"], cfg)
        finally:
            q(f"SET GLOBAL {back}")
        ok(rc == 1 and want in out, f"check refuses {setting} (exit {rc}): {want}", out)
    rc, out = run_sidecar_cmd(["check"], cfg)
    ok(rc == 0, f"and passes again once each is put back (exit {rc})", out)

    # 2. published once each, rows untouched; binary mode on a second relay
    queue = bound_queue(ex)
    r = relay(ex, worker_id="binlog-a")
    r.config["mysql"]["url"] = LEAST_URL
    with open(r.config_path, "w") as f:
        json.dump(r.config, f)
    r.start()
    first = insert(20)
    seen = wait_ids(queue, first)
    ok(set(first) <= set(seen) and len(seen) == 20,
       f"20 inserts published once each as the least-privilege binlog user ({len(seen)} messages)")
    st = q("SELECT status, COUNT(*), MAX(publish_attempts) FROM outbox_event GROUP BY status")
    ok(st == (("PENDING", 20, 0),), f"no outbox row is updated: {st}")
    time.sleep(0.5)
    ck = checkpoint()
    ok(ck and ck[0].startswith("binlog.") and ck[1] > 4 and ck[3] == "binlog-a",
       f"the checkpoint row holds a position and the lease: {ck}")
    ok(ck and re.match(r"^0-1-\d+$", ck[2]), f"and the GTID of its transaction: {ck and ck[2]}")
    lag = lambda: metric_sum(r.http_port(), r"^sidecar_relay_binlog_lag_bytes\{[^}]*\} (\d+)$", -1)
    # (what follows is at most the relay's own last checkpoint write)
    ok(wait_until(lambda: 0 <= lag() < 2048, timeout=15),
       f"sidecar_relay_binlog_lag_bytes is near 0 once caught up ({lag()})")
    lagged = lambda: metric_sum(r.http_port(), r"^sidecar_relay_binlog_lag_seconds\{[^}]*\} (\d+)\.\d+$", -1)
    ok(lagged() == 0, f"and sidecar_relay_binlog_lag_seconds 0 ({lagged()})")
    r.stop()
    one = insert(1)
    msgs = []
    r = relay(ex, worker_id="binlog-a", content_mode="binary").start()
    deadline = time.time() + 30
    while time.time() < deadline and not any(p.message_id == one[0] for _, p, _ in msgs):
        msgs += drain_with_keys(queue)
        time.sleep(0.1)
    m = [x for x in msgs if x[1].message_id == one[0]]
    ok(m and m[0][1].content_type == "application/json" and json.loads(m[0][2])["n"] == 0 and
       b"12345678901234567890" in m[0][2] and m[0][1].headers.get("cloudEvents:id") == one[0],
       "binary mode after a restart: the payload is the body as stored, attributes as headers")
    ok(all(x[1].message_id != first[0] for x in msgs), "the restart resumed from the checkpoint (no republish)")
    r.stop()

    # 3. rollback, other tables, DDL, refused rows
    r = relay(ex, worker_id="binlog-a").start()
    c = srv.db()
    c.autocommit(False)
    rolled = insert(3, conn=c)
    c.rollback()
    c.close()
    q("CREATE TABLE IF NOT EXISTS other (id INT PRIMARY KEY, v VARCHAR(40))")
    q("INSERT INTO other VALUES (1, 'x'), (2, 'y')")
    q("ALTER TABLE other ADD COLUMN w INT NULL")
    bad_ids = insert(1, etype="")
    after = insert(5)
    seen = wait_ids(queue, after)
    ok(set(after) <= set(seen) and not set(rolled) & set(seen) and not set(bad_ids) & set(seen),
       "a rolled-back transaction and a refused row are not published; other tables and DDL are ignored")
    ok(q("SELECT status FROM outbox_event WHERE event_id = %s", bad_ids) == (("FAILED",),),
       "the refused row is recorded FAILED on its own")
    ok(r.alive(), "the relay survived other tables' rows and DDL")

    # 4. one transaction of 1,000 rows; 2,000 from concurrent producers
    c = srv.db()
    c.autocommit(False)
    big = insert(1000, conn=c)
    c.commit()
    c.close()
    seen = wait_ids(queue, big, timeout=120)
    ok(set(big) <= set(seen), f"one transaction of 1,000 rows: {len(set(big) & set(seen))} published")
    ok(len(seen) == len(set(seen)), f"each once ({len(seen)} messages)")
    racing, lock = [], threading.Lock()

    def produce():
        got = insert(250)
        with lock:
            racing.extend(got)

    ts = [threading.Thread(target=produce) for _ in range(8)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    seen = wait_ids(queue, racing, timeout=120)
    ok(set(racing) <= set(seen), f"2,000 rows from 8 concurrent producers: {len(set(racing) & set(seen))} published, none skipped")
    r.stop()

    # 5. per_aggregate: order per aggregate is commit order
    r = relay(ex, worker_id="binlog-a", ordering="per_aggregate", batch=7).start()
    order = []
    for k in range(60):
        order += insert(1, agg_id=f"agg-{k % 4}")
    seen = wait_ids(queue, order)
    pos = {e: i for i, e in enumerate(seen)}
    inorder = all(pos[order[i]] < pos[order[j]] for i in range(len(order)) for j in range(i + 1, len(order))
                  if i % 4 == j % 4) if set(order) <= set(pos) else False
    ok(inorder, "per_aggregate: each aggregate's 15 events arrive in commit order")
    r.stop()

    # 6. kill -9 between the confirm and the checkpoint write
    before = checkpoint()
    r = relay(ex, worker_id="binlog-a", batch=10)
    r.start(env={"SIDECAR_FAULT": "relay.after_confirm"})
    cut = insert(10)
    code = r.wait_exit(30)
    ok(code == 86, f"the fault point ended the relay after the confirm (exit {code})")
    ok(checkpoint()[:2] == before[:2], "and before the checkpoint write (unchanged)")
    first_copy = ids_in(drain_with_keys(queue))
    r = relay(ex, worker_id="binlog-a", batch=10).start()
    second = wait_ids(queue, cut)
    ok(first_copy and set(first_copy) <= set(cut),
       f"the batch confirmed before the kill reached the queue ({len(first_copy)} of the 10)")
    ok(set(cut) <= set(second) and set(first_copy) <= set(second),
       f"after the restart all 10 are published, the {len(first_copy)} confirmed before the kill again")

    # 7. database restart, rotation
    srv.stop()
    srv.start()
    again = insert(5)
    seen = wait_ids(queue, again, timeout=90)
    if not ok(set(again) <= set(seen), "after a database restart the relay reconnects and publishes"):
        diag(r.text()[-3000:])
    old_file = checkpoint()[0]
    q("FLUSH BINARY LOGS")
    rot = insert(5)
    seen = wait_ids(queue, rot)
    time.sleep(1.5)
    ok(set(rot) <= set(seen) and checkpoint()[0] > old_file,
       f"after a rotation: published, and the checkpoint moved to {checkpoint()[0]}")
    r.stop()

    # 8. two relays, one active
    SCHED_SLACK_S = float(os.environ.get("SC_SCHED_SLACK_S", "0.5"))
    a = relay(ex, worker_id="binlog-a", lease_ms=2000).start()
    time.sleep(1)
    b = relay(ex, worker_id="binlog-b", lease_ms=2000).start()
    both = insert(20)
    seen = wait_ids(queue, both)
    ok(set(both) <= set(seen) and all(seen.count(e) == 1 for e in both) and checkpoint()[3] == "binlog-a",
       f"two relays: the lease holder publishes, once each ({len(seen)} messages)",
       "\n".join([str((e, seen.count(e), e in both)) for e in set(seen) if seen.count(e) > 1 or e not in both] +
                 [l for l in (a.text() + b.text()).splitlines() if '"info"' not in l][-12:]))
    # The promise (docs/operations.md): the standby takes over within
    # lease_ms + poll_ms of the active relay's death, the lease having been
    # renewed at the latest just before it. Measured on the server's clock,
    # from just before the kill to the row's updated_at once it names the
    # standby (its taking of the lease, or a later write), so the test's
    # own reads of the row add nothing.
    killed_at = q("SELECT UTC_TIMESTAMP(6)")[0][0]
    a.kill9()
    t0, took = time.time(), None
    while time.time() - t0 < 30 and took is None:
        row = q("SELECT lease_owner, TIMESTAMPDIFF(MICROSECOND, %s, updated_at) FROM relay_checkpoint "
                "WHERE outbox = 'outbox_event'", (killed_at,))[0]
        took = row[1] / 1e6 if row[0] == "binlog-b" else None
        time.sleep(0.02)
    # 1.89-1.96 s measured on a quiet machine against 2.1 s: the standby's
    # poll and the kill's own delivery are scheduled too, so a loaded CI
    # machine (sanitizers, a matrix beside it) gets SCHED_SLACK_S more.
    bound = (2000 + 100) / 1000 + SCHED_SLACK_S
    ok(took is not None and took <= bound,
       f"the standby took the lease {took if took is None else round(took, 2)} s after kill -9 of the active "
       f"one, within lease_ms + poll_ms + {SCHED_SLACK_S} s of scheduling ({bound:.1f} s)")
    later = insert(5)
    seen = wait_ids(queue, later, timeout=30)
    ok(set(later) <= set(seen), "and publishes")
    c = relay(ex, worker_id="binlog-c", lease_ms=10000).start()
    time.sleep(1)
    b.stop()
    t0 = time.time()
    handed = insert(3)
    seen = wait_ids(queue, handed, timeout=30)
    took = time.time() - t0
    ok(set(handed) <= set(seen) and checkpoint()[3] == "binlog-c" and took < 5 and
       "lease of the checkpoint released" in b.text(),
       f"a relay stopped with SIGTERM hands its lease over at once ({took:.1f} s, the standby's lease 10 s)")
    c.stop()

    # 9. purge past the position, then the recovery
    gap = insert(5)
    q("FLUSH BINARY LOGS")
    cur_file = q("SHOW MASTER STATUS")[0][0]
    # a file a dump thread still reads is not purged: none may be left
    for _ in range(50):
        dumps = [r[0] for r in q("SELECT id FROM information_schema.processlist WHERE command LIKE 'Binlog Dump%%'")]
        if not dumps:
            break
        for d in dumps:
            try:
                q(f"KILL {d}")
            except pymysql.err.OperationalError:
                pass
        time.sleep(0.2)
    # MariaDB keeps a file until InnoDB's checkpoint has passed it: again
    # until it is gone
    for _ in range(20):
        q(f"PURGE BINARY LOGS TO '{cur_file}'")
        if checkpoint()[0] not in [x[0] for x in q("SHOW BINARY LOGS")]:
            break
        time.sleep(0.5)
    ok(checkpoint()[0] not in [x[0] for x in q("SHOW BINARY LOGS")],
       f"the checkpoint's file {checkpoint()[0]} is purged")
    r = relay(ex, worker_id="binlog-a")
    r.start()
    code = r.wait_exit(30)
    text = r.text()
    ok(code == 2 and "is gone" in text and checkpoint()[0] in text,
       f"a purge past the checkpoint stops the relay (exit {code}) naming its file")
    ok(not set(gap) & set(ids_in(drain_with_keys(queue))), "and nothing was skipped past it silently")
    # recovery: note the end, publish the gap by polling, move the checkpoint
    end_file, end_pos = q("SHOW MASTER STATUS")[0][:2]
    poll = relay(ex, worker_id="poll-gap", source="poll").start()
    seen = wait_ids(queue, gap, timeout=60)
    poll.stop()
    q("UPDATE relay_checkpoint SET binlog_file = %s, binlog_pos = %s, gtid = NULL WHERE outbox = 'outbox_event'",
      (end_file, end_pos))
    r = relay(ex, worker_id="binlog-a").start()
    fresh = insert(3)
    seen += wait_ids(queue, fresh)
    ok(set(gap) <= set(seen) and set(fresh) <= set(seen),
       "recovery: poll mode publishes the gap, then binlog mode runs again from the moved checkpoint")
    r.stop()

    # 10. trace context and x-ordering-key exactly as in poll mode, both
    # content modes: the same rows published by each source, compared
    ex2 = "binlog-trace-" + suffix()
    tq = bound_queue(ex2)
    TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    TS = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
    start_at = checkpoint()[:2]
    traced = [(str(uuid.uuid4()), "agg-t1", TP, TS), (str(uuid.uuid4()), "agg-t2", None, None),
              (str(uuid.uuid4()), "agg-t1", "00-" + "0" * 32 + "-00f067aa0ba902b7-01", "rojo=1")]
    for eid, agg, tp, ts in traced:
        q("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version, payload, "
          "created_at, traceparent, tracestate) VALUES (%s, 'ORDER', %s, 'ORDER_TRACED', 1, '{\"t\": 1}', "
          "UTC_TIMESTAMP(6), %s, %s)", (eid, agg, tp, ts))
    tids = [t[0] for t in traced]
    forms = {}
    for mode in ("structured", "binary"):
        for source in ("binlog", "poll"):
            # each run publishes the rows afresh: PENDING, and for the
            # binlog source the stream from before their inserts
            q("UPDATE outbox_event SET status = 'PENDING', lease_owner = NULL, lease_until = NULL, "
              "published_at = NULL WHERE event_id IN (%s, %s, %s)", tids)
            if source == "binlog":
                q("UPDATE relay_checkpoint SET binlog_file = %s, binlog_pos = %s, gtid = NULL "
                  "WHERE outbox = 'outbox_event'", start_at)
            rr = relay(ex2, worker_id="binlog-a" if source == "binlog" else "poll-trace", source=source,
                       content_mode=mode).start()
            got, deadline = {}, time.time() + 30
            while time.time() < deadline and not set(tids) <= set(got):
                for _, p, body in drain_with_keys(tq):
                    got.setdefault(p.message_id, (body, p.content_type, p.type, p.delivery_mode,
                                                  dict(p.headers or {})))
                time.sleep(0.1)
            rr.stop()
            forms[(source, mode)] = got
    for mode in ("structured", "binary"):
        b, p = forms[("binlog", mode)], forms[("poll", mode)]
        ok(set(tids) <= set(b) and all(b.get(e) == p.get(e) for e in tids),
           f"{mode}: each message of the binlog source is the poll source's, body, properties and headers",
           "\n".join(f"{e}: binlog {b.get(e)} / poll {p.get(e)}" for e in tids if b.get(e) != p.get(e)))
    st = forms[("binlog", "structured")]
    body = {e: json.loads(st[e][0]) if e in st else {} for e in tids}
    ok(body[tids[0]].get("traceparent") == TP and body[tids[0]].get("tracestate") == TS and
       "traceparent" not in body[tids[1]] and "traceparent" not in body[tids[2]] and
       "tracestate" not in body[tids[2]],
       "binlog, structured: traceparent and tracestate in the body; none for a row without, nor for an "
       "invalid one", body)
    ok(all(st.get(e, (0, 0, 0, 0, {}))[4].get("x-ordering-key") == agg for e, agg, _, _ in traced),
       "binlog, structured: x-ordering-key is each row's aggregate_id", st)
    bn = forms[("binlog", "binary")]
    h = {e: bn[e][4] if e in bn else {} for e in tids}
    ok(h[tids[0]].get("cloudEvents:traceparent") == TP and h[tids[0]].get("cloudEvents:tracestate") == TS and
       "cloudEvents:traceparent" not in h[tids[1]] and "cloudEvents:traceparent" not in h[tids[2]] and
       all(h[e].get("x-ordering-key") == agg for e, agg, _, _ in traced),
       "binlog, binary: cloudEvents:traceparent and tracestate headers beside x-ordering-key", h)
finally:
    srv.stop()
    shutil.rmtree(srv.dir, ignore_errors=True)
done()
