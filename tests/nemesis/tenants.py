#!/usr/bin/python3
"""The nemesis with tenants: three tenant databases on one server, one
producer per tenant writing its outbox, one `sidecar relay` with
tenants.list, one `sidecar consume` with tenants.key "extension:tenant",
and faults that hit ONE tenant's database at a time.

    tests/nemesis/run --tenants [SECONDS] [--seed N]

What runs:
  producers   one thread per tenant, plain SQL as root over the socket (not
              a sidecar user, so the faults never touch it): ORDER_UPDATED
              rows for 8 aggregates, versions 1, 2, ... per aggregate
  relay       relay.ordering per_aggregate, poll, tenants t1 t2 t3
  consumer    nem-tenants, sql.so appending every event to the tenant's
              nemesis_effect (no unique key: a doubled effect is two rows),
              two workers; and in the same process nem-tenants-ordered, an
              ordered consumer (key subject, 2 partitions, 2 workers) whose
              down tenant's deliveries go round through its delay queue, to
              nemesis_ordered_effect: per (tenant, aggregate) versions applied
              in order, across kill -9 with copies out
  audit       a queue bound with '#': every copy the relay got confirmed, in
              the order the broker gave them
Faults (one at a time, on a tenant the seed picks):
  tenant-lock           LOCK TABLES ... WRITE on the consumer's tables of its
                        database (consumed_event, held keys, the effect table)
                        from a held session; tenant-lock-outbox: its
                        outbox_event (the relay's)
  tenant-kill-sessions  its sidecar sessions killed again and again
  tenant-revoke         the sidecar users' grants on its database taken away
                        and their sessions killed, then granted back
  kill-relay, kill-consumer  kill -9 and restart (redeliveries, republishes)
  tenant-revoke-kill    the consumer's grants only taken away, so the ordered
                        consumer sends the tenant's deliveries round; kill -9
                        of consume once a row of such a copy is written
Checked per tenant: every outbox row PUBLISHED, one effect and one claim each
in its own database, none in another's, per-aggregate publish order, no dead
letter; and that during each tenant fault every other tenant's effects kept
landing. A self-check plants one of each failure in a copy of the data.
NEMESIS_TENANTS_HURT=all makes the tenant faults hit every tenant (the
isolation check must fail then); NEMESIS_TENANTS_PLANT_LOSS=1 deletes one
effect row before the check (the loss check must fail)."""

import json
import os
import random
import signal
import sys
import threading
import time
import uuid

import pika
import pymysql

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nemesis as nm  # noqa: E402
from tenants_check import check, self_check  # noqa: E402
from tenants_db import DB, HURT_ALL, TENANTS, grants, root, sql, statements  # noqa: E402
from tenants_faults import Faults  # noqa: E402

EXCHANGE = "nem-orders"
QUEUE = "nem-tenants"
ORDERED = "nem-tenants-ordered"
ORDERED_DELAY_MS = 500
AUDIT_QUEUE = "nem-tenants-audit"
RETRY_DELAYS_MS = [500, 2000]
AGGREGATES = 8
LOCK_WAIT_S = int(os.environ.get("NEMESIS_LOCK_WAIT_S", "1"))
RATE = float(os.environ.get("NEMESIS_RATE", "6"))  # events per second per tenant
DRAIN_S = float(os.environ.get("NEMESIS_DRAIN_S", "120"))


