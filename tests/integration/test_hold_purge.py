"""Review reproducer: `sidecar purge` against held keys. A held key's
consumer_held_event rows stay after its replay applied every held event
(nothing deletes them but the next replay or dlq release); the key is free
only because each of them has a consumed_event row. Once `sidecar purge`
deletes those rows (past retention), the key is held again behind an event
applied long ago: every new event of the key is dead-lettered, and
`dlq replay --key` has no copy of the held events (the replay acked them off
the DLQ), so only `dlq release --key` frees it."""
import os
import tempfile

from harness import *
from ordering_common import applied_versions, held_row, send_keyed

block = os.path.join(tempfile.mkdtemp(prefix="sc-hpu-"), "block")
name = "t-hpu-" + suffix()
key = "k-" + suffix()


def versions():
    return applied_versions(name, key)


open(block, "w").close()
sc = Sidecar(name=name, handler=TEST_HANDLER, env={"SC_TEST_BLOCK_FILE": block},
             consumer_extra={"workers": 1, "max_attempts": 2, "retry_delays_ms": [100],
                             "batch_max": 8, "ordering": {"key": "subject"}})
ok(sc.start(), "ordered consumer, on_dead_letter hold")
send_keyed(sc.exchange, [(key, 1, "ORDERED_BLOCKED"), (key, 2, "ORDERED")])
ok(wait_until(lambda: queue_depth(sc.dlq) == 2 and held_row(name, key), timeout=60),
   "v1 dead-lettered, v2 held behind it", held_row(name, key))
os.unlink(block)
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", key], sc.config)
ok(rc == 0 and "replayed 2 of 2" in out, "the key replayed", (rc, out))
ok(wait_until(lambda: versions() == [1, 2] and held_row(name, key) is None, timeout=30),
   "v1, v2 applied; the key is free", (versions(), held_row(name, key)))
left = query("SELECT COUNT(*) FROM consumer_held_event WHERE consumer_name = %s AND order_key = %s",
             (name, key))[0][0]
diag(f"consumer_held_event rows of the free key: {left}")

# Time passes: the consumed_event rows of v1, v2 fall past retention.
query("UPDATE consumed_event SET consumed_at = UTC_TIMESTAMP(6) - INTERVAL 40 DAY "
      "WHERE consumer_name = %s", (name,))
rc, out = run_sidecar_cmd(["purge", "--older-than", "30d"], sc.config)
ok("consumed_event: deleted 2 rows" in out,
   "sidecar purge --older-than 30d deletes the 2 consumed_event rows", (rc, out))
ok(held_row(name, key) is None, "the purge leaves the free key free", held_row(name, key))
send_keyed(sc.exchange, [(key, 3, "ORDERED")])
wait_until(lambda: 3 in versions() or queue_depth(sc.dlq) >= 1, timeout=30)
ok(versions() == [1, 2, 3] and queue_depth(sc.dlq) == 0,
   "v3 of the free key is applied, not dead-lettered",
   (versions(), queue_depth(sc.dlq), held_row(name, key)))
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", key], sc.config)
diag(out)
ok(versions() == [1, 2, 3] or rc == 0,
   "if it was held, a replay --key frees it (without dlq release)", (rc, out))
sc.stop()
done()
