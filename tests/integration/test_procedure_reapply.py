"""Applying one event again on purpose, as docs/operations.md describes it:
in one transaction the consumer's consumed_event row (and the effect row
its unique key would refuse twice) deleted and the outbox row set PENDING;
the relay publishes it again to every bound queue. The chosen consumer
applies it a second time, exactly once; another consumer of the same events
keeps its claim and sees a duplicate; a further republish is a duplicate for
both."""
from harness import *

SQL_HANDLER = os.environ["SC_SQL_HANDLER"]
c1 = Sidecar()
log_cfg = {"events": {"ORDER_ACCEPTED": [
    {"sql": "INSERT INTO order_event_log (event_id, order_id, event_type, version, payload, occurred_at, received_at) "
            "VALUES (?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6))",
     "params": ["id", "subject:int", "type", "eventversion", "data:json", "time:datetime"]}]},
    "other_events": "ignore"}
c2 = Sidecar(handler=SQL_HANDLER, exchange=c1.exchange, consumer_extra={"handler_config": log_cfg})
ok(c1.start() and c2.start(), "two consumers of the same events (notification_job, order_event_log)")
clear_outbox()
ids = insert_outbox(3)
relay = Relay(c1.exchange).start()
ok(wait_until(lambda: count_in("notification_job", "event_id", ids) == 3
              and count_in("order_event_log", "event_id", ids) == 3, timeout=30), "all three applied by both")
e = ids[1]
job_before = query("SELECT created_at FROM notification_job WHERE event_id = %s", (e,))[0][0]
log_before = query("SELECT received_at FROM order_event_log WHERE event_id = %s", (e,))[0][0]
c2_claim = query("SELECT consumed_at FROM consumed_event WHERE consumer_name = %s AND event_id = %s", (c2.name, e))

# The procedure: one transaction, as the schema's owner (the effect's table).
with admin_db() as conn, conn.cursor() as cur:
    conn.begin()
    cur.execute("DELETE FROM notification_job WHERE event_id = %s", (e,))
    cur.execute("DELETE FROM consumed_event WHERE consumer_name = %s AND event_id = %s", (c1.name, e))
    cur.execute("UPDATE outbox_event SET status = 'PENDING', lease_owner = NULL, lease_until = NULL "
                "WHERE event_id = %s AND status = 'PUBLISHED'", (e,))
    is_eq(cur.rowcount, 1, "the outbox row set PENDING")
    conn.commit()


def applied(sc, eid):
    return [l for l in sc.outcomes("applied") if l.get("event_id") == eid]


def duplicates(sc, eid):
    return [l for l in sc.outcomes("duplicate") if l.get("event_id") == eid]


ok(wait_until(lambda: len(applied(c1, e)) == 2 and duplicates(c2, e), timeout=30),
   "republished by the relay: the chosen consumer applied it again, the other saw a duplicate")
job_after = query("SELECT created_at FROM notification_job WHERE event_id = %s", (e,))
ok(len(job_after) == 1 and job_after[0][0] > job_before, "one notification_job row, a new one", detail=job_after)
is_eq(query("SELECT received_at FROM order_event_log WHERE event_id = %s", (e,))[0][0], log_before,
      "the other consumer's effect untouched")
is_eq(query("SELECT consumed_at FROM consumed_event WHERE consumer_name = %s AND event_id = %s", (c2.name, e)),
      c2_claim, "the other consumer's claim untouched")
is_eq(count_in("consumed_event", "event_id", [e], f"AND consumer_name = '{c1.name}'"), 1, "the claim is back")
is_eq(len(applied(c2, e)), 1, "the other consumer applied it once only")

# Once more, without deleting the claim: a duplicate for both.
query("UPDATE outbox_event SET status = 'PENDING' WHERE event_id = %s", (e,))
ok(wait_until(lambda: len(duplicates(c1, e)) == 1 and len(duplicates(c2, e)) == 2, timeout=30),
   "a further republish: a duplicate for both")
is_eq(len(applied(c1, e)), 2, "applied a second time exactly once")
is_eq(count_in("notification_job", "event_id", ids), 3, "one effect row per event")
is_eq(query("SELECT COUNT(*) FROM outbox_event WHERE status = 'PUBLISHED' AND event_id IN (%s, %s, %s)", tuple(ids))[0][0],
      3, "every outbox row PUBLISHED again")
is_eq(relay.stop(), 0, "relay: clean stop")
is_eq(c1.stop(), 0, "clean stop")
is_eq(c2.stop(), 0, "clean stop")
done()
