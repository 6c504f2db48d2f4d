"""Per-key order through the whole chain against the real servers: 200
aggregates x 20 versions in outbox_event, two relays with relay.ordering
per_aggregate (nacks injected: a second queue with x-overflow reject-publish
runs full), two sidecar processes with the same ordered consumer (key
subject, partitions 2, workers 2: one active per partition, the other
process a standby), kill -9 of the active one mid-stream. Per key, the
handler's effects (t_order_seen, in the order they were written) are
versions 1..20 strictly in order, none missing, none doubled, and the
repeats really were delivered (nacked publishes republished, deliveries in
the killed process's hands redelivered)."""
import datetime
import os
import signal

from harness import *
from ordering_common import seen

AGGS, VERSIONS = 200, 20
clear_outbox()


def consumer(name=None):
    return Sidecar(name=name, handler=TEST_HANDLER, consumer_extra={
        "workers": 2, "prefetch": 64, "batch_max": 16, "retry_delays_ms": [100],
        "ordering": {"key": "subject", "partitions": 2}})


active = consumer()
ok(active.start(), "the first process with an ordered consumer (partitions 2, workers 2) starts")
standby = consumer(name=active.name)
ok(standby.start(), "a second process with the same consumer starts: a standby")
trap = "trap-" + suffix()
conn = amqp()
ch = conn.channel()
ch.queue_declare(trap, durable=True, arguments={"x-max-length": 1200, "x-overflow": "reject-publish"})
ch.queue_bind(trap, active.exchange, "#")
conn.close()

base = datetime.datetime.utcnow() - datetime.timedelta(hours=1)
sent = {}
rows = []
for v in range(1, VERSIONS + 1):
    for a in range(AGGS):
        eid = str(uuid.uuid4())
        sent[eid] = (f"key-{a}", v)
        rows.append((eid, f"key-{a}", v, json.dumps({"v": v}),
                     (base + datetime.timedelta(seconds=v, milliseconds=a)).strftime("%Y-%m-%d %H:%M:%S.%f")))
with admin_db() as c, c.cursor() as cur:
    cur.executemany("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version,"
                    " payload, status, created_at) VALUES (%s, 'ORDER', %s, 'ORDERED', %s, %s, 'PENDING', %s)", rows)


def relay(name):
    r = Relay(active.exchange, worker_id=name, batch=50, lease_ms=2000, poll_ms=50)
    r.config["relay"]["ordering"] = "per_aggregate"
    with open(r.config_path, "w") as f:
        json.dump(r.config, f)
    return r


def applied_count():
    return query("SELECT COUNT(*) FROM t_order_seen WHERE event_id IN (SELECT event_id FROM "
                 "consumed_event WHERE consumer_name = %s)", (active.name,))[0][0]


def applied(ids=None):
    """[(seq, event_id, subject, version)] of the sent events, in the order written."""
    return seen(ids or sent, columns="seq, event_id, subject, version")


ra, rb = relay("chain-a"), relay("chain-b")
ra.start()
rb.start()
nacked = wait_until(lambda: ra.outcomes("nacked") or rb.outcomes("nacked"), timeout=90)
ok(nacked, "the full reject-publish queue nacked publishes (they stay PUBLISHING, republished after the lease)")
conn = amqp()
conn.channel().queue_delete(trap)
conn.close()
ok(wait_until(lambda: applied_count() >= 1500, timeout=120, step=0.05),
   f"the chain flows ({applied_count()} applied)")
# Both processes frozen mid-stream, so the kill below finds work left for
# the standby whatever the machine's speed.
for sc in (active, standby):
    os.kill(sc.proc.pid, signal.SIGSTOP)
left = len(sent) - applied_count()
ok(left > 0, f"frozen mid-stream: {left} events not yet applied")
holder = None
for sc in (active, standby):
    if any(l.get("outcome") == "applied" for l in sc.lines()):
        holder = sc
ok(holder is not None, "one of the two processes is the active consumer")
holder.kill9()
other = standby if holder is active else active
os.kill(other.proc.pid, signal.SIGCONT)
ok(wait_until(lambda: len(applied()) >= len(sent), timeout=240),
   f"after kill -9 of the active process the standby applies the rest ({len(applied())} of {len(sent)})")
got = applied()
per_key, count = {}, {}
for _, eid, subject, version in got:
    per_key.setdefault(subject, []).append(version)
    count[eid] = count.get(eid, 0) + 1
bad = [(k, vs) for k, vs in per_key.items() if vs != list(range(1, VERSIONS + 1))]
ok(len(per_key) == AGGS and not bad,
   f"every one of the {AGGS} keys: versions 1..{VERSIONS} strictly in order, none missing",
   detail=[f"{k}: {vs}" for k, vs in bad[:10]])
doubled = [e for e, n in count.items() if n > 1]
ok(not doubled, f"no effect twice ({len(doubled)} doubled)")
took = [l for l in other.lines() if l.get("outcome") == "applied"]
dups = [l for l in other.lines() if l.get("outcome") == "duplicate"]
copies = len(ra.outcomes("nacked")) + len(rb.outcomes("nacked"))
ok(took, f"the standby took over: it applied {len(took)}")
all_dups = [l for sc in (active, standby) for l in sc.lines() if l.get("outcome") == "duplicate"]
ok(all_dups, f"repeats were delivered and recognised: {len(all_dups)} duplicates ({copies} nacked publishes"
   f" republished after their lease; {len(dups)} of the duplicates in the standby)")
is_eq(ra.stop(), 0, "relay a stops cleanly")
is_eq(rb.stop(), 0, "relay b stops cleanly")
is_eq(other.stop(), 0, "the standby stops cleanly")
clear_outbox()
done()
