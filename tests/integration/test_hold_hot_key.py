"""A held key that keeps receiving events is freed by one `dlq replay --key`,
at the rates docs/contract.md states, measured here first:

  a   the time the consumer takes per event of one free key (one per batch);
  c   the time per event of a held key with no replay in flight (a held
      read, a hold transaction, a confirmed publish to the DLQ, an ack):
      what an arrival costs that cannot wait in hand for the replay;
  ar  the time per replayed copy (a plus the key's tidy-up).

Below the bound (one event every 2 (c + ar): half the rate the consumer
keeps up with even if every arrival had to be held; 50 held events and
more, more than the 20 rounds a copy may go): the arrivals during the
replay wait in hand, the replay's copies go past them, and the key is freed
while the producer still sends. Above it (600 events queued at once in front of the replay's copies,
more than the prefetch holds): those that find the prefetch full are held
and sent behind the replay, each costing c before it is applied, and the key
is freed once they are worked off. Both ways every version is applied once,
in order, and nothing of the key is left in the DLQ. Every wait is on a
condition, with generous timeouts; the producer's pace is a rate, not a
synchronisation. (Found by review: with a producer one event every ~5 ms on
a loaded machine the key was never freed, 927 arrivals going round behind
the replay, because every arrival went round until the one before it was
applied; and a replay of more than 20 held events while new ones arrived
left the key held, copies coming round before theirs used up their 20
rounds.)"""
import datetime
import os
import re
import tempfile
import threading
import time
import uuid

from harness import *
from ordering_common import applied_versions, held_row, send_keyed, hold_consumer

block = os.path.join(tempfile.mkdtemp(prefix="sc-hhk-"), "block")
name = "t-hhk-" + suffix()
sc = hold_consumer(name, block)
ok(sc.start(), "ordered consumer, on_dead_letter hold")


def at(line):
    return datetime.datetime.fromisoformat(line["time"].replace("Z", "+00:00")).timestamp()


def per_event(outcome, ids):
    """Seconds between the first and the last of these events' outcome
    lines, per event: the consumer's pace when they wait in the queue."""
    ts = sorted(at(l) for l in sc.lines() if l.get("outcome") == outcome
                and l.get("event_id") in ids)
    return (ts[-1] - ts[0]) / (len(ts) - 1) if len(ts) > 1 else None


def hold(key, n):
    """The key held: v1 fails, v2..vn are held behind it."""
    open(block, "w").close()
    before = queue_depth(sc.dlq)
    send_keyed(sc.exchange, [(key, 1, "ORDERED_BLOCKED")] + [(key, v, "ORDERED")
                                                           for v in range(2, n + 1)])
    ok(wait_until(lambda: queue_depth(sc.dlq) == before + n and
                  (held_row(name, key) or [0, 0, 0])[2] == n, timeout=120),
       f"key {key}: v1 dead-lettered, {n - 1} held behind it", held_row(name, key))
    os.unlink(block)


def in_order(key, want):
    got = applied_versions(name, key)
    ok(got == list(range(1, want + 1)), f"key {key}: every version 1..{want} applied once, in order",
       (len(got), want, [b for a, b in zip(got, got[1:]) if b != a + 1][:5]))


def key_dead_letters(key):
    conn = amqp()
    ch = conn.channel()
    n = 0
    while True:
        m, p, b = ch.basic_get(sc.dlq, auto_ack=False)
        if m is None:
            break
        n += key.encode() in b
    conn.close()
    return n


# a: 100 events of a free key queued while the consumer is stopped.
k0 = "a-" + suffix()
sc.stop()
ids = set(send_keyed(sc.exchange, [(k0, v, "ORDERED") for v in range(1, 101)]))
ok(sc.start(), "restarted with 100 events of a free key queued")
ok(wait_until(lambda: len(applied_versions(name, k0)) == 100, timeout=120), "all 100 applied")
a = per_event("applied", ids)
# c: 100 events of a held key (no replay) queued while the consumer is stopped.
k1 = "c-" + suffix()
hold(k1, 1)
sc.stop()
ids = set(send_keyed(sc.exchange, [(k1, v, "ORDERED") for v in range(2, 102)]))
ok(sc.start(), "restarted with 100 events of a held key queued")
ok(wait_until(lambda: queue_depth(sc.dlq) == 101, timeout=120), "all 100 held in the DLQ")
c = per_event("dead_lettered", ids)
# ar: their 101 copies, replayed at once.
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", k1], sc.config, timeout=120)
ok(rc == 0 and "replayed 101 of 101" in out, "their replay", (rc, out[-300:]))
ok(wait_until(lambda: held_row(name, k1) is None and queue_depth(sc.dlq) == 0, timeout=120),
   "the key freed, the DLQ empty", held_row(name, k1))
