"""consumers[].max_message_bytes: a message larger than the bound is
dead-lettered with that reason, body intact, without being parsed, and a
batch stops gathering once its bodies reach the bound, so a queue of large
messages behind a prefetch of 64 costs one large body at a time, not 64.
Checked by the consumer's peak RSS (VmHWM) against the body size."""
import json

from harness import *

BIG, N_BIG, N_SMALL = 20 * 1024 * 1024, 6, 30
LIMIT = 4 * 1024 * 1024
asan = ":".join(x for x in [os.environ.get("ASAN_OPTIONS", ""), "quarantine_size_mb=0",
                            "thread_local_quarantine_size_kb=0"] if x)
sc = Sidecar(consumer_extra={"max_message_bytes": LIMIT, "prefetch": 64, "batch_max": 64})
ok(sc.start(env={"ASAN_OPTIONS": asan}), "consumer started")


def status_kib(field):
    for line in open(f"/proc/{sc.proc.pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return None


before = status_kib("VmHWM")
events = new_events(N_SMALL + N_BIG, start=9100)
small = [e for e, _ in events[:N_SMALL]]
big = [e for e, _ in events[N_SMALL:]]
conn = amqp()
ch = conn.channel()
ch.confirm_delivery()
pad = "x" * BIG
for i, (eid, subject) in enumerate(events[:N_SMALL]):
    publish(ch, sc.exchange, "ORDER_ACCEPTED", event_body(eid, subject=subject), message_id=eid)
    if i % 5 == 0 and big:
        b = big[i // 5 % N_BIG] if i // 5 < N_BIG else None
        if b:
            publish(ch, sc.exchange, "ORDER_ACCEPTED",
                    event_body(b, subject="1", data={"pad": pad}), message_id=b)
conn.close()
ok(wait_until(lambda: count_in("notification_job", "event_id", small) == N_SMALL, timeout=120),
   f"all {N_SMALL} small events applied")
ok(wait_until(lambda: queue_depth(sc.dlq) == N_BIG, timeout=120), f"the {N_BIG} large ones dead-lettered")
is_eq(count_in("consumed_event", "event_id", big, f"AND consumer_name = '{sc.name}'"), 0,
      "no large event was claimed")
after = status_kib("VmHWM")
diag(f"peak RSS {before / 1024:.1f} MiB before, {after / 1024:.1f} MiB after {N_BIG} bodies of "
     f"{BIG // (1024 * 1024)} MiB behind a prefetch of 64")
ok(after - before <= 2.5 * BIG / 1024,
   f"peak RSS grew {(after - before) / 1024:.1f} MiB: at most 2.5 large bodies at a time "
   f"({2.5 * BIG / 1024 / 1024:.0f} MiB)")
got = drain(sc.dlq)
reasons = [(p.headers or {}).get("x-sidecar-reason", b"") for p, _ in got]
reasons = [r.decode() if isinstance(r, bytes) else str(r) for r in reasons]
ok(all(f"larger than max_message_bytes {LIMIT}" in r for r in reasons) and len(reasons) == N_BIG,
   "each dead letter says it is larger than max_message_bytes", detail=reasons[:2])
ok(all(len(b) > BIG for _, b in got) and
   sorted(json.loads(b)["id"] for _, b in got) == sorted(big),
   "the dead letters keep their bodies, whole")
lines = [l for l in sc.lines() if "larger than max_message_bytes" in l.get("msg", "")]
ok(len([l for l in lines if l.get("outcome") == "dead_lettered"]) == N_BIG,
   "one dead_lettered outcome line per large message")
is_eq(sc.stop(), 0, "clean stop")
done()
