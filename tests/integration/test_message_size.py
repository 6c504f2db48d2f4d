"""consumers[].max_message_bytes: a message larger than the bound is
dead-lettered with that reason, body intact, without being parsed, and a
batch stops gathering once its bodies reach the bound, so a queue of large
messages behind a prefetch of 64 costs one large body at a time, not 64.
Checked by the consumer's peak RSS (VmHWM) against the body size."""
import json
import subprocess

from harness import *

# Large, but under the broker's own bound: RabbitMQ 4 refuses a message over
# max_message_size, 16 MiB by default (3.x: 128 MiB), closing the channel.
BIG, N_BIG, N_SMALL = 15 * 1024 * 1024, 6, 30
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


def dlq_list():
    """`sidecar dlq list` of this consumer: (its output, its peak RSS in KiB)."""
    cfg_path = os.path.join(sc.dir, "dlq.json")
    with open(cfg_path, "w") as f:
        json.dump(dict(sc.config, mysql={"url": os.environ["SC_TEST_MYSQL_ADMIN_URL"]}), f)
    p = subprocess.Popen([SIDECAR, "dlq", "list", sc.name, "-c", cfg_path], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, env=dict(os.environ, ASAN_OPTIONS=asan))
    out = p.stdout.read().decode()
    _, status, usage = os.wait4(p.pid, 0)
    return (out if os.waitstatus_to_exitcode(status) == 0 else "exit status %d: %s" % (status, out),
            usage.ru_maxrss)


empty_listed, rss_empty = dlq_list()
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
# `dlq list` over the large dead letters keeps their headers, not their
# bodies (dropped as they are read; the frames they came in released).
listed, rss = dlq_list()
ok(f"{N_BIG} message(s)" in listed, f"dlq list shows the {N_BIG} large dead letters",
   detail=listed[-400:])
diag(f"dlq list peak RSS {rss / 1024:.1f} MiB over {N_BIG} bodies of {BIG // (1024 * 1024)} MiB "
     f"({rss_empty / 1024:.1f} MiB over an empty DLQ)")
# Held as they are read, the 6 bodies would cost 6 x BIG (twice that before
# the frames were released: with bodies of 20 MiB, +192 of 240 MiB measured
# then); dropped one at a time they peaked at 92-101 MiB of 120 on these
# machines with 20 MiB bodies (more than the ~40 MiB one body and its frames
# take: not yet explained).
ok((rss - rss_empty) * 1024 < N_BIG * BIG,
   f"dlq list does not hold every body ({(rss - rss_empty) / 1024:+.1f} MiB; all would be "
   f"{N_BIG * BIG / 1024 / 1024:.0f} MiB, twice that before the bodies were dropped)")
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
