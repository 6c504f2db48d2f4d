"""An ordered consumer's partitions across broker restarts. RabbitMQ
rebuilds a consistent-hash exchange's ring at boot; a ring whose entries are
queues comes back in the order the queues recover, so keys moved to other
partitions on most restarts. The sidecar's ring holds one fanout exchange per
partition, bound in the sorted order of their names, which the broker's boot
mostly keeps, but not always (printed, not promised: see below).

Checked here, with 12 partitions (names that sort apart from their numbers):
the topology (ring entries, each bound to its queue; no queue on the ring);
keys x versions published with no consumer, the broker restarted twice, more
versions published: how many keys sit in more than one partition queue; then
the consumer applies every event once, and every key left on one partition in
version order (the broker's boot does not always rebuild the ring in the same
order: the split is printed, not promised). A ring built as 0.3 built
it (queues on the ring) is moved to the new entries when the consumer
starts on it, and a partition queue deleted and declared again leaves the
ring as it was."""
import os
import subprocess
import uuid

from harness import *
from ordering_common import seen

PARTS = 12
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def restart_broker():
    r = subprocess.run([os.path.join(ROOT, "tests", "servers"), "restart-rabbit",
                        os.environ["SC_TEST_DIR"]], capture_output=True, text=True, timeout=240)
    return r.returncode == 0


def consumer(like=None):
    """A new ordered consumer, or one more start of like's."""
    return Sidecar(name=like.name if like else None, exchange=like.exchange if like else None,
                   handler=TEST_HANDLER, consumer_extra={
        "workers": 2, "prefetch": 64, "retry_delays_ms": [100], "batch_max": 16,
        "ordering": {"key": "subject", "partitions": PARTS, "on_dead_letter": "skip"}})


def ring_bindings(queue):
    """(destination kind, destination name) bound to <queue>.ordering."""
    r = rabbitmqctl("list_bindings", "source_name", "destination_kind", "destination_name")
    return sorted((l.split("\t")[1], l.split("\t")[2]) for l in r.stdout.splitlines()
                  if l.split("\t")[0] == queue + ".ordering")


def where(queue, sent):
    """{key: set of partitions holding its messages}, read off the partition
    queues (browsed: got and given back)."""
    conn = amqp()
    ch = conn.channel()
    out = {}
    for i in range(PARTS):
        tags = []
        while True:
            m, props, body = ch.basic_get(f"{queue}.p{i}", auto_ack=False)
            if not m:
                break
            tags.append(m.delivery_tag)
            eid = props.message_id
            if eid in sent:
                out.setdefault(sent[eid][0], set()).add(i)
        for t in tags:
            ch.basic_nack(t, requeue=True)
    conn.close()
    return out


def publish_range(exchange, keys, versions, sent):
    conn = amqp()
    ch = conn.channel()
    ch.confirm_delivery()
    for v in versions:
        for k in keys:
            eid = str(uuid.uuid4())
            sent[eid] = (k, v)
            publish(ch, exchange, "ORDERED", event_body(eid, etype="ORDERED", subject=k, version=v),
                    message_id=eid, headers={"x-ordering-key": k})
    conn.close()


# ---- topology ---------------------------------------------------------------
sc = consumer()
ok(sc.start(), f"an ordered consumer with partitions {PARTS} and workers 2 starts")
want = sorted(("exchange", f"{sc.queue}.ordering.p{i}") for i in range(PARTS))
got = ring_bindings(sc.queue)
ok(got == want, "the ring's entries: one exchange per partition, no queue", got)
b = rabbitmqctl("list_bindings", "source_name", "destination_name").stdout.splitlines()
fed = [i for i in range(PARTS) if f"{sc.queue}.ordering.p{i}\t{sc.queue}.p{i}" in b]
is_eq(len(fed), PARTS, "each entry is bound to its partition queue")
ex = rabbitmqctl("list_exchanges", "name", "type", "internal").stdout.splitlines()
ok(all(f"{sc.queue}.ordering.p{i}\tfanout\ttrue" in ex for i in range(PARTS)),
   "each entry is an internal fanout exchange")
sc.stop()

