"""`dlq replay --key` that named its replay but did not publish its copies —
its publish refused (here: the consumer's queue missing, the copy returned
unroutable) or the command killed right after naming
(SIDECAR_FAULT=dlq.key_named). (Found by review: the first form of the
replay then left the key "in flight" for good; every later replay was
refused, and only `dlq release --key` freed it, giving up order.) Now the
replay run again names a new replay and replays the key in arrival order."""
import os
import tempfile

from harness import *
from ordering_common import applied_versions, held_row, send_keyed, hold_consumer

block = os.path.join(tempfile.mkdtemp(prefix="sc-hrc-"), "block")
name = "t-hrc-" + suffix()
refused, killed = "r-" + suffix(), "c-" + suffix()


def versions(k):
    return applied_versions(name, k)


open(block, "w").close()
sc = hold_consumer(name, block)
ok(sc.start(), "ordered consumer, on_dead_letter hold")
send_keyed(sc.exchange, [(refused, 1, "ORDERED_BLOCKED"), (refused, 2, "ORDERED"),
                         (killed, 1, "ORDERED_BLOCKED"), (killed, 2, "ORDERED")])
ok(wait_until(lambda: queue_depth(sc.dlq) == 4 and held_row(name, refused) and
              held_row(name, killed), timeout=60), "both keys held, 4 dead letters")
os.unlink(block)

# A replay whose first copy is refused by the broker.
sc.stop()
conn = amqp()
conn.channel().queue_delete(sc.queue)
conn.close()
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", refused], sc.config)
diag(out)
ok(rc == 1 and "run this again" in out, "the copy is refused; the command says: run this again",
   (rc, out))
ok(sc.start(), "consumer restarted (its queue declared again)")
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", refused], sc.config)
ok(rc == 0, "replaying it again, as told, replays the key", (rc, out))
ok(wait_until(lambda: versions(refused) == [1, 2], timeout=20),
   "its events applied in arrival order", versions(refused))

# A replay killed right after it named its last copy.
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", killed], sc.config,
                          env={"SIDECAR_FAULT": "dlq.key_named"})
ok(rc == 86, "the replay died after naming its last copy", (rc, out))
ok(wait_until(lambda: queue_depth(sc.dlq) >= 2, timeout=10), "its dead letters are back in the DLQ")
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", killed], sc.config)
ok(rc == 0, "a replay run again replays the key", (rc, out))
ok(wait_until(lambda: versions(killed) == [1, 2], timeout=20),
   "its events applied in arrival order", versions(killed))
sc.stop()
done()
