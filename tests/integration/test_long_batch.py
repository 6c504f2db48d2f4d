"""A batch that spends far longer in the database than the heartbeat
allows (every delivery waits for a row lock the test holds) keeps its
broker connections alive: the sidecar sends heartbeats itself while the
batch runs. Without them the broker closes the connections, the whole batch
comes back, and on a classic queue this repeats forever (issue 10.8)."""
import uuid

from harness import *

query("CREATE TABLE IF NOT EXISTS t_locks (id INT PRIMARY KEY)")
query("INSERT IGNORE INTO t_locks VALUES (1), (2), (3)")
query("GRANT SELECT, UPDATE ON app.t_locks TO 'sidecar_consumer'@'%'")

N = 8
sc = Sidecar(handler=TEST_HANDLER,
             extra={"amqp": {"url": os.environ["SC_TEST_AMQP_URL"], "heartbeat_s": 2},
                    "mysql": {"url": os.environ["SC_TEST_MYSQL_CONSUMER_URL"], "lock_wait_timeout_s": 1}},
             consumer_extra={"workers": 1, "prefetch": N, "batch_max": N, "max_attempts": 5,
                             "retry_delays_ms": [500]})
ids = [str(uuid.uuid4()) for _ in range(N)]
conn = amqp()
ch = conn.channel()
ch.exchange_declare(sc.exchange, "topic", durable=True)
ch.queue_declare(sc.queue, durable=True)
ch.queue_bind(sc.queue, sc.exchange, "#")
for i, e in enumerate(ids):  # before the start: one batch of N
    publish(ch, sc.exchange, "LOCK_WAIT", event_body(e, etype="LOCK_WAIT", subject=str(90 + i)), message_id=e)
conn.close()

x = admin_db()
x.autocommit(False)
cur = x.cursor()
cur.execute("SELECT id FROM t_locks WHERE id = 3 FOR UPDATE")
t0 = time.time()
ok(sc.start(), "sidecar started")
first = wait_until(lambda: len({l.get("event_id") for l in sc.outcomes("retried")} & set(ids)) == N, timeout=60)
held = time.time() - t0
ok(first, f"every delivery waited for the lock and was sent to retry ({held:.1f} s with a 2 s heartbeat)")
ok(held > 6, "the batch really outlasted the broker's heartbeat timeout")
x.rollback()
x.close()
ok(wait_until(lambda: count_in("notification_job", "event_id", ids) == N, timeout=60),
   "after the lock was released every event was applied")
is_eq(count_in("notification_job", "event_id", ids), N, "one effect each")
text = sc.text()
ok("connection lost" not in text and "not confirmed" not in text,
   "no broker connection was lost during the long batch",
   detail="\n".join(l for l in text.splitlines() if "lost" in l or "confirmed" in l))
is_eq(sum(1 for l in sc.lines() if l.get("msg", "").startswith("worker 0 consuming")), 1,
      "one session from start to end (no reconnect)")
is_eq(sc.stop(), 0, "clean stop")
done()
