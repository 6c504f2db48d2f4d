#!/usr/bin/python3
"""The producer side of the benchmark (issue 11.2/11.3/11.6): relay
throughput against the broker's publish-with-confirms limit measured in the
same run, one relay vs three on one table, a 10,000-row vs a 1,000,000-row
backlog (A-B-A interleaved), and the relay's RSS over a long run. Progress
is read from the relays' own /metrics counters, never from COUNT(*) over
the table. tests/bench/run sets the environment (BENCH_PART=producer)."""
import json
import os
import queue
import re
import socket
import subprocess
import tempfile
import threading
import time
import uuid

import pika

from bench_lib import (AMQP, BUILD, EXCHANGE, MYSQL, PAYLOAD, SERVER_PIDS, SIDECAR, cpu, delete_queue,
                       e2e_latency, free_port, metric_sum, q, set_pool, status_kib, v7_id_sql)

N = int(os.environ.get("BENCH_RELAY_N", "20000"))
BIG = int(os.environ.get("BENCH_BACKLOG_BIG", "1000000"))
SMALL = int(os.environ.get("BENCH_BACKLOG_SMALL", "10000"))
RSS_N = int(os.environ.get("BENCH_RSS_N", "1000000"))
BATCH = int(os.environ.get("BENCH_RELAY_BATCH", "256"))
IDS = os.environ.get("BENCH_RELAY_IDS", "v7")


def load_outbox(n, chunk=200000, ids=None, status="PENDING"):
    """n PENDING rows, oldest first, by INSERT ... SELECT from MariaDB's
    sequence engine in large chunks. ids: "v7" (time-ordered, what the
    producer helper makes: the primary key follows created_at) or "v1"
    (MariaDB's UUID(): its text leads with the fast-changing time_low, so
    the primary key order is effectively random). Returns rows/s."""
    ids = ids or IDS
    base_ms = int(time.time() * 1000) - 86400000
    t0 = time.time()
    done = 0
    while done < n:
        k = min(chunk, n - done)
        if ids == "v7":
            ident = v7_id_sql(base_ms + done)
        else:
            ident = "UUID()"
        q("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version, payload,"
          f" status, created_at) SELECT {ident}, 'ORDER', seq + %s, 'ORDER_ACCEPTED', 1, %s, %s,"
          f" UTC_TIMESTAMP(6) - INTERVAL 1 DAY + INTERVAL (seq + %s) MICROSECOND FROM seq_1_to_{k}",
          (done, PAYLOAD, status, done))
        done += k
    return n / (time.time() - t0)


def settle(timeout=30):
    """Waits until InnoDB has flushed what a bulk load dirtied (below 2% of
    the pool), so a scenario does not pay for the previous load's writes."""
    end = time.time() + timeout
    while time.time() < end:
        st = dict(q("SHOW GLOBAL STATUS WHERE Variable_name IN"
                    " ('Innodb_buffer_pool_pages_dirty', 'Innodb_buffer_pool_pages_total')"))
        if int(st["Innodb_buffer_pool_pages_dirty"]) < 0.02 * int(st["Innodb_buffer_pool_pages_total"]):
            return
        time.sleep(0.5)


# Every queue of this benchmark keeps at most MAX_LENGTH messages (the
# oldest are dropped, their confirms still sent): the broker does the work
# of a queue whose consumer keeps up, instead of holding and then
# collecting millions of messages, which slowed later scenarios of a long
# run by half (broker CPU at 100%, 1.7 GB resident).
MAX_LENGTH = int(os.environ.get("BENCH_QUEUE_MAX_LENGTH", "5000"))


def fresh_queue():
    c = pika.BlockingConnection(pika.URLParameters(AMQP))
    ch = c.channel()
    ch.exchange_declare(EXCHANGE, "topic", durable=True)
    name = "bench-relay-" + uuid.uuid4().hex[:6]
    ch.queue_declare(name, durable=True, arguments={"x-max-length": MAX_LENGTH} if MAX_LENGTH else None)
    ch.queue_bind(name, EXCHANGE, "#")
    c.close()
    return name


