"""Issue 11.6 (short form): the consumer's RSS stays flat over a long run —
within 2 MiB from warm-up (10,000 events) to the end of 80,000 events, fed
while it consumes. The benchmark (tests/bench, BENCH_PART=consumed) runs the
same over 1,000,000."""
import re
import subprocess
import threading

from harness import *

N, WARM = 80000, 10000
PRELOAD = os.path.join(os.path.dirname(os.path.dirname(SIDECAR)), "tests", "bench", "preload")
# Under AddressSanitizer freed memory waits in a quarantine before it is
# reused: that is the sanitizer's growth, not the sidecar's.
asan = ":".join(x for x in [os.environ.get("ASAN_OPTIONS", ""), "quarantine_size_mb=0",
                            "thread_local_quarantine_size_kb=0"] if x)
s = Sidecar(consumer_extra={"batch_max": 128, "workers": 2, "prefetch": 1024})
if not ok(s.start(env={"ASAN_OPTIONS": asan}), "consumer started"):
    bail("the consumer did not start")


wait_until(lambda: s.http_port() is not None, timeout=10)
PORT = s.http_port()  # read once: parsing the growing log on every poll would load the machine


def handled():
    return metric_sum(PORT, r'^sidecar_messages_total\{consumer="%s",outcome="[^"]*"\} (\d+)$' % re.escape(s.name))


def rss_kib():
    for line in open(f"/proc/{s.proc.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None


# fed while it consumes, confirms per 200 messages (the feed runs at about
# the consumer's pace, so the warm-up sample is taken mid-feed)
fed = []
feeder = threading.Thread(target=lambda: fed.append(subprocess.run(
    [PRELOAD, os.environ["SC_TEST_AMQP_URL"], s.queue, str(N), "v7", "200"], capture_output=True, text=True,
    timeout=200)))
feeder.start()
ok(wait_until(lambda: handled() >= WARM, timeout=60), f"warm-up: {WARM} events handled")
warm = rss_kib()
ok(wait_until(lambda: handled() >= N, timeout=150), f"all {N} events handled")
end = rss_kib()
feeder.join(timeout=30)
ok(fed and fed[0].returncode == 0,
   f"feeder published {N} events ({(fed[0].stdout + fed[0].stderr).strip() if fed else 'no result'})")
applied = query("SELECT COUNT(*) FROM consumed_event WHERE consumer_name = %s", (s.name,))[0][0]
is_eq(applied, N, "every event claimed once")
diag(f"consumer RSS {warm / 1024:.1f} MiB after {WARM} events, {end / 1024:.1f} MiB after {N}")
ok(end - warm <= 2048, f"RSS growth {(end - warm) / 1024:+.2f} MiB over {N - WARM} events (bound 2 MiB)")
is_eq(s.stop(), 0, "clean stop")
query("DELETE FROM consumed_event WHERE consumer_name = %s", (s.name,))
done()
