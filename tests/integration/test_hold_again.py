"""A key held, replayed, freed, then held again: its later events are
dead-lettered as held behind the new first dead letter (not sent round
behind a replay: none is in flight) until the next replay frees it. (The
replay token once outlived the replay that freed the key: at the key's next
hold every later event of it went round the queue 20 times as "held while
its key's replay is in flight", each round a held read, a hold transaction
and a confirmed publish, before it reached the DLQ.) The token is cleared in
the transaction that frees the key; a hold of a key with nothing held clears
one left behind (a consumer that died between the last replayed event's
COMMIT and its tidy-up)."""
import os
import tempfile
import uuid

from harness import *
from ordering_common import applied_versions, held_row, send_keyed, hold_consumer

block = os.path.join(tempfile.mkdtemp(prefix="sc-hag-"), "block")
name = "t-hag-" + suffix()
key = "k-" + suffix()


def versions():
    return applied_versions(name, key)


def token():
    rows = query("SELECT replay_token FROM consumer_held_key WHERE consumer_name = %s AND "
                 "order_key = %s", (name, key))
    return rows[0][0] if rows else "no row"


def went_round(ids):
    return [l for l in sc.lines() if l.get("outcome") == "held" and l.get("event_id") in ids]


def held_again(first, later, label):
    """first fails (the block is there) and holds the key; later arrive
    behind it: each dead-lettered as held, none sent round."""
    before = queue_depth(sc.dlq)
    open(block, "w").close()
    sent = send_keyed(sc.exchange, [(key, first, "ORDERED_BLOCKED")] +
                      [(key, v, "ORDERED") for v in later])
    ids = {v: e for e, (_, v) in sent.items()}
    ok(wait_until(lambda: queue_depth(sc.dlq) == before + 1 + len(later), timeout=60),
       f"{label}: v{first} dead-lettered, v{later} dead-lettered behind it",
       (queue_depth(sc.dlq), held_row(name, key)))
    os.unlink(block)
    row = held_row(name, key)
    ok(row is not None and row[0] == ids[first] and row[1] is None and row[2] == 1 + len(later),
       f"{label}: the key held behind v{first}, no replay named", row)
    rounds = went_round({ids[v] for v in later})
    ok(not rounds, f"{label}: none of v{later} sent round behind a replay (none is in flight)",
       [(l["event_id"], l.get("msg", "")[:80]) for l in rounds[:3]])
    reasons = [l.get("msg", "") for l in sc.outcomes("dead_lettered")
               if l.get("event_id") in {ids[v] for v in later}]
    ok(len(reasons) == len(later) and all(f"held behind {ids[first]}" in r for r in reasons),
       f"{label}: each logged dead-lettered, held behind v{first}", reasons)
    return ids


def replay_frees(want, label):
    rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", key], sc.config)
    ok(rc == 0, f"{label}: replay --key", (rc, out))
    ok(wait_until(lambda: versions() == want and held_row(name, key) is None, timeout=60),
       f"{label}: applied in order, the key free", (versions(), held_row(name, key)))
    is_eq(token(), None, f"{label}: the freed key has no replay token")


sc = hold_consumer(name, block)
ok(sc.start(), "ordered consumer, on_dead_letter hold")
held_again(1, [2], "first hold")
replay_frees([1, 2], "first replay")
held_again(3, [4, 5], "held again after its replay freed it")
replay_frees([1, 2, 3, 4, 5], "second replay")

# A consumer that died between the last replayed COMMIT and its tidy-up
# leaves the token on a free key: the next hold clears it.
fake = str(uuid.uuid4())
query("UPDATE consumer_held_key SET replay_token = %s WHERE consumer_name = %s AND order_key = %s",
      (fake, name, key))
held_again(6, [7], "held with a token left over")
replay_frees([1, 2, 3, 4, 5, 6, 7], "third replay")
sc.stop()
done()