class DelayProxy:
    """A TCP proxy in front of MariaDB that delays every chunk by rtt/2 in
    each direction: the database on another host, as in production (where
    a relay is bound by its round trips and the broker has headroom). Order
    is kept; the delay is a deadline per chunk, so a stream is not slowed
    beyond the added latency."""

    def __init__(self, target_port, rtt_ms):
        self.half = rtt_ms / 2000.0
        self.target = target_port
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(64)
        self.port = self.srv.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            c, _ = self.srv.accept()
            u = socket.create_connection(("127.0.0.1", self.target))
            for a, b in ((c, u), (u, c)):
                a.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                q_ = queue.Queue()
                threading.Thread(target=self._read, args=(a, q_), daemon=True).start()
                threading.Thread(target=self._write, args=(b, q_), daemon=True).start()

    def _read(self, src, q_):
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            q_.put((time.monotonic() + self.half, data))
            if not data:
                return

    @staticmethod
    def _write(dst, q_):
        while True:
            due, data = q_.get()
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            try:
                if not data:
                    dst.shutdown(socket.SHUT_WR)
                    return
                dst.sendall(data)
            except OSError:
                return


class RelayProc:
    def __init__(self, batch=BATCH, mysql=None):
        self.port = free_port()
        d = tempfile.mkdtemp(prefix="bench-relay-")
        path = os.path.join(d, "relay.json")
        json.dump({"amqp": {"url": AMQP}, "mysql": {"url": mysql or MYSQL},
                   "http": {"listen": f"127.0.0.1:{self.port}"},
                   "log": {"level": "warn"},
                   "relay": {"worker_id": "bench-" + uuid.uuid4().hex[:6], "exchange": EXCHANGE, "batch": batch,
                             "lease_ms": 30000, "poll_ms": 50, "confirm_timeout_ms": 10000}}, open(path, "w"))
        self.proc = subprocess.Popen([SIDECAR, "relay", "-c", path], stderr=open(os.path.join(d, "log"), "w"))

    def published(self):
        return metric_sum(self.port, r"^sidecar_relay_published_total\{[^}]*\} (\d+)$")

    def rss_kib(self):
        return status_kib(self.proc.pid, "VmRSS")

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def relay_rate(n_relays, target, timeout=300, batch=BATCH, mysql=None, usage=None):
    """Starts n relays on the loaded table; events/s until `target` are
    published (from the first publish on, start-up excluded). usage, a
    dict, gets the CPU seconds of the relays and the servers over the same
    window, and the events they are for."""
    relays = [RelayProc(batch, mysql) for _ in range(n_relays)]
    t_first = None
    end = time.time() + timeout
    total = 0
    while time.time() < end:
        total = sum(r.published() for r in relays)
        if total and t_first is None:
            t_first, first = time.time(), total
            before = {k: cpu(v) for k, v in SERVER_PIDS.items()}
            before["relay"] = cpu([r.proc.pid for r in relays])
        if total >= target:
            break
        time.sleep(0.05)
    t1 = time.time()
    if usage is not None and t_first is not None:
        usage.update({k: cpu(v) - before[k] for k, v in SERVER_PIDS.items()})
        usage["relay"] = cpu([r.proc.pid for r in relays]) - before["relay"]
        usage["events"] = total - first
        usage["seconds"] = t1 - t_first
    for r in relays:
        r.stop()
    if t_first is None or t1 <= t_first:
        return 0.0
    return (total - first) / (t1 - t_first)


def per_k(usage, events):
    """CPU seconds per 1,000 events, per process."""
    return {k: round(v * 1000 / events, 4) for k, v in usage.items() if k not in ("events", "seconds")} if events else {}


def outbox_inserts(n, ids):
    """n producer transactions through the producer library (one event each,
    durable commit each): tests/bench/outbox_insert. Returns events/s."""
    out = subprocess.run([f"{BUILD}/tests/bench/outbox_insert", MYSQL, str(n), ids], capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out)["events_per_s"]


