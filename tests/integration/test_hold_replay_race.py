"""Review finding: an event of a held key that the consumer has already read
the hold for (no replay in flight yet) but not yet dead-lettered when
`dlq replay --key` marks the replay and browses the DLQ: it is neither in the
browse nor noted in held_in_replay, so the last replayed copy releases the key
while that event sits in the DLQ, and the key's next event is applied before
it."""
import os
import tempfile
import time
import uuid

from harness import *

query("CREATE TABLE IF NOT EXISTS t_order_seen (seq BIGINT AUTO_INCREMENT PRIMARY KEY, "
      "event_id CHAR(36) NOT NULL, subject VARCHAR(100) NOT NULL, version BIGINT NOT NULL, "
      "at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))")
query("GRANT INSERT ON app.t_order_seen TO 'sidecar_consumer'@'%'")
block = os.path.join(tempfile.mkdtemp(prefix="sc-hrr-"), "block")
name = "t-hrr-" + suffix()


def send(sc, events):
    conn = amqp()
    ch = conn.channel()
    ch.confirm_delivery()
    for k, v, t in events:
        eid = str(uuid.uuid4())
        publish(ch, sc.exchange, t, event_body(eid, etype=t, subject=k, version=v),
                message_id=eid, headers={"x-ordering-key": k})
    conn.close()


def versions(key):
    return [r[0] for r in query("SELECT version FROM t_order_seen s JOIN consumed_event c ON "
                                "c.event_id = s.event_id AND c.consumer_name = %s WHERE "
                                "s.subject = %s ORDER BY s.seq", (name, key))]


def held_row(key):
    rows = query("SELECT held_behind, replay_until, held_in_replay FROM consumer_held_key "
                 "WHERE consumer_name = %s AND order_key = %s", (name, key))
    return rows[0] if rows else None


key, other = "k-" + suffix(), "o-" + suffix()
open(block, "w").close()
sc = Sidecar(name=name, handler=TEST_HANDLER, env={"SC_TEST_BLOCK_FILE": block},
             consumer_extra={"workers": 1, "max_attempts": 2, "retry_delays_ms": [100],
                             "batch_max": 8, "ordering": {"key": "subject"}})
ok(sc.start(), "ordered consumer, on_dead_letter hold")
send(sc, [(key, 1, "ORDERED_BLOCKED"), (key, 2, "ORDERED"), (key, 3, "ORDERED")])
ok(wait_until(lambda: queue_depth(sc.dlq) == 3 and held_row(key), timeout=60),
   "v1 dead-lettered, v2 and v3 held behind it", held_row(key))
sc.stop()
os.unlink(block)
# v4 of the held key and an event of another key wait together: one batch,
# whose COMMIT (for the other key) pauses after the holds were read.
send(sc, [(key, 4, "ORDERED"), (other, 1, "ORDERED")])
ok(sc.start(env={"SIDECAR_FAULT": "consumer.before_commit", "SIDECAR_FAULT_PAUSE_MS": "5000"}),
   "restarted with a pause before the first COMMIT")
ok(wait_until(lambda: any("pausing" in l.get("msg", "") for l in sc.lines()), timeout=20),
   "the batch [v4 of the held key, the other key] paused before COMMIT")
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", key], sc.config)
diag(out)
ok(wait_until(lambda: versions(key) == [1, 2, 3], timeout=30), "v1..v3 replayed and applied",
   versions(key))
time.sleep(1)
ok(held_row(key) is not None, "the key stays held: v4 is in the DLQ, not replayed",
   (held_row(key), queue_depth(sc.dlq)))
send(sc, [(key, 5, "ORDERED")])
wait_until(lambda: 5 in versions(key) or queue_depth(sc.dlq) == 2, timeout=20)
ok(5 not in versions(key), "v5 is not applied while v4 waits in the DLQ",
   (versions(key), queue_depth(sc.dlq)))
sc.stop()
done()
