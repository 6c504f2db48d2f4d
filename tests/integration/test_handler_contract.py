"""Handlers that break the contract, and unusual transactions: the sidecar
must neither lose a message nor apply an effect twice.

- a handler swallows a deadlock that rolled the transaction back and returns
  OK: the claims are gone before COMMIT; the batch is retried, never acked
  empty (issue 10.2);
- a handler switches autocommit on: that message is dead-lettered and the
  session is reset, so later retried events are applied, not taken for
  duplicates of their own auto-committed claims (10.3);
- a delivery dead-lettered by the x-delivery-count guard stays dead when a
  deadlock makes the batch run again (10.6), and an absurd x-delivery-count
  is clamped (10.13).

The deadlocks are real: the test holds row locks from its own connection,
made the heavier transaction (many updated rows) so InnoDB picks the
sidecar's as the victim."""
import threading
import time
import uuid

import pymysql

from harness import *

query("CREATE TABLE IF NOT EXISTS t_locks (id INT PRIMARY KEY)")
query("INSERT IGNORE INTO t_locks VALUES (1), (2), (3)")
query("GRANT SELECT, UPDATE ON app.t_locks TO 'sidecar_consumer'@'%'")
query("CREATE TABLE IF NOT EXISTS t_heavy (id INT PRIMARY KEY, v INT NOT NULL)")
query("INSERT IGNORE INTO t_heavy SELECT seq, 0 FROM seq_1_to_3000")


def lock_waits():
    return query("SELECT COUNT(*) FROM information_schema.INNODB_LOCK_WAITS")[0][0]


def heavy_holder(first_row):
    """A transaction with 3000 updated rows (the heavier one) holding
    t_locks row first_row."""
    x = admin_db()
    x.autocommit(False)
    cur = x.cursor()
    cur.execute("UPDATE t_heavy SET v = v + 1")
    cur.execute("SELECT id FROM t_locks WHERE id = %s FOR UPDATE", (first_row,))
    return x, cur


def close_deadlock(x, cur, second_row):
    """Once the sidecar waits for our row, take the row it holds: a deadlock
    the sidecar loses. Returns True when our side survived."""
    if not wait_until(lambda: lock_waits() > 0, timeout=20):
        return False
    try:
        cur.execute("SELECT id FROM t_locks WHERE id = %s FOR UPDATE", (second_row,))
        survived = True
    except pymysql.err.OperationalError as e:
        diag(f"test transaction was the victim: {e}")
        survived = False
    x.commit()
    x.close()
    return survived


def nj(ids):
    return count_in("notification_job", "event_id", ids)


def claims(ids):
    return count_in("consumed_event", "event_id", ids)


# --- 10.2: a handler swallows the deadlock and returns OK ------------------
sc = Sidecar(handler=TEST_HANDLER, consumer_extra={"workers": 1, "prefetch": 4, "batch_max": 4})
ok(sc.start(), "sidecar started")
x, cur = heavy_holder(2)
e = str(uuid.uuid4())
conn = amqp()
ch = conn.channel()
publish(ch, sc.exchange, "SWALLOW_LOCK", event_body(e, etype="SWALLOW_LOCK", subject="71"), message_id=e)
conn.close()
ok(close_deadlock(x, cur, 1), "a real deadlock: the sidecar's transaction was the victim")
ok(wait_until(lambda: nj([e]) == 1 and claims([e]) == 1, timeout=30),
   "the event was retried and applied after the handler swallowed the deadlock")
is_eq(nj([e]), 1, "one effect")
is_eq(claims([e]), 1, "one claim")
ok(any("claims are gone before COMMIT" in l.get("msg", "") for l in sc.lines()),
   "the vanished claims were detected before COMMIT")
ok(any("retrying the batch" in l.get("msg", "") for l in sc.lines()),
   "the batch was really run again (the repeat happened)")
is_eq(queue_depth(sc.dlq), 0, "nothing dead-lettered")
is_eq(sc.stop(), 0, "clean stop")

# --- 10.3: a handler turns autocommit on; later events must be retried -----
sc = Sidecar(handler=TEST_HANDLER,
             consumer_extra={"workers": 1, "prefetch": 1, "batch_max": 1, "max_attempts": 5,
                             "retry_delays_ms": [100]})
ok(sc.start(), "sidecar started")
bad = str(uuid.uuid4())
conn = amqp()
ch = conn.channel()
publish(ch, sc.exchange, "AUTOCOMMIT_ON", event_body(bad, etype="AUTOCOMMIT_ON", subject="72"),
        message_id=bad)