# ---- keys stay on their partition across broker restarts ------------------------
keys = [f"key-{i}" for i in range(60)]
sent = {}
publish_range(sc.exchange, keys, range(1, 4), sent)
before = where(sc.queue, sent)
ok(len(before) == len(keys) and all(len(p) == 1 for p in before.values()),
   f"before a restart: every key's 3 versions in one partition "
   f"({len(set(min(p) for p in before.values()))} partitions used)")
ok(restart_broker(), "the broker restarted")
publish_range(sc.exchange, keys, range(4, 7), sent)
ok(restart_broker(), "the broker restarted again")
publish_range(sc.exchange, keys, range(7, 10), sent)
after = where(sc.queue, sent)
split = sorted(k for k, p in after.items() if len(p) > 1)
# RabbitMQ rebuilds the ring at boot, and the order it ends in is not fixed:
# quiet, 3.10 kept every key; under load (a cluster test beside it) 45 of 60
# keys moved, and 4.0 moved 54 of 60 at one of two restarts. So the restart
# promise is not made (docs/contract.md); what is checked is what holds:
# every key's events in the partition queues, each applied once, and every
# key left on one partition applied in version order.
diag(f"RabbitMQ {rabbitmqctl('version').stdout.strip()}: {len(split)} of {len(keys)} keys on two "
     f"partitions or more after two restarts; "
     f"{sum(1 for k in keys if after.get(k) != before.get(k))} not where they were before")
is_eq(len(after), len(keys), "after two restarts: every key's versions are in the partition queues")

sc2 = consumer(like=sc)
ok(sc2.start(), "the consumer starts on them")
ok(wait_until(lambda: len(seen(sent)) == len(sent), timeout=90),
   f"every event applied ({len(seen(sent))} of {len(sent)})")
rows = seen(sent)
per_key = {}
for _, eid, subject, version, _ in rows:
    per_key.setdefault(subject, []).append(version)
bad = [k for k in keys if sorted(per_key.get(k, [])) != list(range(1, 10))]
ok(not bad, "every key applied once each", [(k, per_key.get(k)) for k in bad[:3]])
bad = [k for k in keys if k not in split and per_key.get(k) != list(range(1, 10))]
ok(not bad, f"every key left on one partition ({len(keys) - len(split)}) applied in version order",
   [(k, per_key.get(k)) for k in bad[:3]])
sc2.stop()

# ---- a ring as 0.3 built it: the queues on the ring ---------------------------
old = consumer()
conn = amqp()
ch = conn.channel()
ch.exchange_declare(old.queue + ".ordering", "x-consistent-hash", durable=True,
                    arguments={"hash-header": "x-ordering-key"})
for i in range(PARTS):
    ch.queue_declare(f"{old.queue}.p{i}", durable=True, arguments={"x-single-active-consumer": True})
    ch.queue_bind(f"{old.queue}.p{i}", old.queue + ".ordering", "1")
conn.close()
is_eq(len(ring_bindings(old.queue)), PARTS, "a 0.3 ring: the 12 partition queues on it")
ok(old.start(), "the consumer starts on it")
got = ring_bindings(old.queue)
ok(got == sorted(("exchange", f"{old.queue}.ordering.p{i}") for i in range(PARTS)),
   "its ring now holds the 12 exchanges and no queue", got)
old_sent = {}
publish_range(old.exchange, keys[:20], range(1, 4), old_sent)
ok(wait_until(lambda: len(seen(old_sent)) == len(old_sent), timeout=60),
   "events published after it are applied")
old.stop()

# ---- a partition queue deleted and declared again leaves the ring as it was -----
ring_before = ring_bindings(sc.queue)
conn = amqp()
conn.channel().queue_delete(f"{sc.queue}.p3")
conn.close()
got = ring_bindings(sc.queue)
ok(got == ring_before, "a partition queue deleted: the ring keeps its entries", got)
sc3 = consumer(like=sc)
ok(sc3.start(), "the consumer starts and declares it again")
b = rabbitmqctl("list_bindings", "source_name", "destination_name").stdout.splitlines()
ok(f"{sc.queue}.ordering.p3\t{sc.queue}.p3" in b, "bound to its entry again")
more = {}
publish_range(sc.exchange, keys, range(10, 12), more)
ok(wait_until(lambda: len(seen(more)) == len(more), timeout=60),
   "events published after it are applied")
sc3.stop()
done()
