"""relay.ordering "per_aggregate" orders an aggregate by (event_version,
created_at, event_id), so a clock stepped back, or two writers with skewed
clocks, cannot invert one writer's sequence. Against real MariaDB and
RabbitMQ, two per_aggregate relays:

- aggregate "stepped": versions 1..6, the clock stepped back between 2 and 3
  (versions 3 and 4 carry earlier created_at than 1), and version 5 written
  by a host whose clock is 10 s behind: published 1, 2, 3, 4, 5, 6;
- aggregate "flat": every event version 1 (a producer that does not count):
  published in created_at order, event_id breaking the tie of two rows with
  one created_at;
- the migration 012 redefined ix_outbox_event_order: its columns are read
  back from information_schema.
Read off the queue with a plain AMQP client (first copies per aggregate)."""
import datetime

from harness import *

clear_outbox()
ex = "ex-orderv-" + suffix()
q = bound_queue(ex, "ORDER.#")

cols = query("SELECT GROUP_CONCAT(column_name ORDER BY seq_in_index) FROM information_schema.statistics"
             " WHERE table_schema = DATABASE() AND table_name = 'outbox_event'"
             " AND index_name = 'ix_outbox_event_order'")[0][0]
is_eq(cols, "aggregate_type,aggregate_id,status,event_version,created_at,event_id",
      "ix_outbox_event_order has event_version after status (012)")

t0 = datetime.datetime.utcnow() - datetime.timedelta(minutes=10)
sec = lambda s: t0 + datetime.timedelta(seconds=s)
# (aggregate, version, created_at): "stepped" by the producer's sequence.
stepped = [("stepped", 1, sec(5)), ("stepped", 2, sec(6)), ("stepped", 3, sec(1)),
           ("stepped", 4, sec(2)), ("stepped", 5, sec(-5)), ("stepped", 6, sec(7))]
flat = [("flat", 1, sec(3)), ("flat", 1, sec(1)), ("flat", 1, sec(2)), ("flat", 1, sec(2))]
rows = [(str(uuid.uuid4()), a, v, t) for a, v, t in stepped + flat]
with admin_db() as c, c.cursor() as cur:
    cur.executemany(
        "INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version, payload,"
        " status, created_at) VALUES (%s, 'ORDER', %s, 'ORDER.V', %s, '{}', 'PENDING', %s)",
        [(e, a, v, t.strftime("%Y-%m-%d %H:%M:%S.%f")) for e, a, v, t in rows])
want = {
    "stepped": [e for e, a, v, t in sorted((r for r in rows if r[1] == "stepped"), key=lambda r: r[2])],
    "flat": [e for e, a, v, t in sorted((r for r in rows if r[1] == "flat"), key=lambda r: (r[3], r[0]))],
}
by_created = [e for e, a, v, t in sorted((r for r in rows if r[1] == "stepped"), key=lambda r: r[3])]
ok(by_created != want["stepped"], "the stepped aggregate's created_at order is not its version order")


def relay(name):
    r = Relay(ex, worker_id=name, batch=4, lease_ms=2000, poll_ms=20)
    r.config["relay"]["ordering"] = "per_aggregate"
    with open(r.config_path, "w") as f:
        json.dump(r.config, f)
    return r


relays = [relay("orderv-a"), relay("orderv-b")]
for r in relays:
    r.start()
published = lambda: query("SELECT COUNT(*) FROM outbox_event WHERE status = 'PUBLISHED'")[0][0]
ok(wait_until(lambda: published() == len(rows), timeout=60), f"every event PUBLISHED ({published()})")
for r in relays:
    is_eq(r.stop(), 0, f"relay {r.worker_id} stopped")

agg_of = {e: a for e, a, _, _ in rows}
first = {"stepped": [], "flat": []}
for _, props, _ in drain_with_keys(q):
    e = props.message_id
    if e in agg_of and e not in first[agg_of[e]]:
        first[agg_of[e]].append(e)
ver = {e: v for e, _, v, _ in rows}
is_eq([ver[e] for e in first["stepped"]], [1, 2, 3, 4, 5, 6],
      "stepped clock and a skewed writer: first copies in version order")
is_eq(first["flat"], want["flat"], "one version throughout: created_at order, event_id breaking the tie")
done()
