"""A publisher's late duplicate (v2 sent again after v3, the same event id:
at-least-once) of a held key. (Found by review: the first form of the
replay numbered it last and named v2 as the replay's last copy, so the key
was released at the first copy of v2, before v3' was applied.) Now a held
event is one row, whatever its copies: the replay sends one copy of each,
and the key is held while v3 is unapplied. The consumer is paused (fault
point consumer.before_commit, third commit of its run) right before v3'
commits."""
import os
import tempfile
import uuid

from harness import *
from ordering_common import applied_versions, held_row, hold_consumer

block = os.path.join(tempfile.mkdtemp(prefix="sc-hld-"), "block")
name = "t-hld-" + suffix()
key = "k-" + suffix()


def versions():
    return applied_versions(name, key)


open(block, "w").close()
sc = hold_consumer(name, block)
ok(sc.start(), "ordered consumer, on_dead_letter hold")
ids = [str(uuid.uuid4()) for _ in range(3)]
conn = amqp()
ch = conn.channel()
ch.confirm_delivery()
for eid, v, t in [(ids[0], 1, "ORDERED_BLOCKED"), (ids[1], 2, "ORDERED"), (ids[2], 3, "ORDERED"),
                  (ids[1], 2, "ORDERED")]:  # v2 again, late
    publish(ch, sc.exchange, t, event_body(eid, etype=t, subject=key, version=v),
            message_id=eid, headers={"x-ordering-key": key})
conn.close()
ok(wait_until(lambda: queue_depth(sc.dlq) == 4 and held_row(name, key), timeout=60),
   "v1 dead-lettered; v2, v3 and v2's late duplicate held behind it", held_row(name, key))
sc.stop()
os.unlink(block)
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", key], sc.config)
ok(rc == 0 and "replayed 3 of 3" in out and queue_depth(sc.dlq) == 0,
   "the replay sends v1', v2', v3' (one copy per held event; v2's duplicate acked off the DLQ)",
   (out, queue_depth(sc.dlq)))
ok(held_row(name, key)[1] is not None and held_row(name, key)[2] == 3,
   "a replay is named; the key holds its 3 events", held_row(name, key))
ok(sc.start(env={"SIDECAR_FAULT": "consumer.before_commit:3", "SIDECAR_FAULT_PAUSE_MS": "4000"}),
   "consumer restarted, to pause before its third COMMIT (v3')")
ok(wait_until(lambda: any("pausing" in l.get("msg", "") for l in sc.lines()), timeout=20),
   "paused before v3' commits")
ok(versions() == [1, 2], "v1 and v2 applied, v3 not yet", versions())
ok(held_row(name, key) is not None, "the key is still held while v3 is unapplied",
   (held_row(name, key), [l.get("msg") for l in sc.lines() if "key '" in l.get("msg", "")]))
ok(wait_until(lambda: versions() == [1, 2, 3], timeout=30), "v3 applied after the pause",
   versions())
sc.stop()
done()
