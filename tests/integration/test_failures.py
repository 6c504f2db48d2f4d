"""Failures are never duplicates: a 1062 on another key, handler RETRY with
backoff through delay queues, exhausted attempts, REJECT, and a handler that
ends the transaction itself."""
import uuid

from harness import *

sc = Sidecar(handler=TEST_HANDLER)
ok(sc.start(), "sidecar started with the test handler")

# 1062 on notification_job's PRIMARY KEY, not on uq_consumed_event_identity.
other = str(uuid.uuid4())
query("INSERT INTO notification_job (event_id, order_id, source_version, status, created_at) "
      "VALUES (%s, 1, 1, 'DONE', UTC_TIMESTAMP(6))", (other,))
flaky, always, poison, committer, plain = (str(uuid.uuid4()) for _ in range(5))
conn = amqp()
ch = conn.channel()
ch.confirm_delivery()
publish(ch, sc.exchange, "ORDER_ACCEPTED", event_body(other, subject="77"), message_id=other)
publish(ch, sc.exchange, "FLAKY", event_body(flaky, etype="FLAKY", subject="78"), message_id=flaky)
publish(ch, sc.exchange, "ALWAYS_RETRY", event_body(always, etype="ALWAYS_RETRY", subject="79"), message_id=always)
publish(ch, sc.exchange, "POISON", event_body(poison, etype="POISON", subject="80"), message_id=poison)
conn.close()
wait_until(lambda: queue_depth(sc.dlq) >= 3, timeout=60)
wait_until(lambda: any(l.get("event_id") == flaky for l in sc.outcomes("applied")), timeout=30)

# A handler that commits by itself, with an innocent delivery right behind it
# (likely the same batch): the innocent one must still get its effect.
conn = amqp()
ch = conn.channel()
ch.confirm_delivery()
publish(ch, sc.exchange, "COMMITTER", event_body(committer, etype="COMMITTER", subject="81"), message_id=committer)
publish(ch, sc.exchange, "ORDER_ACCEPTED", event_body(plain, subject="82"), message_id=plain)
conn.close()
wait_until(lambda: queue_depth(sc.dlq) >= 4, timeout=60)
wait_until(lambda: count_in("notification_job", "event_id", [plain]) == 1, timeout=30)
# The outcome line is written after the ack, which follows the COMMIT seen above.
wait_until(lambda: any(l.get("event_id") == plain and l.get("outcome") == "applied"
                       for l in sc.lines()), timeout=10)
lines = sc.lines()
by = lambda eid, outcome: [l for l in lines if l.get("event_id") == eid and l.get("outcome") == outcome]

# other key
ok(not by(other, "duplicate"), "1062 on another key is not taken for a duplicate")
is_eq(count_in("consumed_event", "event_id", [other]), 0, "its consumed_event insert was rolled back")
is_eq(query("SELECT status FROM notification_job WHERE event_id=%s", (other,))[0][0], "DONE",
      "the existing row is untouched")
# flaky: two retries through the delay queues, then applied once
is_eq(len(by(flaky, "retried")), 2, "FLAKY retried twice")
is_eq(len(by(flaky, "applied")), 1, "FLAKY applied on the third attempt")
ok(by(flaky, "applied") and by(flaky, "applied")[0].get("attempt") == 3, "attempt number carried in the header")
is_eq(count_in("notification_job", "event_id", [flaky]), 1, "FLAKY has exactly one effect")
# exhausted
is_eq(len(by(always, "retried")), 2, "ALWAYS_RETRY retried max_attempts-1 times")
is_eq(len(by(always, "dead_lettered")), 1, "then dead-lettered")
# reject and contract violation
is_eq(len(by(poison, "dead_lettered")), 1, "POISON dead-lettered at once")
is_eq(len(by(poison, "retried")), 0, "POISON never retried")
is_eq(len(by(committer, "dead_lettered")), 1, "a handler that commits is caught and dead-lettered")
is_eq(len(by(plain, "applied")), 1, "the event behind the committing handler is applied")
is_eq(count_in("notification_job", "event_id", [plain]), 1, "and has its effect exactly once")

msgs = drain(sc.dlq)
reasons = {}
for props, body in msgs:
    h = props.headers or {}
    r = h.get("x-sidecar-reason", b"")
    reasons[props.message_id] = r.decode() if isinstance(r, bytes) else r
is_eq(len(msgs), 4, "four messages in the DLQ")
ok("1062" in reasons.get(other, "") and "PRIMARY" in reasons.get(other, ""),
   f"other-key reason records code and key ({reasons.get(other)})")
ok("23000" in reasons.get(other, ""), "other-key reason records the SQLSTATE")
ok("attempts exhausted (3 of 3)" in reasons.get(always, ""), f"exhausted reason ({reasons.get(always)})")
ok("poison" in reasons.get(poison, ""), f"reject reason ({reasons.get(poison)})")
ok("ended the transaction" in reasons.get(committer, ""), f"contract violation reason ({reasons.get(committer)})")
is_eq(queue_depth(sc.queue), 0, "main queue empty")
is_eq(sc.stop(), 0, "clean stop")
done()