def setup(amqp_url):
    schema = os.path.join(nm.ROOT, "sql", "schema")
    for t in TENANTS:
        db = DB.format(t)
        sql(f"DROP DATABASE IF EXISTS `{db}`")
        sql(f"CREATE DATABASE `{db}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        with root(db) as c, c.cursor() as cur:
            for f in sorted(os.listdir(schema)):
                for s in statements(os.path.join(schema, f)):
                    cur.execute(s)
            for table in ("nemesis_effect", "nemesis_ordered_effect"):
                cur.execute(f"CREATE TABLE {table} (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,"
                            " event_id CHAR(36) NOT NULL, order_id BIGINT NOT NULL, event_version INT NULL,"
                            f" created_at DATETIME(6) NOT NULL, KEY ix_{table}_event (event_id))"
                            " ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin")
            for g in grants(t):
                cur.execute(g)
    c = pika.BlockingConnection(pika.URLParameters(amqp_url))
    ch = c.channel()
    ch.exchange_declare(EXCHANGE, "topic", durable=True)
    ch.queue_declare(AUDIT_QUEUE, durable=True)
    ch.queue_bind(AUDIT_QUEUE, EXCHANGE, "#")
    c.close()


def configs(port, amqp_url):
    def url(user, pw, db):
        return f"mysql://{user}:{pw}@127.0.0.1:{port}/{db}"
    common = {"amqp": {"url": amqp_url, "heartbeat_s": nm.HEARTBEAT_S},
              # 1 s: a locked tenant's every probe holds a worker (and the
              # relay, which has no backoff for it) this long; at 3 s the
              # other tenants got nothing for whole fault windows
              # a silent tenant holds a worker for a connect and a read:
              # both within 1.5 heartbeats, or the broker drops the worker
              "mysql": {"lock_wait_timeout_s": LOCK_WAIT_S, "connect_timeout_s": 2},
              "http": {"listen": "127.0.0.1:0"}, "log": {"level": "info"}}
    tenants = {"key": "extension:tenant", "list": list(TENANTS), "max_connections": 16, "idle_close_ms": 60000,
               "read_timeout_s": LOCK_WAIT_S + 1}
    relay = json.loads(json.dumps(common))
    relay["mysql"]["url"] = url("sidecar_relay", "relay-secret", "app")
    relay["tenants"] = dict(tenants, database_url=url("sidecar_relay", "relay-secret", DB.format("{tenant}")))
    relay["relay"] = {"worker_id": "nem-relay-t", "exchange": EXCHANGE, "batch": 50, "ordering": "per_aggregate",
                      "source": "poll", "lease_ms": nm.LEASE_MS, "poll_ms": 100,
                      "confirm_timeout_ms": nm.LEASE_MS // 3}
    cons = json.loads(json.dumps(common))
    cons["mysql"]["url"] = url("sidecar_consumer", "consumer-secret", "app")
    cons["tenants"] = dict(tenants, database_url=url("sidecar_consumer", "consumer-secret", DB.format("{tenant}")))
    step = [{"sql": "INSERT INTO nemesis_effect (event_id, order_id, event_version, created_at)"
                    " VALUES (?, ?, ?, UTC_TIMESTAMP(6))", "params": ["id", "subject:int", "eventversion"]}]
    cons["consumers"] = [{"name": QUEUE, "queue": QUEUE,
                          "bindings": [{"exchange": EXCHANGE, "routing_key": "ORDER_UPDATED"}],
                          "handler": os.environ["SC_SQL_HANDLER"],
                          "handler_config": {"events": {"ORDER_UPDATED": step}, "other_events": "ignore"},
                          "prefetch": 32, "batch_max": 16, "workers": 2, "retry_delays_ms": RETRY_DELAYS_MS},
                         {"name": ORDERED, "queue": ORDERED,
                          "bindings": [{"exchange": EXCHANGE, "routing_key": "ORDER_UPDATED"}],
                          "handler": os.environ["SC_SQL_HANDLER"],
                          "handler_config": {"events": {"ORDER_UPDATED": [
                              dict(step[0], sql=step[0]["sql"].replace("nemesis_effect", "nemesis_ordered_effect"))]},
                              "other_events": "ignore"},
                          "prefetch": 32, "batch_max": 16, "workers": 2, "retry_delays_ms": [ORDERED_DELAY_MS],
                          "db_outage_hold_ms": 1500,
                          "ordering": {"key": "subject", "partitions": 2, "on_dead_letter": "hold"}}]
    return relay, cons


class Producer(threading.Thread):
    """One tenant's writer: one row a transaction, versions per aggregate in
    commit order. A lost connection at the INSERT leaves the outcome unknown
    (the checker takes the outbox as it is then)."""

    def __init__(self, t, rng):
        super().__init__(name="producer-" + t, daemon=True)
        self.t, self.rng = t, rng
        self.stop = threading.Event()
        self.out = {}  # event id -> committed | unknown | failed
        self.versions = {}

    def run(self):
        conn = None
        while not self.stop.is_set():
            t0 = nm.now()
            agg = self.rng.randrange(1, AGGREGATES + 1)
            v = self.versions.get(agg, 0) + 1
            eid = str(uuid.uuid4())
            try:
                if conn is None:
                    conn = root(DB.format(self.t), timeout=10)
                    with conn.cursor() as cur:
                        cur.execute("SET SESSION lock_wait_timeout = 2, innodb_lock_wait_timeout = 2")
                with conn.cursor() as cur:
                    cur.execute("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type,"
                                " event_version, payload, status, created_at) VALUES (%s, 'ORDER', %s,"
                                " 'ORDER_UPDATED', %s, %s, 'PENDING', UTC_TIMESTAMP(6))",
                                (eid, str(agg), v, json.dumps({"orderId": agg, "version": v})))
                self.out[eid] = "committed"
                self.versions[agg] = v
            except pymysql.err.MySQLError as e:
                code = e.args[0] if e.args else 0
                # a lock wait ends the statement, nothing written; anything
                # else on the wire may have committed
                self.out[eid] = "failed" if code in (1205, 1213) else "unknown"
                if code not in (1205, 1213):
                    self.versions[agg] = v  # if it did commit, the next must be later
                    try:
                        conn.close()
                    except Exception:  # noqa: BLE001
                        pass
                    conn = None
            self.stop.wait(max(0.0, t0 + 1.0 / RATE - nm.now()))


class Audit(threading.Thread):
    def __init__(self, amqp_url):
        super().__init__(name="audit", daemon=True)
        self.url = amqp_url
        self.stop = threading.Event()
        self.seen = []  # [seq, event_id, tenant, subject, version]

    def run(self):
        while not self.stop.is_set():
            try:
                c = pika.BlockingConnection(pika.URLParameters(self.url))
                ch = c.channel()
                while not self.stop.is_set():
                    m, props, body = ch.basic_get(AUDIT_QUEUE, auto_ack=True)
                    if m is None:
                        c.sleep(0.2)
                        continue
                    ev = json.loads(body)
                    self.seen.append([len(self.seen), props.message_id, ev.get("tenant"), ev.get("subject"),
                                      ev.get("eventversion")])
                c.close()
            except Exception:  # noqa: BLE001 - a kill of the relay is no reason to stop
                self.stop.wait(1.0)


def drained(producers):
    why = ""
    for t in TENANTS:
        db = DB.format(t)
        left = sql(f"SELECT COUNT(*) FROM `{db}`.outbox_event WHERE status <> 'PUBLISHED'")[0][0]
        events = sql(f"SELECT COUNT(*) FROM `{db}`.outbox_event")[0][0]
        done = sql(f"SELECT COUNT(DISTINCT event_id) FROM `{db}`.nemesis_effect")[0][0]
        ordered = sql(f"SELECT COUNT(DISTINCT event_id) FROM `{db}`.nemesis_ordered_effect")[0][0]
        if left or done < events or ordered < events:
            why += f" {t}: {left} not published, {done} of {events} applied, {ordered} by {ORDERED};"
    return why.strip()


def copies_left():
    """The ordered consumer's rows of copies gone round, in mysql.url's database."""
    return sql("SELECT COUNT(*) FROM app.consumer_tenant_copy WHERE consumer_name = %s", (ORDERED,))[0][0]


def dump_rows():
    rows = {}
    for t in TENANTS:
        db = DB.format(t)
        rows[t] = {
            "outbox": [list(r) for r in sql(f"SELECT event_id, status, aggregate_id, event_version"
                                            f" FROM `{db}`.outbox_event")],
            "effects": [[r[0], r[1], r[2], r[3], float(r[4])] for r in
                        sql(f"SELECT id, event_id, order_id, event_version, UNIX_TIMESTAMP(created_at)"
                            f" FROM `{db}`.nemesis_effect")],
            "claims": [r[0] for r in sql(f"SELECT event_id FROM `{db}`.consumed_event WHERE consumer_name = %s",
                                         (QUEUE,))],
            "ordered": [[r[0], r[1], r[2], r[3], float(r[4])] for r in
                        sql(f"SELECT id, event_id, order_id, event_version, UNIX_TIMESTAMP(created_at)"
                            f" FROM `{db}`.nemesis_ordered_effect")],
        }
    return rows


def drain_dlq(amqp_url):
    out = []
    c = pika.BlockingConnection(pika.URLParameters(amqp_url))
    ch = c.channel()
    for q in (QUEUE + ".dlq", ORDERED + ".dlq"):
        while True:
            m, props, _body = ch.basic_get(q, auto_ack=True)
            if m is None:
                break
            out.append(props.message_id)
    c.close()
    return out


def queue_depth(amqp_url, q):
    try:
        c = pika.BlockingConnection(pika.URLParameters(amqp_url))
    except Exception:  # noqa: BLE001 - no answer: not known to be empty
        return None
    try:
        return c.channel().queue_declare(q, passive=True).method.message_count
    finally:
        c.close()


def queues_empty(amqp_url):
    c = pika.BlockingConnection(pika.URLParameters(amqp_url))
    try:
        for q in ([QUEUE] + [f"{QUEUE}.retry.{d}ms" for d in RETRY_DELAYS_MS] +
                  [f"{ORDERED}.p0", f"{ORDERED}.p1", f"{ORDERED}.retry.{ORDERED_DELAY_MS}ms"]):
            if c.channel().queue_declare(q, passive=True).method.message_count:
                return False
        return True
    finally:
        c.close()


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(prog="tests/nemesis/run --tenants")
    ap.add_argument("seconds", nargs="?", type=float, default=60)
    ap.add_argument("--seed", type=int)
    a = ap.parse_args([x for x in argv if x != "--tenants"])
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1, 1 << 31)
    nm.T0 = time.time()
    base = os.path.join(nm.ROOT, ".local", "nemesis")
    nm.RUN_DIR = os.path.join(base, "runs", time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + f"-tenants-seed{seed}")
    os.makedirs(os.path.join(nm.RUN_DIR, "logs"))
    os.makedirs(os.path.join(nm.RUN_DIR, "configs"))
    print(f"# nemesis tenants: seed {seed}, {a.seconds:.0f} s of faults, tenants {' '.join(TENANTS)}"
          f"{', faults hit every tenant' if HURT_ALL else ''}; replay: tests/nemesis/run --tenants"
          f" {a.seconds:.0f} --seed {seed}", flush=True)
    print(f"# run folder {nm.RUN_DIR}", flush=True)
    amqp_url = os.environ["SC_TEST_AMQP_URL"]
    setup(amqp_url)
    relay_cfg, cons_cfg = configs(int(os.environ["SC_TEST_MYSQL_PORT"]), amqp_url)
    procs = {"relay": nm.Proc("relay", "relay", relay_cfg), "consume": nm.Proc("consume", "consume", cons_cfg)}

    def reap(*_):
        for p in procs.values():
            if p.alive():
                os.kill(p.p.pid, signal.SIGKILL)
    import atexit
    atexit.register(reap)
    signal.signal(signal.SIGTERM, lambda *_: (reap(), os._exit(3)))
    tap = nm.Tap()
    for p in procs.values():
        p.start()
    end = nm.now() + 60
    while nm.now() < end and not (
            any("consuming from" in l.get("msg", "") for l in nm.read_log(procs["consume"].log_path(1)))
            and any("publishing outbox_event" in l.get("msg", "") for l in nm.read_log(procs["relay"].log_path(1)))):
        time.sleep(0.3)
    if not tap.ok(all(p.alive() for p in procs.values()) and nm.now() < end,
                  "a relay over three tenants and a consumer with tenants.key started"):
        for p in procs.values():
            print("#   " + p.name + ": " + open(p.log_path(p.runs)).read()[-600:].replace("\n", "\n#   "))
        print("nemesis: orders=0 lost=0 doubled=0 stuck=0 dead_lettered=0 repeats=0 faults=0", flush=True)
        return 1
    audit = Audit(amqp_url)
    audit.start()
    rng = random.Random(seed)
    producers = [Producer(t, random.Random(rng.random())) for t in TENANTS]
    for p in producers:
        p.start()
    faults = Faults(procs, random.Random(rng.random()), a.seconds)
    th = threading.Thread(target=faults.run, daemon=True)
    th.start()
    while th.is_alive():
        for p in procs.values():
            p.check_exit()
        th.join(1.0)
    for p in producers:
        p.stop.set()
        p.join(30)
    for p in procs.values():
        p.check_exit()
    t_drain = nm.now()
    why = "not asked"
    while nm.now() - t_drain < DRAIN_S:
        why = (drained(producers) or ("" if queues_empty(amqp_url) else "messages in the queues") or
               (f"{copies_left()} rows of copies left" if copies_left() else ""))
        if not why:
            break
        time.sleep(1.0)
    nm.say(f"drained in {nm.now() - t_drain:.1f} s" if not why else f"not drained in {DRAIN_S:.0f} s: {why}")
    for p in procs.values():
        p.term()
    end = nm.now() + 30
    while nm.now() < end and queue_depth(amqp_url, AUDIT_QUEUE) != 0:
        time.sleep(0.3)
    audit.stop.set()
    audit.join(15)
    if os.environ.get("NEMESIS_TENANTS_PLANT_LOSS") == "1":
        sql(f"DELETE FROM `{DB.format(TENANTS[1])}`.nemesis_effect ORDER BY id LIMIT 1")
        nm.say(f"planted: one effect row of {TENANTS[1]} deleted")
    rows = dump_rows()
    dlq = drain_dlq(amqp_url)
    produced = {p.t: p.out for p in producers}
    with open(os.path.join(nm.RUN_DIR, "rows.json"), "w") as f:
        json.dump({"rows": rows, "audit": audit.seen, "produced": produced, "windows": faults.windows,
                   "dlq": dlq}, f)
    bad, s = check(TENANTS, rows, audit.seen, produced, faults.windows, dlq)
    tap.ok(not why, f"drained: every tenant's outbox published and applied ({why or 'yes'})")
    for p in procs.values():
        tap.ok(not p.self_exits, f"{p.name} never exited on its own ({len(p.self_exits)} times)",
               "\n".join(x[2] for x in p.self_exits))
    tap.ok(not faults.errors, f"every fault ran ({len(faults.errors)} errors)", "\n".join(faults.errors))
    per_t = {t: len(rows[t]["outbox"]) for t in TENANTS}
    tap.ok(all(per_t.values()), f"every tenant wrote events ({per_t})")
    for k, label in (("lost", "no event of a tenant without its effect in its own database"),
                     ("doubled", "no event applied twice"),
                     ("misrouted", "no effect in another tenant's database"),
                     ("claims", "one consumed_event claim per event, in its tenant's database"),
                     ("stuck", "every outbox row PUBLISHED"),
                     ("producer_lost", "every committed write in the outbox, no failed one"),
                     ("out_of_order", "per aggregate, versions first published in order"),
                     ("ordered_lost", f"{ORDERED}: every event applied in its tenant's database"),
                     ("ordered_doubled", f"{ORDERED}: no event applied twice"),
                     ("ordered_out_of_order", f"{ORDERED}: per (tenant, aggregate), versions applied in order"),
                     ("dead_lettered", "nothing dead-lettered")):
        tap.ok(not bad[k], f"{label} ({len(bad[k])})", " ".join(bad[k][:10]))
    hurt = [w for w in faults.windows]
    left = copies_left()
    tap.ok(left == 0, f"{ORDERED}: no row of a copy gone round left ({left})")
    tap.ok(hurt and not bad["stalled"], f"the other tenants kept flowing during all {len(hurt)} tenant faults"
           f" (lowest rate {s['min_unhurt_rate']} effects/s; stalled: {len(bad['stalled'])}"
           f"{': ' + '; '.join(sorted(bad['stalled'])[:3]) if bad['stalled'] else ''})",
           " ".join(bad["stalled"][:10]))
    good, what = self_check(TENANTS, rows, audit.seen, produced, faults.windows, dlq)
    tap.ok(good, f"the checker finds each failure planted in a copy of this run's data ({what})")
    republished = len(audit.seen) - len({x[1] for x in audit.seen})
    s.update(seed=seed, faults=faults.count, faults_by_kind=faults.by_kind, republished=republished,
             drain_s=round(nm.now() - t_drain, 1), wall_s=round(nm.now() - nm.T0, 1))
    with open(os.path.join(nm.RUN_DIR, "summary.json"), "w") as f:
        json.dump({"summary": s, "ids": bad}, f, indent=1)
    for w in s["window_rates"]:
        print(f"# window {w[0]} on {w[1]}, {w[2]} s: effects/s " +
              " ".join(f"{t}={r}" for t, r in zip(TENANTS, w[3:])), flush=True)
    print("# " + json.dumps({k: v for k, v in s.items() if k != "window_rates"}), flush=True)
    print(f"1..{tap.n}", flush=True)
    print(f"nemesis: orders={s['events']} lost={s['lost']} doubled={s['doubled']} stuck={s['stuck']}"
          f" dead_lettered={s['dead_lettered']} repeats={republished} faults={faults.count}", flush=True)
    return 0 if tap.failed == 0 and faults.count > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