conn.close()
ok(wait_until(lambda: any(l.get("event_id") == bad for l in sc.outcomes("dead_lettered")), timeout=20),
   "the handler that turned autocommit on was caught (dead-lettered)")
ok(any("session reset" in l.get("msg", "") for l in sc.lines()), "the database session was reset")
flaky = [str(uuid.uuid4()) for _ in range(3)]
conn = amqp()
ch = conn.channel()
for i, f in enumerate(flaky):
    publish(ch, sc.exchange, "FLAKY", event_body(f, etype="FLAKY", subject=str(80 + i)), message_id=f)
conn.close()
ok(wait_until(lambda: nj(flaky) == 3, timeout=30), "every retried event was applied")
is_eq(nj(flaky), 3, "one effect each")
is_eq(claims(flaky), 3, "one claim each")
retried = [l for l in sc.outcomes("retried") if l.get("event_id") in flaky]
ok(len(retried) >= 6, f"each was really retried twice ({len(retried)} retries seen)")
dups = [l for l in sc.outcomes("duplicate") if l.get("event_id") in flaky]
is_eq(len(dups), 0, "no retried copy was taken for a duplicate of its own claim")
is_eq(sc.stop(), 0, "clean stop")

# --- 10.6 + 10.13: the x-delivery-count guard survives a deadlock retry -----
# The broker's count is believed only on a quorum queue's redelivery: the two
# guarded messages are handed out and returned three times by a plain client
# (x-delivery-count 3 = max_attempts), one of them carrying an absurd count
# of its publisher's, which the broker's replaces.
sc = Sidecar(handler=TEST_HANDLER, extra={"log": {"level": "debug"}},
             consumer_extra={"workers": 1, "prefetch": 8, "batch_max": 8, "max_attempts": 3,
                             "queue_type": "quorum"})
guarded, huge, locker = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
bound_queue(sc.exchange, "#", queue=sc.queue, quorum=True)
conn = amqp()
ch = conn.channel()
ch.confirm_delivery()  # both in the queue before the first get
# Published before the sidecar starts, so they arrive as one batch.
publish(ch, sc.exchange, "ORDER_ACCEPTED", event_body(guarded, subject="73"), message_id=guarded)
publish(ch, sc.exchange, "ORDER_ACCEPTED", event_body(huge, subject="74"), message_id=huge,
        headers={"x-delivery-count": 9223372036854775807})
returned = 0
for _ in range(3):
    # Both in hand before either goes back (each returned once a round); a
    # returned message is back in a quorum queue a moment after the nack.
    held, end = [], time.time() + 10
    while len(held) < 2 and time.time() < end:
        m = ch.basic_get(sc.queue)[0]
        if m is None:
            time.sleep(0.02)
        else:
            held.append(m)
    for m in held:
        ch.basic_nack(m.delivery_tag, requeue=True)
        returned += 1
is_eq(returned, 6, "each guarded message handed out and returned three times")
publish(ch, sc.exchange, "LOCK_AB", event_body(locker, etype="LOCK_AB", subject="75"), message_id=locker)
conn.close()
x, cur = heavy_holder(2)
ok(sc.start(), "sidecar started")
ok(close_deadlock(x, cur, 1), "a real deadlock: the sidecar's transaction was the victim")
ok(wait_until(lambda: nj([locker]) == 1, timeout=30), "the deadlocked event was applied on the retry")
ok(any("deadlock: retrying the batch" in l.get("msg", "") for l in sc.lines()), "the batch was retried")
# The batch's line is written after its COMMIT, which the wait above may see first.
ok(wait_until(lambda: any(l.get("msg", "").startswith("batch of 3:") for l in sc.lines()), timeout=10),
   "the guarded deliveries and the deadlocked one shared the batch")
is_eq(nj([guarded, huge]), 0, "the guarded deliveries never reached the handler")
is_eq(claims([guarded, huge]), 0, "and left no claim")
dead = {json.loads(b)["id"]: p.headers for p, b in drain(sc.dlq)}
is_eq(sorted(dead), sorted([guarded, huge]), "both guarded deliveries are in the DLQ")
reason = str((dead.get(huge) or {}).get("x-sidecar-reason", ""))
ok("delivered 4 times" in reason and "-9" not in reason,
   "a publisher's absurd x-delivery-count is not believed: the broker's count is", detail=reason)
is_eq(sc.stop(), 0, "clean stop")
done()
