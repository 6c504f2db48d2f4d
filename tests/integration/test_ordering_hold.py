"""on_dead_letter hold against the real servers: a key whose event is
dead-lettered holds every later event of it ("held behind <event_id>") while
other keys go on; the hold is in the database (a restart still holds it);
`sidecar dlq replay CONSUMER --key K` replays the key's dead letters in
arrival order; an event of the key arriving while the replay is in flight is
held too, and keeps the key held until it is replayed in turn."""
import json
import os
import subprocess
import tempfile
import uuid

from harness import *

query("CREATE TABLE IF NOT EXISTS t_order_seen (seq BIGINT AUTO_INCREMENT PRIMARY KEY, "
      "event_id CHAR(36) NOT NULL, subject VARCHAR(100) NOT NULL, version BIGINT NOT NULL, "
      "at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))")
query("GRANT INSERT ON app.t_order_seen TO 'sidecar_consumer'@'%'")
block = os.path.join(tempfile.mkdtemp(prefix="sc-hold-"), "block")
name = "t-hold-" + suffix()


def consumer(max_attempts):
    return Sidecar(name=name, handler=TEST_HANDLER, env={"SC_TEST_BLOCK_FILE": block},
                   consumer_extra={"workers": 2, "max_attempts": max_attempts,
                                   "retry_delays_ms": [100], "batch_max": 8,
                                   "ordering": {"key": "subject", "partitions": 2}})


def send(sc, events):
    """events: [(key, version, type)] -> {event_id: (key, version)}"""
    sent = {}
    conn = amqp()
    ch = conn.channel()
    ch.confirm_delivery()
    for k, v, t in events:
        eid = str(uuid.uuid4())
        sent[eid] = (k, v)
        publish(ch, sc.exchange, t, event_body(eid, etype=t, subject=k, version=v),
                message_id=eid, headers={"x-ordering-key": k})
    conn.close()
    return sent


def versions(key):
    return [r[0] for r in query("SELECT version FROM t_order_seen s JOIN consumed_event c ON "
                                "c.event_id = s.event_id AND c.consumer_name = %s WHERE "
                                "s.subject = %s ORDER BY s.seq", (name, key))]


def held_row(key):
    rows = query("SELECT held_behind, replay_until, held_in_replay FROM consumer_held_key "
                 "WHERE consumer_name = %s AND order_key = %s", (name, key))
    return rows[0] if rows else None


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
# The replay pauses right after it marked the key (a fault point): version 7,
# published meanwhile, meets the replay in flight and is held and noted.
cfg_path = os.path.join(tempfile.mkdtemp(prefix="sc-hold-"), "c.json")
with open(cfg_path, "w") as f:
    json.dump(sc.config, f)
tool = subprocess.Popen([SIDECAR, "dlq", "replay", name, "--key", key_h, "-c", cfg_path],
                        env=dict(os.environ, SIDECAR_FAULT="dlq.key_marked",
                                 SIDECAR_FAULT_PAUSE_MS="4000"),
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
ok(wait_until(lambda: (held_row(key_h) or [None] * 3)[1] == "pending", timeout=10),
   "dlq replay --key marks the key's replay before it reads the DLQ", held_row(key_h))
during = send(sc, [(key_h, 7, "ORDERED")])
v7 = next(iter(during))
ok(wait_until(lambda: (held_row(key_h) or [None] * 3)[2] == v7, timeout=10),
   "version 7, arriving during the replay, is held (not run) and noted", held_row(key_h))
out = tool.communicate(timeout=60)[0]
ok(tool.returncode == 0 and "replayed 7 of 7 dead letter(s)" in out,
   "the replay takes the key's 7 dead letters, version 7 among them", out)
ok(wait_until(lambda: len(versions(key_h)) == 7, timeout=60),
   f"the replayed versions applied ({versions(key_h)})")
ok(versions(key_h) == list(range(1, 8)), "in arrival order (x-sidecar-hold-seq)")
ok(wait_until(lambda: (held_row(key_h) or [None])[0] == v7, timeout=10),
   "after the replay the key stays held behind version 7 (it came during the replay)",
   held_row(key_h))
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", key_h], sc.config)
ok(rc == 0 and "key released" in out and held_row(key_h) is None,
   "a second replay finds nothing of the key left and releases it", out)
send(sc, [(key_h, 8, "ORDERED")])
ok(wait_until(lambda: versions(key_h) == list(range(1, 9)), timeout=30),
   "a released key flows again: versions 1..8, each once, in order", versions(key_h))
ok(queue_depth(sc.dlq) == 0, "nothing left in the DLQ")
sc.stop()
done()
