"""Review finding: `sidecar dlq replay --key K` releases a held key when its
browse of the DLQ does not see the key's dead letters -- here because another
client (a concurrent `dlq list` / another `replay --key`) holds them unacked
at that moment. The key is then free while its dead letters are still in the
DLQ, and the next event of K is applied before them (contract: "Per-key
order", on_dead_letter hold)."""
import os
import tempfile
import uuid

from harness import *

query("CREATE TABLE IF NOT EXISTS t_order_seen (seq BIGINT AUTO_INCREMENT PRIMARY KEY, "
      "event_id CHAR(36) NOT NULL, subject VARCHAR(100) NOT NULL, version BIGINT NOT NULL, "
      "at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))")
query("GRANT INSERT ON app.t_order_seen TO 'sidecar_consumer'@'%'")
block = os.path.join(tempfile.mkdtemp(prefix="sc-hrb-"), "block")
name = "t-hrb-" + suffix()


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


key = "k-" + suffix()
open(block, "w").close()
sc = Sidecar(name=name, handler=TEST_HANDLER, env={"SC_TEST_BLOCK_FILE": block},
             consumer_extra={"workers": 1, "max_attempts": 2, "retry_delays_ms": [100],
                             "batch_max": 8, "ordering": {"key": "subject"}})
ok(sc.start(), "ordered consumer, on_dead_letter hold")
send(sc, [(key, 1, "ORDERED_BLOCKED"), (key, 2, "ORDERED"), (key, 3, "ORDERED")])
ok(wait_until(lambda: queue_depth(sc.dlq) == 3 and held_row(key), timeout=60),
   "v1 dead-lettered, v2 and v3 held behind it", held_row(key))
os.unlink(block)

# Another DLQ client holds the dead letters unacked (what `dlq list` or a
# second `replay --key` does while it browses).
other = amqp()
och = other.channel()
got = 0
for _ in range(3):
    m, _, _ = och.basic_get(sc.dlq, auto_ack=False)
    got += m is not None
ok(got == 3, "a concurrent DLQ browser holds the 3 dead letters")
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", key], sc.config)
diag(out)
other.close()  # the dead letters go back to the DLQ
ok(wait_until(lambda: queue_depth(sc.dlq) == 3, timeout=10), "the 3 dead letters are back in the DLQ")
ok(held_row(key) is not None, "the key is still held while its dead letters are in the DLQ",
   (rc, out, held_row(key)))
send(sc, [(key, 4, "ORDERED")])
wait_until(lambda: versions(key) or queue_depth(sc.dlq) == 4, timeout=20)
ok(versions(key) == [], "v4 is not applied before v1..v3 (it is held)", versions(key))
sc.stop()
done()