ar = per_event("applied", ids)
diag(f"measured: a = {a * 1000:.2f} ms an event of a free key (at most {1 / a:.0f}/s), "
     f"c = {c * 1000:.2f} ms an arrival held without waiting, ar = {ar * 1000:.2f} ms a replayed "
     f"copy: one replay frees a key whatever happens below 1/(c + ar) = {1 / (c + ar):.0f}/s")

# Below the bound: one event every 2 (c + ar) while 50 held events (and
# those held before the replay is named) are replayed.
k2 = "b-" + suffix()
hold(k2, 50)
interval = 2 * (c + ar)
stop = threading.Event()
sent = []


def producer():
    conn = amqp()
    ch = conn.channel()
    ch.confirm_delivery()
    v, due = 51, time.monotonic()
    while not stop.is_set():
        eid = str(uuid.uuid4())
        publish(ch, sc.exchange, "ORDERED", event_body(eid, etype="ORDERED", subject=k2, version=v),
                message_id=eid, headers={"x-ordering-key": k2})
        sent.append((time.time(), eid))
        v += 1
        due += interval
        time.sleep(max(0.0, due - time.monotonic()))
    conn.close()


t = threading.Thread(target=producer)
t.start()
ok(wait_until(lambda: len(sent) >= 10, timeout=60), "the key's events keep coming")
named_at = time.time()
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", k2], sc.config, timeout=120)
m = re.search(r"replayed (\d+) of (\d+) held event\(s\)", out)
ok(rc == 0 and m and m.group(1) == m.group(2) and int(m.group(1)) >= 50,
   f"one replay of its {m.group(1) if m else '?'} held events", (rc, out[-300:]))
freed = wait_until(lambda: held_row(name, k2) is None, timeout=120, step=0.05)
freed_at = time.time()
running = t.is_alive() and not stop.is_set()
stop.set()
t.join()
# What arrived after the replay read its held events and before the key
# was free: it waited in hand (unless it had to be sent behind).
replayed = int(m.group(1)) if m else 0
during = sum(1 for i, (ts, _) in enumerate(sent) if 51 + i > replayed and ts <= freed_at)
behind = sum(1 for l in sc.lines() if l.get("outcome") == "held"
             and l.get("event_id") in {e for _, e in sent})
diag(f"below: one event every {interval * 1000:.1f} ms, {len(sent)} sent; the replay took "
     f"{replayed} held events, {during} more arrived until the key was free "
     f"({freed_at - named_at:.1f} s after the command started): {during - behind} waited in "
     f"hand, {behind} sent behind")
ok(freed and running, "one replay frees the key while its events keep coming",
   (freed, running, during))
ok(wait_until(lambda: len(applied_versions(name, k2)) == 50 + len(sent), timeout=120),
   "every version applied", (len(applied_versions(name, k2)), 50 + len(sent)))
in_order(k2, 50 + len(sent))
is_eq(key_dead_letters(k2), 0, "nothing of the key left in the DLQ")

# Above the bound: 600 events queued in front of the replay's copies.
k3 = "o-" + suffix()
hold(k3, 20)
sc.stop()
send_keyed(sc.exchange, [(k3, v, "ORDERED") for v in range(21, 621)])
rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", k3], sc.config, timeout=120)
ok(rc == 0 and "replayed 20 of 20 held event(s)" in out, "a replay of its 20 held events named, "
   "its copies behind 600 more of the key's events", (rc, out[-300:]))
start = time.time()
ok(sc.start(), "consumer restarted")
limit = min(150, 60 + 5 * 620 * (c + ar))
ok(wait_until(lambda: held_row(name, k3) is None, timeout=limit, step=0.05),
   f"the key is freed once they are worked off (within {limit:.0f} s)", held_row(name, k3))
took = time.time() - start
behind = len(sc.outcomes("held", run=len(sc.log_paths)))
diag(f"above: 600 queued at once, {behind} sent behind the replay; freed after {took:.1f} s "
     f"(600 c + 620 ar = {600 * c + 620 * ar:.1f} s)")
ok(wait_until(lambda: len(applied_versions(name, k3)) == 620, timeout=120),
   "every version applied", len(applied_versions(name, k3)))
in_order(k3, 620)
is_eq(key_dead_letters(k3), 0, "nothing of the key left in the DLQ")
sc.stop()
done()
