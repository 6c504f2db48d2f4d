"""`sidecar dlq replay --key K` when its browse of the DLQ does not see all of
the key's dead letters: here another client (a concurrent `dlq list`, a
second `replay --key`) holds them unacked. Before the fix the replay
released the key, and the next event of K was applied before its dead
letters. Now: nothing replayed, the key stays held, the command says why and
exits 1; run again once the DLQ is whole, it replays everything in arrival
order (the event held meanwhile too) and the key flows again. A key whose
dead letter is gone from the DLQ for good is freed by `dlq release --key`."""
import os
import tempfile

from harness import *
from ordering_common import applied_versions, held_row, send_keyed, hold_consumer

block = os.path.join(tempfile.mkdtemp(prefix="sc-hrb-"), "block")
name = "t-hrb-" + suffix()
key, gone = "k-" + suffix(), "g-" + suffix()


def versions(k):
    return applied_versions(name, k)


open(block, "w").close()
sc = hold_consumer(name, block)
ok(sc.start(), "ordered consumer, on_dead_letter hold")
send_keyed(sc.exchange, [(key, 1, "ORDERED_BLOCKED"), (key, 2, "ORDERED"), (key, 3, "ORDERED"),
                         (gone, 1, "ORDERED_BLOCKED")])
ok(wait_until(lambda: queue_depth(sc.dlq) == 4 and held_row(name, key) and held_row(name, gone),
              timeout=60),
   "v1 dead-lettered, v2 and v3 held behind it; the other key's v1 dead-lettered",
   (held_row(name, key), held_row(name, gone)))
os.unlink(block)

# Another DLQ client holds the dead letters unacked (what `dlq list` or a
# second `replay --key` does while it browses).
other = amqp()
och = other.channel()
got = 0
for _ in range(4):
    m, _, _ = och.basic_get(sc.dlq, auto_ack=False)
    got += m is not None
ok(got == 4, "a concurrent DLQ browser holds the 4 dead letters")
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", key], sc.config)
diag(out)
other.close()  # the dead letters go back to the DLQ
ok(rc == 1 and "Nothing replayed" in out and "another client" in out,
   "the replay refuses a browse that did not reach the key's highest hold number, saying why",
   (rc, out))
ok(wait_until(lambda: queue_depth(sc.dlq) == 4, timeout=10), "the 4 dead letters are back in the DLQ")
row = held_row(name, key)
ok(row is not None and row[1] is None and row[2] == 3,
   "the key is still held (3 events), no replay named", row)
send_keyed(sc.exchange, [(key, 4, "ORDERED")])
ok(wait_until(lambda: queue_depth(sc.dlq) == 5, timeout=20) and versions(key) == [],
   "v4 is not applied before v1..v3: it is held", (versions(key), queue_depth(sc.dlq)))

# The DLQ whole again: the same command replays all four, in arrival order.
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", key], sc.config)
ok(rc == 0 and "replayed 4 of 4 held event(s)" in out, "run again, the replay takes v1..v4", out)
ok(wait_until(lambda: versions(key) == [1, 2, 3, 4], timeout=30), "applied in arrival order",
   versions(key))
ok(wait_until(lambda: held_row(name, key) is None, timeout=10), "and the key is released",
   held_row(name, key))
send_keyed(sc.exchange, [(key, 5, "ORDERED")])
ok(wait_until(lambda: versions(key) == [1, 2, 3, 4, 5], timeout=20), "v5 flows", versions(key))

# A dead letter removed from the DLQ (taken and acked by someone): no replay
# can prove the key complete; `dlq release` frees it on purpose.
taker = amqp()
tch = taker.channel()
m, _, _ = tch.basic_get(sc.dlq, auto_ack=True)
taker.close()
ok(m is not None and queue_depth(sc.dlq) == 0, "the other key's dead letter is taken off the DLQ")
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", gone], sc.config)
ok(rc == 1 and "gone from the DLQ" in out and f"dlq release {name} --key {gone}" in out,
   "the replay finds none of its dead letters and points at dlq release", (rc, out))
ok(held_row(name, gone) is not None, "the key stays held")
rc, out = run_sidecar_cmd(["dlq", "release", name, "--key", gone], sc.config)
ok(rc == 0 and "released key" in out and held_row(name, gone) is None, "dlq release frees it",
   (rc, out))
rc, out = run_sidecar_cmd(["dlq", "release", name, "--key", gone], sc.config)
ok(rc == 0 and "not held" in out, "a second release says the key is not held", out)
send_keyed(sc.exchange, [(gone, 2, "ORDERED")])
ok(wait_until(lambda: versions(gone) == [2], timeout=20), "its next event runs", versions(gone))
# A new hold of the released key numbers on from where it stopped.
open(block, "w").close()
send_keyed(sc.exchange, [(gone, 3, "ORDERED_BLOCKED")])
ok(wait_until(lambda: held_row(name, gone) is not None, timeout=60), "held again")
is_eq(held_row(name, gone)[3], 2, "its hold numbers go on (2), never restarting at 1")
os.unlink(block)
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", gone], sc.config)
ok(rc == 0 and "replayed 1 of 1" in out, "and its replay is complete with the one dead letter", out)
ok(wait_until(lambda: versions(gone) == [2, 3] and held_row(name, gone) is None, timeout=30),
   "applied, released", (versions(gone), held_row(name, gone)))
rc, out = run_sidecar_cmd(["dlq", "release", name, "--key", "x"], {**sc.config, "consumers": [
    dict(sc.config["consumers"][0], ordering={"key": "subject", "on_dead_letter": "skip"})]})
ok(rc == 2 and "does not hold keys" in out, "release on a consumer that does not hold keys: usage error",
   (rc, out))
sc.stop()
done()
