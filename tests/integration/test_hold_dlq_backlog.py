"""Review reproducer: `dlq replay --key` reads at most the DLQ's first 10000
messages (DLQ_MAX) and replays a held key only when it saw a copy of every
held event. A key whose dead letters sit behind 10000 others in the DLQ (a
backlog after an outage; here other keys' dead letters) is refused on every
run, and a key with more than 10000 held events can never be replayed:
only `dlq release --key` (order given up) frees it. Replaying the held
events' longest prefix that has copies would keep order and make progress."""
import os
import tempfile
import uuid

from harness import *
from ordering_common import applied_versions, held_row, send_keyed, hold_consumer

block = os.path.join(tempfile.mkdtemp(prefix="sc-hdb-"), "block")
name = "t-hdb-" + suffix()
key = "k-" + suffix()
BACKLOG = 10000

open(block, "w").close()
sc = hold_consumer(name, block)
ok(sc.start(), "ordered consumer, on_dead_letter hold (it declares the DLQ)")
conn = amqp()
ch = conn.channel()
for i in range(BACKLOG):
    eid = str(uuid.uuid4())
    publish(ch, "", sc.dlq, event_body(eid, etype="ORDERED", subject=f"other-{i}"),
            message_id=eid)
conn.close()
ok(wait_until(lambda: queue_depth(sc.dlq) == BACKLOG, timeout=60),
   f"{BACKLOG} dead letters of other keys in the DLQ")
send_keyed(sc.exchange, [(key, 1, "ORDERED_BLOCKED"), (key, 2, "ORDERED")])
ok(wait_until(lambda: queue_depth(sc.dlq) == BACKLOG + 2 and held_row(name, key), timeout=60),
   "v1 dead-lettered, v2 held behind it, both behind the backlog", held_row(name, key))
os.unlink(block)
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", key], sc.config, timeout=120)
diag(out[:600])
ok(rc == 0 and "replayed 2 of 2" in out, "replay --key replays the key's 2 held events", (rc, out[:600]))
ok(wait_until(lambda: applied_versions(name, key) == [1, 2], timeout=30),
   "v1, v2 applied in order", applied_versions(name, key))
sc.stop()
done()