def broker_limit(n, publishers=1, chunk=2000, usage=None):
    """The C publisher with confirms (tests/bench/preload: batches of `chunk`,
    persistent, mandatory, a CloudEvents body of the relay's size), as
    `publishers` concurrent connections into one queue: total events/s.
    usage, a dict, gets the broker's CPU seconds over the run."""
    name = "bench-pub-" + uuid.uuid4().hex[:6]
    t0 = time.time()
    b0 = cpu(SERVER_PIDS["rabbitmq"])
    procs = [subprocess.Popen([f"{BUILD}/tests/bench/preload", AMQP, name, str(n // publishers), "v4", str(chunk),
                               str(MAX_LENGTH)],
                              stdout=subprocess.PIPE, text=True) for _ in range(publishers)]
    outs = [p.communicate()[0] for p in procs]
    dt = time.time() - t0
    if usage is not None:
        usage.update(rabbitmq=cpu(SERVER_PIDS["rabbitmq"]) - b0, events=(n // publishers) * publishers)
    delete_queue(name)
    if publishers == 1:
        return float(re.search(r"\(([0-9.]+)/s\)", outs[0]).group(1))
    return (n // publishers) * publishers / dt


def relay_db_limit(n, batch=BATCH, usage=None):
    """The database's own limit for the relay's statements: the real claim
    and mark, batch by batch, no broker (tests/bench/relay_db_limit) over n
    loaded rows. usage gets mariadbd's CPU seconds and the client's."""
    q("TRUNCATE TABLE outbox_event")
    load_outbox(n)
    settle()
    d0 = cpu(SERVER_PIDS["mariadbd"])
    p = subprocess.Popen([f"{BUILD}/tests/bench/relay_db_limit", MYSQL, str(n), str(batch)], stdout=subprocess.PIPE,
                         text=True)
    out = p.communicate()[0]
    r = json.loads(out)
    if usage is not None:
        usage.update(mariadbd=cpu(SERVER_PIDS["mariadbd"]) - d0, events=r["events"])
    return r["events_per_s"]


def scenario(label, rows, n_relays, measure, batch=BATCH, mysql=None, usage=None):
    q("TRUNCATE TABLE outbox_event")
    load = load_outbox(rows)
    settle()
    qname = fresh_queue()
    rate = relay_rate(n_relays, measure, batch=batch, mysql=mysql, usage=usage)
    delete_queue(qname)
    print(f"{label:<52} {rate:>9.0f} ev/s   (backlog {rows}, measured over {measure}; load {load:.0f} rows/s)",
          flush=True)
    return rate


def main():
    print(f"# relay: batch {BATCH}, {os.cpu_count()} cores, MariaDB durable (flush_log_at_trx_commit=1)", flush=True)
    part = os.environ.get("BENCH_RELAY_PART", "account latency throughput scale remote backlog inserts rss").split()
    res = {}
    if "account" in part:
        # Where a relay's time goes, A-B-A: relay x1, then the database's
        # limit for its statements alone and the broker's for publishing
        # alone, then relay x1 again; CPU seconds per 1,000 events of each
        # process in each. The ceiling: the machine's cores divided by what
        # the servers burn per event while the relay runs (a relay that cost
        # nothing itself could go no faster on this machine).
        acc = {"relay": [], "db": [], "broker": []}
        for k in range(3):
            if k != 1:
                u = {}
                rate = scenario("relay x1 (accounted)", N, 1, N, usage=u)
                acc["relay"].append((rate, u))
                print(f"#   cpu s/1000 ev: {json.dumps(per_k(u, u.get('events')))}", flush=True)
            else:
                u = {}
                rate = relay_db_limit(N, usage=u)
                acc["db"].append((rate, u))
                print(f"{'database limit: claim + mark, no broker':<52} {rate:>9.0f} ev/s   cpu s/1000 ev:"
                      f" {json.dumps(per_k(u, u.get('events')))}", flush=True)
                u = {}
                rate = broker_limit(N, usage=u)
                acc["broker"].append((rate, u))
                print(f"{'broker limit: C publisher with confirms':<52} {rate:>9.0f} ev/s   cpu s/1000 ev:"
                      f" {json.dumps(per_k(u, u.get('events')))}", flush=True)
        relay = sum(r for r, _ in acc["relay"]) / len(acc["relay"])
        ev = sum(u.get("events", 0) for _, u in acc["relay"])
        tot = {k: sum(u.get(k, 0) for _, u in acc["relay"]) for k in ("relay", "mariadbd", "rabbitmq")}
        servers_per_ev = (tot["mariadbd"] + tot["rabbitmq"]) / ev if ev else 0
        ceiling = (os.cpu_count() / servers_per_ev) if servers_per_ev else 0
        db, broker = acc["db"][0][0], acc["broker"][0][0]
        res.update(account_relay=relay, account_db_limit=db, account_broker_limit=broker, account_ceiling=ceiling,
                   account_cpu_per_1000={k: v * 1000 / ev for k, v in tot.items()} if ev else {})
        print(f"relay x1 cpu s/1000 ev: relay {tot['relay'] * 1000 / ev:.3f}, mariadbd {tot['mariadbd'] * 1000 / ev:.3f},"
              f" rabbitmq {tot['rabbitmq'] * 1000 / ev:.3f}" if ev else "relay x1: no events", flush=True)
        print(f"ceiling ({os.cpu_count()} cores / servers' cpu per event) = {ceiling:9.0f} ev/s;"
              f" relay / ceiling = {relay / ceiling if ceiling else 0:5.2f}   (target >= 0.85)", flush=True)
        print(f"relay / database limit = {relay / db if db else 0:5.2f}; relay / broker limit = "
              f"{relay / broker if broker else 0:5.2f}   (target >= 0.7)", flush=True)
    if "throughput" in part:
        # A-B-A: broker limit, relay x1, relay x3, broker limit, relay x1, relay x3
        b1 = broker_limit(N)
        print(f"{'broker limit: C publisher with confirms':<52} {b1:>9.0f} ev/s", flush=True)
        r1 = scenario("relay x1", N, 1, N)
        r3 = scenario("relay x3", N, 3, N)
        b2 = broker_limit(N)
        print(f"{'broker limit: C publisher with confirms':<52} {b2:>9.0f} ev/s", flush=True)
        r1b = scenario("relay x1", N, 1, N)
        r3b = scenario("relay x3", N, 3, N)
        broker = (b1 + b2) / 2
        one = (r1 + r1b) / 2
        three = (r3 + r3b) / 2
        res.update(broker=broker, relay1=one, relay3=three)
        print(f"relay x1 / broker limit   = {one / broker:5.2f}   (target >= 0.6)", flush=True)
        print(f"relay x3 / relay x1       = {three / one:5.2f}   (target >= 1.5 where the broker has headroom)",
              flush=True)
    if "scale" in part:
        # Three relays vs one where the broker has headroom: at a small batch
        # one relay is bound by its own round trips (claim, publish, confirm,
        # mark per 16 events), far below the broker's limit, so what three
        # relays add shows whether claims on one table contend (they should
        # not: SKIP LOCKED) rather than the broker's ceiling.
        sb = int(os.environ.get("BENCH_SCALE_BATCH", "16"))
        # The reference: the C publisher, one connection vs three, publishing
        # in chunks of the same size: what three publishers of any kind get
        # from this broker.
        ones, threes, p1s, p3s = [], [], [], []
        for _ in range(2):
            p1s.append(broker_limit(N, 1, sb))
            print(f"{'C publisher x1, confirms per ' + str(sb):<52} {p1s[-1]:>9.0f} ev/s", flush=True)
            p3s.append(broker_limit(N, 3, sb))
            print(f"{'C publisher x3, confirms per ' + str(sb):<52} {p3s[-1]:>9.0f} ev/s", flush=True)
            ones.append(scenario(f"relay x1, batch {sb}", N, 1, N, batch=sb))
            threes.append(scenario(f"relay x3, batch {sb}", N, 3, N, batch=sb))
        one, three, p1, p3 = sum(ones) / 2, sum(threes) / 2, sum(p1s) / 2, sum(p3s) / 2
        res.update(scale_batch=sb, scale_relay1=one, scale_relay3=three, scale_pub1=p1, scale_pub3=p3)
        print(f"relay x3 / relay x1 at batch {sb}          = {three / one:5.2f}   (target >= 1.5 where the broker "
              f"has headroom)", flush=True)
        print(f"C publisher x3 / x1 at {sb} per confirm    = {p3 / p1:5.2f}   (the broker's own headroom for a "
              f"second and third publisher)", flush=True)
    if "remote" in part:
        # The database behind BENCH_DB_RTT_MS (2) of round-trip time, as on
        # another host: one relay is bound by its own round trips and the
        # broker has headroom, so x3 / x1 shows whether relays sharing one
        # table hold each other up (claims with SKIP LOCKED should not).
        rtt = float(os.environ.get("BENCH_DB_RTT_MS", "2"))
        rb = int(os.environ.get("BENCH_REMOTE_BATCH", "16"))
        proxy = DelayProxy(int(os.environ["SC_TEST_MYSQL_PORT"]), rtt)
        url = re.sub(r"@127\.0\.0\.1:\d+/", f"@127.0.0.1:{proxy.port}/", MYSQL)
        ones, threes = [], []
        for _ in range(2):
            ones.append(scenario(f"relay x1, batch {rb}, database {rtt:g} ms away", N // 2, 1, N // 2, rb, url))
            threes.append(scenario(f"relay x3, batch {rb}, database {rtt:g} ms away", N // 2, 3, N // 2, rb, url))
        one, three = sum(ones) / 2, sum(threes) / 2
        res.update(remote_rtt_ms=rtt, remote_relay1=one, remote_relay3=three)
        print(f"relay x3 / relay x1, database {rtt:g} ms away = {three / one:5.2f}   (target >= 1.5 where the broker "
              f"has headroom: x3 moves {three:.0f} ev/s; the broker's limit at this confirm size is in the "
              f"'scale' part)", flush=True)
    if "inserts" in part:
        # Producer inserts with outbox_event empty vs holding BENCH_OUTBOX_FILL
        # rows of PUBLISHED history (not yet purged), A-B-B-A, for
        # time-ordered ids (what the producer helper makes) and random ones,
        # with the buffer pool at BENCH_POOL_MB (128) so the table is ~25x it.
        pool_mb = int(os.environ.get("BENCH_POOL_MB", "128"))
        pool_before = set_pool(pool_mb << 20)
        fill = int(os.environ.get("BENCH_OUTBOX_FILL", "10000000"))
        k = int(os.environ.get("BENCH_INSERTS_N", "5000"))
        q("TRUNCATE TABLE outbox_event")
        rates = {}
        for tag in ("A", "B", "B again", "A again"):
            if tag == "B":
                t0 = time.time()
                load_outbox(fill, status="PUBLISHED")
                settle(120)
                size = q("SELECT ROUND(data_length / 1048576), ROUND(index_length / 1048576) FROM "
                         "information_schema.tables WHERE table_schema = 'app' AND table_name = 'outbox_event'")[0]
                print(f"# outbox_event filled with {fill} PUBLISHED rows in {time.time() - t0:.0f} s: data ~{size[0]} MB,"
                      f" secondary indexes ~{size[1]} MB; buffer pool {pool_mb} MB", flush=True)
            if tag == "A again":
                q("TRUNCATE TABLE outbox_event")
            for ids in ("v7", "v4"):
                r = outbox_inserts(k, ids)
                rates.setdefault((tag[0], ids), []).append(r)
                print(f"{'producer inserts, ' + ids + ' ids, ' + ('empty' if tag[0] == 'A' else str(fill) + ' rows') + ' (' + tag + ')':<52}"
                      f" {r:>9.0f} ev/s", flush=True)
        for ids in ("v7", "v4"):
            ratio = sum(rates[("B", ids)]) / sum(rates[("A", ids)])
            res[f"inserts_{ids}_ratio"] = ratio
            print(f"producer inserts at {fill} rows / empty, {ids} ids = {ratio:5.2f}"
                  + ("   (target >= 0.8)" if ids == "v7" else "   (ids the service brings: the sizing rule)"),
                  flush=True)
        q("TRUNCATE TABLE outbox_event")
        set_pool(pool_before)  # the other parts (and the next run) at the server's own size
    if "backlog" in part:
        # A-B-A-B-A: a small backlog (drained three times per A, a drain of
        # 10,000 rows lasts only ~2 s) around a 1,000,000-row backlog measured
        # over its first 30,000 events (so the relay's periodic pending
        # count, O(backlog) and self-limited to ~1% of the time, is in the
        # window as it is in a long drain)
        rounds = int(os.environ.get("BENCH_BACKLOG_ROUNDS", "2"))
        smalls, bigs = [], []
        for k in range(2 * rounds + 1):
            if k % 2 == 0:
                rs = [scenario(f"relay x1, backlog {SMALL}", SMALL, 1, SMALL) for _ in range(3)]
                smalls.append(sum(rs) / len(rs))
            else:
                bigs.append(scenario(f"relay x1, backlog {BIG}", BIG, 1, 3 * SMALL))
        a, b = sum(smalls) / len(smalls), sum(bigs) / len(bigs)
        res.update(backlog_small=a, backlog_big=b, ids=IDS)
        print(f"backlog {BIG} / backlog {SMALL} = {b / a:5.2f}   (target >= 0.8; ids {IDS}; "
              f"means of {len(bigs)} B and {len(smalls)} A runs)", flush=True)
        q("TRUNCATE TABLE outbox_event")
    if "rss" in part:
        q("TRUNCATE TABLE outbox_event")
        load_outbox(RSS_N)
        qname = fresh_queue()
        r = RelayProc()
        samples = []
        t0 = time.time()
        while time.time() - t0 < 900:
            done = r.published()
            samples.append((done, r.rss_kib()))
            if done >= RSS_N:
                break
            # without a length limit the queue would hold a million messages
            time.sleep(1)
            if not MAX_LENGTH and len(samples) % 10 == 0:
                c = pika.BlockingConnection(pika.URLParameters(AMQP))
                c.channel().queue_purge(qname)
                c.close()
        r.stop()
        delete_queue(qname)
        warm = [s for s in samples if s[0] >= RSS_N // 10]
        if warm:
            growth = (warm[-1][1] - warm[0][1]) / 1024
            print(f"relay RSS over {samples[-1][0]} events: {warm[0][1] / 1024:.1f} MiB after warm-up, "
                  f"{warm[-1][1] / 1024:.1f} MiB at the end, growth {growth:+.2f} MiB   (target within 2 MiB)",
                  flush=True)
            res.update(rss_warm_mib=warm[0][1] / 1024, rss_end_mib=warm[-1][1] / 1024, events=samples[-1][0])
        q("TRUNCATE TABLE outbox_event")
    if "latency" in part:
        # Producer COMMIT -> consumer COMMIT at 100 and 1,000 events/s, the
        # default config, then the low-latency settings docs/performance.md
        # recommends (relay.poll_ms 10).
        secs = float(os.environ.get("BENCH_LATENCY_S", "10"))
        for label, rcfg in (("defaults", None), ("relay.poll_ms 10", {"poll_ms": 10})):
            for rate in (100, 1000):
                r = e2e_latency(rate, secs, rcfg)
                res[f"e2e_{rate}_{'default' if rcfg is None else 'poll10'}"] = r
                print(f"{'end to end, ' + str(rate) + ' ev/s, ' + label:<52} p50 {r['p50_ms']:>6} ms  p99 "
                      f"{r['p99_ms']:>6} ms  max {r['max_ms']:>6} ms  ({r['events']} of {r['of']})"
                      + ("   (target p99 <= 50 ms)" if rate == 100 and rcfg is None else ""), flush=True)
    json.dump(res, open(os.environ.get("BENCH_JSON", "/dev/null"), "w"), indent=1)


main()
