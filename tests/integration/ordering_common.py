"""What the ordered-consumer tests share: the effects table the test handler
writes (t_order_seen, one row per applied event, in the order applied), a
publisher of keyed events, and readers of the effects and of
consumer_held_key."""
import uuid

from harness import amqp, event_body, publish, query

query("CREATE TABLE IF NOT EXISTS t_order_seen (seq BIGINT AUTO_INCREMENT PRIMARY KEY, "
      "event_id CHAR(36) NOT NULL, subject VARCHAR(100) NOT NULL, version BIGINT NOT NULL, "
      "at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))")
query("GRANT INSERT ON app.t_order_seen TO 'sidecar_consumer'@'%'")


def send_keyed(exchange, events):
    """events: [(key, version, type)], published in that order under
    confirms with x-ordering-key. Returns {event_id: (key, version)}."""
    sent = {}
    conn = amqp()
    ch = conn.channel()
    ch.confirm_delivery()
    for k, v, t in events:
        eid = str(uuid.uuid4())
        sent[eid] = (k, v)
        publish(ch, exchange, t, event_body(eid, etype=t, subject=k, version=v),
                message_id=eid, headers={"x-ordering-key": k})
    conn.close()
    return sent


def seen(ids, columns="seq, event_id, subject, version, at"):
    """Rows (columns) of t_order_seen for these event ids, in apply order."""
    rows = []
    ids = list(ids)
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        rows += query(f"SELECT {columns} FROM t_order_seen WHERE event_id IN "
                      f"({','.join(['%s'] * len(chunk))})", chunk)
    return sorted(rows)


def applied_versions(consumer, key):
    """The versions of key that consumer applied, in the order applied."""
    return [r[0] for r in query("SELECT version FROM t_order_seen s JOIN consumed_event c ON "
                                "c.event_id = s.event_id AND c.consumer_name = %s WHERE "
                                "s.subject = %s ORDER BY s.seq", (consumer, key))]


def held_row(consumer, key):
    """(held_behind, replay_token, held, hold_seq) while the key is held --
    its first held event not consumed, the token of its current replay, how
    many of its held events are not consumed, the highest number given out --
    None once none is left."""
    rows = query("SELECT e.event_id, k.replay_token, k.hold_seq FROM consumer_held_event e JOIN "
                 "consumer_held_key k ON k.consumer_name = e.consumer_name AND k.order_key = "
                 "e.order_key WHERE e.consumer_name = %s AND e.order_key = %s AND NOT EXISTS "
                 "(SELECT 1 FROM consumed_event c WHERE c.consumer_name = e.consumer_name AND "
                 "c.event_id = e.event_id) ORDER BY e.hold_seq", (consumer, key))
    if not rows:
        return None
    return (rows[0][0], rows[0][1], len(rows), rows[0][2])


def hold_consumer(name, block, **extra):
    """An ordered consumer with on_dead_letter hold (the default) whose
    ORDERED_BLOCKED events fail while the file `block` exists; one worker,
    two attempts, unless extra says otherwise."""
    from harness import Sidecar, TEST_HANDLER
    cfg = {"workers": 1, "max_attempts": 2, "retry_delays_ms": [100], "batch_max": 8,
           "ordering": {"key": "subject"}}
    cfg.update(extra)
    return Sidecar(name=name, handler=TEST_HANDLER, env={"SC_TEST_BLOCK_FILE": block},
                   consumer_extra=cfg)
