"""An event of a held key that the consumer has already read
the hold for (no replay in flight yet) but not yet dead-lettered when
`dlq replay --key` marks the replay and browses the DLQ. Before the fix it
was neither in the browse nor noted in held_in_replay, so the last replayed
copy released the key while that event sat in the DLQ, and the key's next
event was applied before it. Now its hold is a held event of the key that
the replay did not take: held while the replay is in flight, it goes to the
end of the stream behind the replay's copies, with the replay's token, and
runs after them."""
import os
import tempfile

from harness import *
from ordering_common import applied_versions, held_row, send_keyed, hold_consumer

block = os.path.join(tempfile.mkdtemp(prefix="sc-hrr-"), "block")
name = "t-hrr-" + suffix()


def versions(key):
    return applied_versions(name, key)


key, other = "k-" + suffix(), "o-" + suffix()
open(block, "w").close()
sc = hold_consumer(name, block)
ok(sc.start(), "ordered consumer, on_dead_letter hold")
send_keyed(sc.exchange, [(key, 1, "ORDERED_BLOCKED"), (key, 2, "ORDERED"), (key, 3, "ORDERED")])
ok(wait_until(lambda: queue_depth(sc.dlq) == 3 and held_row(name, key), timeout=60),
   "v1 dead-lettered, v2 and v3 held behind it", held_row(name, key))
sc.stop()
os.unlink(block)
# v4 of the held key and an event of another key wait together: one batch,
# whose COMMIT (for the other key) pauses after the holds were read.
late = send_keyed(sc.exchange, [(key, 4, "ORDERED"), (other, 1, "ORDERED")])
v4 = [e for e, (k, _) in late.items() if k == key][0]
ok(sc.start(env={"SIDECAR_FAULT": "consumer.before_commit", "SIDECAR_FAULT_PAUSE_MS": "5000"}),
   "restarted with a pause before the first COMMIT")
ok(wait_until(lambda: any("pausing" in l.get("msg", "") for l in sc.lines()), timeout=20),
   "the batch [v4 of the held key, the other key] paused before COMMIT")
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", key], sc.config)
ok(rc == 0 and "replayed 3 of 3" in out, "the replay takes v1..v3 (v4's hold is not recorded yet)",
   (rc, out))
ok(wait_until(lambda: versions(key) == [1, 2, 3, 4], timeout=30),
   "v1..v3 applied, then v4: held while the replay was in flight, it went behind the replay's "
   "copies (not to the DLQ) and ran after them", (versions(key), queue_depth(sc.dlq)))
ok(any(l.get("outcome") == "held" and l.get("event_id") == v4 for l in sc.lines()),
   "the consumer logs v4 sent behind the replay")
ok(wait_until(lambda: held_row(name, key) is None, timeout=10) and queue_depth(sc.dlq) == 0,
   "the key is free, nothing in the DLQ", (held_row(name, key), queue_depth(sc.dlq)))
send_keyed(sc.exchange, [(key, 5, "ORDERED")])
ok(wait_until(lambda: versions(key) == [1, 2, 3, 4, 5], timeout=20), "v5 flows after them",
   versions(key))
sc.stop()
done()
