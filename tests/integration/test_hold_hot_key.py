"""A held key that keeps receiving events (one every 5 ms or so) is freed by
one `dlq replay --key`. (Found by review: the first form of the replay held
every event arriving before its last copy was applied, and replayed nothing
when one arrived after its DLQ read, so such a key was never freed.) Now
the replay reads on with the key locked, and the consumer sends what
arrives while the replay is in flight to the end of the stream behind its
copies, with its token: it runs after them, as part of the replay. Order is
kept throughout; every version applied once."""
import os
import tempfile
import threading
import time
import uuid

from harness import *
from ordering_common import applied_versions, held_row, send_keyed, hold_consumer

block = os.path.join(tempfile.mkdtemp(prefix="sc-hhk-"), "block")
name = "t-hhk-" + suffix()
key = "k-" + suffix()

open(block, "w").close()
sc = hold_consumer(name, block)
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
named, refused, freed = 0, 0, False
end = time.time() + 20
while time.time() < end and not named:
    rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", key], sc.config)
    named += rc == 0 and "held event(s)" in out
    refused += not (rc == 0 and "held event(s)" in out)
# What arrives while the replay is in flight goes behind its copies: the key
# is freed although its events keep coming.
freed = wait_until(lambda: held_row(name, key) is None, timeout=15, step=0.05)
behind = sum(1 for l in sc.lines() if l.get("outcome") == "held")
stop.set()
t.join()
diag(f"{len(sent)} events sent; replays: {named} named, {refused} replayed nothing; "
     f"{behind} arrivals sent behind the replay; key free: {freed}")
ok(named == 1 and freed and behind > 0,
   "one replay frees the key while its events keep coming (the arrivals during it go behind "
   "its copies)", (named, refused, freed, behind, held_row(name, key)))
# The producer stopped: everything it sent is applied, once, in order.
ok(wait_until(lambda: len(applied_versions(name, key)) >= len(sent) + 1, timeout=60),
   "every version applied", (len(applied_versions(name, key)), len(sent) + 1))
got = applied_versions(name, key)
ok(got == sorted(got) and len(got) == len(sent) + 1, "every version applied once, in order",
   (len(got), len(sent) + 1, [b for a, b in zip(got, got[1:]) if b < a][:5]))
sc.stop()
done()
