"""Review reproducer: a held key that keeps receiving events is never freed
by `dlq replay --key`. Every event that reaches the queue before the
replay's last copy is held (dead-lettered) and is a held event the replay
did not take (test_hold_replay_race: by design), and one held after the
replay read the DLQ makes it replay nothing; so the key is free only after
a replay during which no event of it arrived. Here an event of the key
arrives every 5 ms or so (about 140 a second on loopback) while replays are
run back to back for 10 s: about 50 replays run and apply their copies,
none frees the key (and about 100 replay nothing); only stopping the
producer (or dlq release) does. Order is kept throughout."""
import os
import re
import tempfile
import threading
import time
import uuid

from harness import *
from ordering_common import applied_versions, held_row, send_keyed

block = os.path.join(tempfile.mkdtemp(prefix="sc-hhk-"), "block")
name = "t-hhk-" + suffix()
key = "k-" + suffix()

open(block, "w").close()
sc = Sidecar(name=name, handler=TEST_HANDLER, env={"SC_TEST_BLOCK_FILE": block},
             consumer_extra={"workers": 1, "max_attempts": 2, "retry_delays_ms": [100],
                             "batch_max": 8, "ordering": {"key": "subject"}})
ok(sc.start(), "ordered consumer, on_dead_letter hold")
send_keyed(sc.exchange, [(key, 1, "ORDERED_BLOCKED")])
ok(wait_until(lambda: held_row(name, key), timeout=60), "v1 dead-lettered: the key is held")
os.unlink(block)

stop = threading.Event()
sent = []


def producer():
    conn = amqp()
    ch = conn.channel()
    ch.confirm_delivery()
    v = 2
    while not stop.is_set():
        eid = str(uuid.uuid4())
        publish(ch, sc.exchange, "ORDERED", event_body(eid, etype="ORDERED", subject=key,
                                                       version=v),
                message_id=eid, headers={"x-ordering-key": key})
        sent.append(v)
        v += 1
        time.sleep(0.005)
    conn.close()


t = threading.Thread(target=producer)
t.start()
ok(wait_until(lambda: (held_row(name, key) or [0, 0, 0])[2] >= 20, timeout=30),
   "the key's events keep coming and are held behind v1", held_row(name, key))
freed, named, refused = 0, 0, 0
end = time.time() + 10
while time.time() < end:
    rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", key], sc.config)
    if rc == 0 and "held event(s)" in out:
        named += 1
        ids = re.findall(r"^replayed (\S+) \(key", out, re.M)
        # Its copies applied: is the key free now?
        wait_until(lambda: count_in("consumed_event", "event_id", ids,
                                    f"AND consumer_name = '{name}'") == len(ids), timeout=20)
        freed += held_row(name, key) is None
    else:
        refused += 1
stop.set()
t.join()
diag(f"{len(sent)} events sent; replays: {named} named, {refused} replayed nothing; "
     f"key free after {freed}; held now: {held_row(name, key)}")
ok(freed > 0, "a replay frees the key while its events keep coming",
   (named, refused, freed, held_row(name, key)))
# The producer stopped: one more replay frees it, in order.
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", key], sc.config)
ok(wait_until(lambda: held_row(name, key) is None, timeout=30),
   "with the producer stopped, a replay frees the key", (rc, out[:300], held_row(name, key)))
got = applied_versions(name, key)
ok(got == sorted(got) and len(got) == len(sent) + 1, "every version applied once, in order",
   (len(got), len(sent) + 1, [b for a, b in zip(got, got[1:]) if b < a][:5]))
sc.stop()
done()
