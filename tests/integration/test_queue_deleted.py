"""An operator deletes the queue under a running consumer. The broker cancels
the consumer (basic.cancel: the sidecar advertises consumer_cancel_notify);
each worker logs it, counts it (sidecar_consumer_cancelled_total), declares
and binds the queue again and consumes on: events published to the
exchange afterwards are applied. While it cannot (here: the vhost's queue
limit refuses the declaration) /readyz says not ready; once it can, ready
again. Before, the consumer sat idle forever with /readyz green."""
import os
import re
import time

import pika

from harness import *

WORKERS = 2
sc = Sidecar(consumer_extra={"workers": WORKERS, "prefetch": 16})
ok(sc.start(), "sidecar started")
ok(wait_until(lambda: sum(1 for l in sc.lines() if l.get("msg", "").startswith("worker")) >= WORKERS, timeout=30),
   "both workers consuming")
port = sc.http_port()


def consumers_on_queue():
    """The queue's consumer count, or None while the queue does not exist."""
    conn = amqp()
    try:
        return conn.channel().queue_declare(sc.queue, passive=True).method.consumer_count
    except pika.exceptions.ChannelClosedByBroker:
        return None
    finally:
        if conn.is_open:
            conn.close()


def bound(queue, exchange):
    """The queue's binding to the exchange is back: the sidecar declares a
    queue, then binds it, so a queue seen again may not receive yet (what is
    routed before the bind is the broker's to drop)."""
    r = rabbitmqctl("list_bindings", "source_name", "destination_name")
    return any(l.split("\t") == [exchange, queue] for l in r.stdout.splitlines())


def consumers_on_queue_of(queue):
    conn = amqp()
    try:
        return conn.channel().queue_declare(queue, passive=True).method.consumer_count
    except pika.exceptions.ChannelClosedByBroker:
        return None
    finally:
        if conn.is_open:
            conn.close()


def cancelled():
    return metric_sum(port, rf'^sidecar_consumer_cancelled_total\{{consumer="{re.escape(sc.name)}"\}} (\d+)$',
                      default=None)


def ready():
    return sc.get("/readyz")[0] == 200


def applied(ids):
    return count_in("notification_job", "event_id", ids)


props = rabbitmqctl("list_connections", "client_properties")
mine = [l for l in props.stdout.splitlines() if f"sidecar consume {sc.name} worker" in l]
ok(mine and all(re.search(r'consumer_cancel_notify",true', l) for l in mine),
   "the consuming connections advertise the consumer_cancel_notify capability",
   detail=props.stdout[-2000:] + props.stderr)
is_eq(cancelled(), 0, "sidecar_consumer_cancelled_total starts at 0")

first = new_events(10, start=8100)
publish_events(sc.exchange, first)
ok(wait_until(lambda: applied([e for e, _ in first]) == 10, timeout=30), "events applied before the deletion")
ok(ready(), "/readyz is ready")

# ---- the queue deleted: declared again at once, consumption goes on --------
conn = amqp()
conn.channel().queue_delete(sc.queue)
conn.close()
ok(wait_until(lambda: consumers_on_queue() == WORKERS, timeout=20),
   f"the queue exists again with its {WORKERS} consumers", detail=f"consumers: {consumers_on_queue()}")
ok(wait_until(lambda: cancelled() == WORKERS, timeout=10), f"each worker counted the cancel (got {cancelled()})")
lines = [l for l in sc.lines() if "cancelled" in l.get("msg", "")]
ok(lines and lines[0].get("level") == "warn" and sc.queue in lines[0]["msg"],
   "a warning names the cancelled queue", detail=lines[:2])
ok(wait_until(lambda: bound(sc.queue, sc.exchange), timeout=20), "and its binding")
second = new_events(20, start=8200)
publish_events(sc.exchange, second)
ok(wait_until(lambda: applied([e for e, _ in second]) == 20, timeout=30),
   "events published to the exchange after the re-declaration are applied (the binding is back)",
   detail=f"applied {applied([e for e, _ in second])} of 20")
ok(ready(), "/readyz is ready")

# ---- deleted while it cannot be declared again: not ready until it can -----
queues = [l for l in rabbitmqctl("list_queues", "-p", "/", "--no-table-headers", "name").stdout.splitlines()
          if l.strip()]
