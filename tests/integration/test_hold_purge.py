"""`sidecar purge` against held keys. (Found by review: the held events'
rows stayed after the key's replay applied them, the key free only because
each had a consumed_event row; once purge deleted those rows past
retention, the key was held again behind an event applied long ago.) Now
the consumer forgets a key's applied held events when its replay frees it,
and purge keeps the consumed_event rows of held events it still has."""
import os
import tempfile

from harness import *
from ordering_common import applied_versions, held_row, send_keyed, hold_consumer

block = os.path.join(tempfile.mkdtemp(prefix="sc-hpu-"), "block")
name = "t-hpu-" + suffix()
key = "k-" + suffix()


def versions():
    return applied_versions(name, key)


open(block, "w").close()
sc = hold_consumer(name, block)
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
# (v1 and v2 no longer show as applied: their consumed_event rows are gone.)
ok(versions() == [3] and queue_depth(sc.dlq) == 0 and held_row(name, key) is None,
   "v3 of the free key is applied, not dead-lettered",
   (versions(), queue_depth(sc.dlq), held_row(name, key)))
# A held event applied whose row was not forgotten (the consumer's tidy-up
# failed): purge keeps its consumed_event row, so it never holds again.
query("INSERT INTO consumer_held_event (consumer_name, order_key, event_id, hold_seq, held_at) "
      "SELECT consumer_name, %s, event_id, 99, UTC_TIMESTAMP(6) FROM consumed_event "
      "WHERE consumer_name = %s", (key, name))
query("UPDATE consumed_event SET consumed_at = UTC_TIMESTAMP(6) - INTERVAL 40 DAY "
      "WHERE consumer_name = %s", (name,))
rc, out = run_sidecar_cmd(["purge", "--older-than", "30d"], sc.config)
ok("consumed_event: deleted 0 rows" in out and held_row(name, key) is None,
   "purge keeps the consumed_event row of a held event: the key stays free", (rc, out))
sc.stop()
# The database outlives this test: leave no aged row for another test's purge to count.
query("DELETE FROM consumer_held_event WHERE consumer_name = %s", (name,))
query("DELETE FROM consumer_held_key WHERE consumer_name = %s", (name,))
query("DELETE FROM consumed_event WHERE consumer_name = %s", (name,))
ok(query("SELECT COUNT(*) FROM consumed_event WHERE consumer_name = %s", (name,))[0][0] == 0,
   "its rows removed")
done()
