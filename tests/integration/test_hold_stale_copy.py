"""A replayed copy of an earlier `dlq replay --key` that ended (one of its
copies failed again and holds the key) reaches the consumer late, after a
later `replay --key` died midway. (Found by review: the first form of the
replay let any copy run while a later replay had marked the key "pending";
v3 was applied before v1 and v2, and no replay could prove the key complete
again.) The stale copy is held back by another client (what a backlog in
front of it does) until then. Now it carries a token that is not the key's
current replay's: it is held like any other event of the key, and a replay
run again takes all three in arrival order."""
import os
import tempfile

from harness import *
from ordering_common import applied_versions, held_row, send_keyed, hold_consumer

block = os.path.join(tempfile.mkdtemp(prefix="sc-hsc-"), "block")
name = "t-hsc-" + suffix()
key = "k-" + suffix()


def versions():
    return applied_versions(name, key)


open(block, "w").close()
sc = hold_consumer(name, block)
ok(sc.start(), "ordered consumer, on_dead_letter hold")
sent = send_keyed(sc.exchange, [(key, 1, "ORDERED_BLOCKED"), (key, 2, "ORDERED"),
                                (key, 3, "ORDERED")])
v1 = [e for e, (_, v) in sent.items() if v == 1][0]
ok(wait_until(lambda: queue_depth(sc.dlq) == 3 and held_row(name, key), timeout=60),
   "v1 dead-lettered, v2 and v3 held behind it", held_row(name, key))
sc.stop()

# The first replay, with the block still there: its copy of v1 fails again.
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", key], sc.config)
ok(rc == 0 and "replayed 3 of 3" in out, "the first replay sends v1', v2', v3'", out)
# v3' is still on its way to the consumer (here another client holds it).
other = amqp()
och = other.channel()
got = [och.basic_get(sc.queue, auto_ack=False) for _ in range(3)]
ok(all(m is not None for m, _, _ in got), "the three copies are in the consumer's queue")
for m, _, _ in got[:2]:
    och.basic_nack(m.delivery_tag, requeue=True)
ok(sc.start(), "consumer restarted")
ok(wait_until(lambda: queue_depth(sc.dlq) == 2 and held_row(name, key) and
              held_row(name, key)[1] is None, timeout=60),
   "v1' failed again (the replay ended, the key held behind v1), v2' held behind it",
   (held_row(name, key), queue_depth(sc.dlq)))
os.unlink(block)

# A second replay dies right after reading the DLQ.
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", key], sc.config,
                          env={"SIDECAR_FAULT": "dlq.key_browsed"})
ok(rc == 86 and held_row(name, key)[1] is None,
   "the second replay died after its read, naming no replay", (rc, held_row(name, key)))
other.close()  # v3' reaches the consumer
ok(wait_until(lambda: 3 in versions() or queue_depth(sc.dlq) == 3, timeout=30),
   "the stale copy v3' was taken by the consumer", (versions(), queue_depth(sc.dlq)))
ok(3 not in versions(), "v3 is not applied while v1 and v2 wait in the DLQ",
   (versions(), queue_depth(sc.dlq)))

rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", key], sc.config)
diag(out)
ok(rc == 0 and "replayed 3 of 3" in out, "a replay run again takes v1..v3", (rc, out))
ok(wait_until(lambda: versions() == [1, 2, 3], timeout=30),
   "and they are applied in arrival order", versions())
sc.stop()
done()
