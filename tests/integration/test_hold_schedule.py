"""Held keys under a seeded random schedule against the real servers: three
keys of an ordered consumer (on_dead_letter hold, partitions 2, workers 2)
get versions in order, some of them failing while a block file exists (the
key is then held); between them, at random, the block comes and goes, the
consumer restarts, and `sidecar dlq replay --key` runs — plain, killed after
its DLQ read, killed after naming its replay, or with another client holding
the DLQ's messages. After every step each event is applied or held; per key,
what is applied is in version order and never twice. At the end the block
goes, each held key is replayed until none is held, and every version of
every key is applied exactly once, in order. SC_SEED repeats a schedule."""
import json
import os
import random
import subprocess
import tempfile

from harness import *
from ordering_common import held_row, send_keyed, seen

seed = int(os.environ.get("SC_SEED", random.randrange(1 << 30)))
rng = random.Random(seed)
diag(f"seed {seed} (SC_SEED={seed} repeats it)")
STEPS = int(os.environ.get("SC_HOLD_STEPS", "40"))

block = os.path.join(tempfile.mkdtemp(prefix="sc-hs-"), "block")
name = "t-hs-" + suffix()
keys = [f"k{i}-" + suffix() for i in range(3)]
sent = {}         # event_id -> (key, version)
next_v = {k: 1 for k in keys}


QUEUE_TYPE = os.environ.get("SC_QUEUE_TYPE", rng.choice(["classic", "quorum"]))
diag(f"queue type {QUEUE_TYPE}")


def consumer():
    return Sidecar(name=name, handler=TEST_HANDLER, env={"SC_TEST_BLOCK_FILE": block},
                   consumer_extra={"workers": 2, "max_attempts": 2, "retry_delays_ms": [50],
                                   "batch_max": 8, "queue_type": QUEUE_TYPE,
                                   "ordering": {"key": "subject", "partitions": 2}})


def applied_ids():
    return {r[1] for r in seen(sent, columns="seq, event_id")} if sent else set()


def held_ids():
    rows = query("SELECT e.event_id FROM consumer_held_event e WHERE e.consumer_name = %s AND NOT "
                 "EXISTS (SELECT 1 FROM consumed_event c WHERE c.consumer_name = e.consumer_name "
                 "AND c.event_id = e.event_id)", (name,))
    return {r[0] for r in rows}


def settled():
    """Every event sent is applied or held, and nothing of the stream is in
    flight (the queues' ready messages drained)."""
    a, h = applied_ids(), held_ids()
    return all(e in a or e in h for e in sent)


def order_problems():
    rows = seen(sent, columns="seq, event_id, subject, version")
    per_key, count, bad = {}, {}, []
    for _, eid, k, v in rows:
        per_key.setdefault(k, []).append(v)
        count[eid] = count.get(eid, 0) + 1
    for k, vs in per_key.items():
        if vs != sorted(vs):
            bad.append(f"{k}: applied out of order {vs}")
    bad += [f"{e} applied {n} times" for e, n in count.items() if n > 1]
    return bad


def replay(key, how):
    env = {}
    holder = None
    if how in ("browsed", "named"):
        env = {"SIDECAR_FAULT": f"dlq.key_{how}"}
    if how == "contended":
        holder = amqp()
        ch = holder.channel()
        for _ in range(rng.randrange(1, 4)):
            ch.basic_get(sc.dlq, auto_ack=False)
    rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", key], sc.config, env=env)
    if holder:
        holder.close()
    return rc, out


sc = consumer()
ok(sc.start(), "ordered consumer (hold, partitions 2, workers 2)")
open(block, "w").close()  # the schedule starts with a failing handler
problems, steps_told, replays = [], [], {}
for step in range(STEPS):
    r = rng.random() if step else 0.0  # the first step holds a key
    if r < 0.45:
        k = rng.choice(keys)
        t = "ORDERED_BLOCKED" if step == 0 or rng.random() < 0.4 else "ORDERED"
        sent.update(send_keyed(sc.exchange, [(k, next_v[k], t)]))
        what = f"send {k} v{next_v[k]} {t}"
        next_v[k] += 1
    elif r < 0.55:
        if os.path.exists(block):
            os.unlink(block)
            what = "unblock"
        else:
            open(block, "w").close()
            what = "block"
    elif r < 0.62:
        sc.stop()
        ok_start = sc.start()
        what = f"restart ({'ok' if ok_start else 'FAILED'})"
        if not ok_start:
            problems.append("the consumer did not restart")
    elif r < 0.72:
        # A replay while events of the key keep coming.
        k = rng.choice(keys)
        cfg_path = os.path.join(sc.dir, "replay.json")
        with open(cfg_path, "w") as f:
            json.dump(sc.config, f)
        tool = subprocess.Popen([SIDECAR, "dlq", "replay", name, "--key", k, "-c", cfg_path],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        n = rng.randrange(2, 6)
        for _ in range(n):
            sent.update(send_keyed(sc.exchange, [(k, next_v[k], "ORDERED")]))
            next_v[k] += 1
        rc = tool.wait(timeout=60)
        what = f"replay {k} while {n} of its events arrive: rc {rc}"
        replays[("concurrent", rc)] = replays.get(("concurrent", rc), 0) + 1
    else:
        k = rng.choice(keys)
        how = rng.choice(["plain", "plain", "browsed", "named", "contended"])
        rc, out = replay(k, how)
        what = f"replay {k} ({how}): rc {rc}"
        replays[(how, rc)] = replays.get((how, rc), 0) + 1
    if not wait_until(settled, timeout=30, step=0.05):
        problems.append(f"step {step} ({what}): not settled: "
                        f"{len(set(sent) - applied_ids() - held_ids())} events neither applied nor held")
    problems += [f"step {step} ({what}): {p}" for p in order_problems()]
    steps_told.append(what)
    if problems:
        break
diag("; ".join(steps_told))
diag(f"replays (how, exit status): {replays}")
ok(not problems, f"after each of {len(steps_told)} steps every event applied or held, per key in "
   f"order, none twice", problems[:10])

# The end: the cause fixed, every held key replayed until none is held.
if os.path.exists(block):
    os.unlink(block)
final = 0
for _ in range(10):
    held_keys = [k for k in keys if held_row(name, k)]
    if not held_keys:
        break
    for k in held_keys:
        rc, out = run_sidecar_cmd(["dlq", "replay", name, "--key", k], sc.config)
        final += rc == 0
    wait_until(lambda: settled() and not any(held_row(name, k) for k in keys), timeout=30, step=0.05)
done_ok = final + sum(n for (how, rc), n in replays.items() if rc == 0)
ok(not any(held_row(name, k) for k in keys) and done_ok > 0,
   f"in the end no key is held ({done_ok} replay(s) that replayed held events)",
   [held_row(name, k) for k in keys])
rows = seen(sent, columns="seq, event_id, subject, version")
per_key = {}
for _, _, k, v in rows:
    per_key.setdefault(k, []).append(v)
want = {k: list(range(1, next_v[k])) for k in keys if next_v[k] > 1}
ok(per_key == want and not order_problems(),
   f"every version of every key applied once, in order ({len(sent)} events, seed {seed})",
   (per_key, want, order_problems()))
sc.stop()
done()
