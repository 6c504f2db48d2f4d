"""on_dead_letter hold against the real servers: a key whose event is
dead-lettered holds every later event of it ("held behind <event_id>") while
other keys go on; the hold is in the database (a restart still holds it);
`sidecar dlq replay CONSUMER --key K` replays the key's dead letters in
arrival order; an event of the key held while the replay runs, after its
first read of the DLQ, is found when the replay reads on with the key
locked, and replayed among the others (one arriving after the replay named
its copies: test_hold_replay_race, test_hold_hot_key)."""
import json
import os
import subprocess
import tempfile

from harness import *
from ordering_common import applied_versions, held_row as held_of, send_keyed

block = os.path.join(tempfile.mkdtemp(prefix="sc-hold-"), "block")
name = "t-hold-" + suffix()


def consumer(max_attempts):
    return Sidecar(name=name, handler=TEST_HANDLER, env={"SC_TEST_BLOCK_FILE": block},
                   consumer_extra={"workers": 2, "max_attempts": max_attempts,
                                   "retry_delays_ms": [100], "batch_max": 8,
                                   "ordering": {"key": "subject", "partitions": 2}})


def send(sc, events):
    return send_keyed(sc.exchange, events)


def versions(key):
    return applied_versions(name, key)


def held_row(key):
    return held_of(name, key)


def dlq_list(sc):
    rc, out = run_sidecar_cmd(["dlq", "list", name], sc.config)
    return out


key_h, key_o = "h-" + suffix(), "o-" + suffix()
open(block, "w").close()
sc = consumer(max_attempts=3)
ok(sc.start(), "an ordered consumer with on_dead_letter hold (the default)")
first = send(sc, [(key_h, 1, "ORDERED_BLOCKED")])
v1 = next(iter(first))
rest = send(sc, [(key_h, v, "ORDERED") for v in range(2, 6)] +
            [(key_o, v, "ORDERED") for v in range(1, 4)])
ok(wait_until(lambda: queue_depth(sc.dlq) == 5 and len(versions(key_o)) == 3, timeout=60),
   f"the failing event and the 4 behind it dead-lettered, the other key applied "
   f"(dlq {queue_depth(sc.dlq)}, other key {versions(key_o)})")
listing = dlq_list(sc)
ok(listing.count(f"held behind {v1}") == 4 and "attempts exhausted" in listing,
   f"the later events carry the reason 'held behind {v1}'", listing)
ok(versions(key_h) == [] and held_row(key_h) and held_row(key_h)[0] == v1,
   "nothing of the held key applied; consumer_held_key holds it behind its first dead letter",
   held_row(key_h))
sc.stop()

sc = consumer(max_attempts=1000)
ok(sc.start(), "restarted (with more attempts for what comes next)")
late = send(sc, [(key_h, 6, "ORDERED")])
ok(wait_until(lambda: queue_depth(sc.dlq) == 6, timeout=30) and
   dlq_list(sc).count(f"held behind {v1}") == 5,
   "after the restart the key is still held: version 6 dead-lettered behind the same event")

os.unlink(block)  # the cause is fixed; now the replay
# The replay pauses right after it read the DLQ (a fault point): version 7,
# published meanwhile, is held (the key is held) and dead-lettered after the
# replay's first read: the replay must not go on without it.
cfg_path = os.path.join(tempfile.mkdtemp(prefix="sc-hold-"), "c.json")
with open(cfg_path, "w") as f:
    json.dump(sc.config, f)
tool = subprocess.Popen([SIDECAR, "dlq", "replay", name, "--key", key_h, "-c", cfg_path],
                        env=dict(os.environ, SIDECAR_FAULT="dlq.key_browsed",
                                 SIDECAR_FAULT_PAUSE_MS="4000"),
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
first = tool.stdout.readline()
ok("pausing" in first, "the replay read the DLQ and pauses", first)
during = send(sc, [(key_h, 7, "ORDERED")])
v7 = next(iter(during))
ok(wait_until(lambda: (held_row(key_h) or [None] * 4)[2] == 7, timeout=10),
   "version 7, arriving during the replay, is held (not run): the key holds 7 events",
   held_row(key_h))
out = first + tool.communicate(timeout=60)[0]
ok(tool.returncode == 0 and "replayed 7 of 7 held event(s)" in out,
   "the replay, reading on once it holds the key, takes the key's 7 held events, version 7 "
   "among them", out)
ok(wait_until(lambda: len(versions(key_h)) == 7, timeout=60),
   f"the replayed versions applied ({versions(key_h)})")
ok(versions(key_h) == list(range(1, 8)), "in arrival order (x-sidecar-hold-seq)")
ok(wait_until(lambda: held_row(key_h) is None, timeout=10),
   "the last one applied, the key is released", held_row(key_h))
ok(wait_until(lambda: any("released: its replay applied" in l.get("msg", "") for l in sc.lines()),
              timeout=10), "the consumer logs the release")
send(sc, [(key_h, 8, "ORDERED")])
ok(wait_until(lambda: versions(key_h) == list(range(1, 9)), timeout=30),
   "a released key flows again: versions 1..8, each once, in order", versions(key_h))
ok(queue_depth(sc.dlq) == 0, "nothing left in the DLQ")
sc.stop()
done()
