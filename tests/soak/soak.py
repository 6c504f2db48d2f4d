#!/usr/bin/python3
"""Bounded soak: steady load with repeats for SOAK_SECONDS while the broker
is restarted (at 1/5) and the database is restarted (at 2/5). Passes when
nothing was lost, no effect happened twice, the sidecar never exited, and
its RSS at the end is within 10% of the middle. Both restarts come before
the middle, so the comparison measures growth under steady load (a leak),
not the one-time step of reconnecting (new connection buffers). Prints TAP."""
import os
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import *  # noqa: E402,F403

SECONDS = float(os.environ.get("SOAK_SECONDS", "180"))
RATE = float(os.environ.get("SOAK_RATE", "200"))
SERVERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "servers")
DIR = os.environ["SC_TEST_DIR"]

sc = Sidecar(consumer_extra={"workers": 2, "prefetch": 256, "batch_max": 64,
                             "max_attempts": 20, "retry_delays_ms": [500, 2000]})
ok(sc.start(), "sidecar started")
pid = sc.proc.pid
conn = amqp()
conn.channel().exchange_declare(sc.exchange, "topic", durable=True)
conn.close()

confirmed = []          # event ids the broker confirmed (some twice: repeats)
stop = threading.Event()


def publisher():
    """Publishes at RATE with confirms; across a broker restart it reconnects
    and publishes again what was not confirmed (same ids)."""
    pending = None
    n = 0
    t0 = time.time()
    while not stop.is_set():
        try:
            c = amqp()
            ch = c.channel()
            ch.confirm_delivery()
            while not stop.is_set():
                if pending is None:
                    if n % 10 == 9 and confirmed:
                        pending = confirmed[len(confirmed) // 2]  # a repeat
                    else:
                        pending = str(uuid.uuid4())
                    n += 1
                publish(ch, sc.exchange, "ORDER_ACCEPTED", event_body(pending, subject=str(n)), message_id=pending)
                confirmed.append(pending)
                pending = None
                wait = t0 + n / RATE - time.time()
                if wait > 0:
                    time.sleep(wait)
            c.close()
        except Exception:
            time.sleep(0.5)  # broker away: the unconfirmed event is published again


rss = []


def rss_kib():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None


t = threading.Thread(target=publisher)
t.start()
start = time.time()
restarted = {"broker": None, "database": None}
while time.time() - start < SECONDS:
    el = time.time() - start
    if restarted["broker"] is None and el > SECONDS / 5:
        r = subprocess.run([SERVERS, "restart-rabbit", DIR], capture_output=True, text=True)
        restarted["broker"] = r.returncode
        diag(f"broker restarted at {el:.0f}s (rc {r.returncode})")
    if restarted["database"] is None and el > 2 * SECONDS / 5:
        r = subprocess.run([SERVERS, "restart-mysql", DIR], capture_output=True, text=True)
        restarted["database"] = r.returncode
        diag(f"database restarted at {el:.0f}s (rc {r.returncode})")
    if sc.alive():
        rss.append((time.time() - start, rss_kib()))
    time.sleep(1)
stop.set()
t.join()
is_eq(restarted, {"broker": 0, "database": 0}, "the broker and the database were both restarted mid-run")
unique = sorted(set(confirmed))
diag(f"{len(confirmed)} confirmed publishes, {len(unique)} distinct events")
wait_until(lambda: count_in("consumed_event", "event_id", unique, f"AND consumer_name = '{sc.name}'") >= len(unique)
           and queue_depth(sc.queue) == 0, timeout=120)
ok(sc.alive(), "the sidecar never exited")
is_eq(count_in("consumed_event", "event_id", unique, f"AND consumer_name = '{sc.name}'"), len(unique),
      "nothing lost: every confirmed event consumed")
is_eq(count_in("notification_job", "event_id", unique), len(unique), "one effect per event")
applied = [l["event_id"] for l in sc.outcomes("applied")]
is_eq(len(applied), len(set(applied)), "no event applied twice")
ok(len(sc.outcomes("duplicate")) >= len(confirmed) - len(unique), f"repeats recognised ({len(sc.outcomes('duplicate'))})")
mid = [r for tm, r in rss if SECONDS * 0.45 <= tm <= SECONDS * 0.55]
end = [r for tm, r in rss if tm >= SECONDS * 0.9]
m, e = max(mid), max(end)
diag(f"RSS middle {m} KiB, end {e} KiB, peak {max(r for _, r in rss)} KiB")
ok(e <= m * 1.10, f"memory flat: RSS at the end ({e} KiB) within 10% of the middle ({m} KiB)")
is_eq(sc.stop(), 0, "clean stop")
done()