limit = len(queues) - 1  # one fewer than now: the deleted queue cannot come back
r = rabbitmqctl("set_vhost_limits", "-p", "/", json.dumps({"max-queues": limit}))
ok(r.returncode == 0, f"vhost / limited to {limit} queues", detail=r.stderr)
try:
    conn = amqp()
    conn.channel().queue_delete(sc.queue)
    conn.close()
    ok(wait_until(lambda: sc.get("/readyz")[0] == 503, timeout=20), "/readyz says not ready while the queue cannot be declared")
    status, body = sc.get("/readyz")
    ok(f"consumer {sc.name}" in body and "workers consuming" in body, "and why", detail=body)
    ok(wait_until(lambda: any("queue limit" in l.get("msg", "") or "406" in l.get("msg", "")
                              for l in sc.lines()), timeout=20),
       "the refused declaration is logged", detail=sc.text()[-1500:])
    ok(sc.alive(), "the process keeps running")
finally:
    rabbitmqctl("clear_vhost_limits", "-p", "/")
ok(wait_until(ready, timeout=60), "/readyz ready again once the queue can be declared")
ok(wait_until(lambda: consumers_on_queue() == WORKERS, timeout=20), "the queue is back with its consumers")
ok(wait_until(lambda: bound(sc.queue, sc.exchange), timeout=20), "and its binding")
third = new_events(20, start=8300)
publish_events(sc.exchange, third)
ok(wait_until(lambda: applied([e for e, _ in third]) == 20, timeout=30), "and its events are applied")
all_ids = [e for e, _ in first + second + third]
is_eq(count_in("consumed_event", "event_id", all_ids, f"AND consumer_name = '{sc.name}'"), 50,
      "every event claimed once")
is_eq(applied(all_ids), 50, "every effect once")
is_eq(sc.stop(), 0, "clean stop")

# ---- deleted while the workers hold a batch for the database -----------------
# They do not read their consuming channel then, so the cancel waits unread:
# the workers' own queue check declares the queue again at once, while the
# database is still away, and the batch in hand commits once it is back.
gate = GateProxy(int(os.environ["SC_TEST_MYSQL_PORT"]))
held = Sidecar(mysql_url=gate.url(), consumer_extra={"workers": WORKERS, "prefetch": 16,
                                                      "db_outage_hold_ms": 60000})
ok(held.start(), "a second consumer, through a database proxy")
warm = new_events(5, start=8400)
publish_events(held.exchange, warm)
ok(wait_until(lambda: applied([e for e, _ in warm]) == 5, timeout=30), "its events applied")
gate.down()
in_hand = new_events(4, start=8410)
publish_events(held.exchange, in_hand)
ok(wait_until(lambda: sum(1 for l in held.lines() if "holding the batch" in l.get("msg", "")) >= 1, timeout=30),
   "the database goes away under a batch: the batch is held")
conn = amqp()
conn.channel().queue_delete(held.queue)
conn.close()
t_del = time.time()
back = wait_until(lambda: consumers_on_queue_of(held.queue) is not None, timeout=20, step=0.05)
took = time.time() - t_del
ok(back and took <= 5.0 and gate.is_down,
   f"the queue is declared again within 5 s while the database is still away (took {took:.2f} s)")
ok(wait_until(lambda: bound(held.queue, held.exchange), timeout=20) and gate.is_down,
   "bound again, the database still away")
during = new_events(10, start=8420)
publish_events(held.exchange, during)
gate.up()
ok(wait_until(lambda: applied([e for e, _ in in_hand]) == 4, timeout=60),
   "the batch held in hand commits once the database is back")
ok(wait_until(lambda: applied([e for e, _ in during]) == 10, timeout=60),
   "events published while the database was away, after the re-declaration, are applied",
   detail=f"applied {applied([e for e, _ in during])} of 10")
ok(wait_until(lambda: consumers_on_queue_of(held.queue) == WORKERS, timeout=20),
   "and the workers consume from the queue again", detail=consumers_on_queue_of(held.queue))
is_eq(held.stop(), 0, "clean stop")
done()
