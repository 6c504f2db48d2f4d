"""Issue 11.6 (short form): the relay's RSS stays flat over a long drain —
within 2 MiB from warm-up (5,000 events) to the end of 40,000 events. The
benchmark (tests/bench, BENCH_PART=producer) runs the same over 1,000,000."""
import re

from harness import *

N, WARM = 40000, 5000
clear_outbox()
ex = "rss-" + suffix()
q = bound_queue(ex)
query("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version, payload,"
      " status, created_at) SELECT UUID(), 'ORDER', seq, 'ORDER_ACCEPTED', 1, '{\"orderId\":1,\"amount\":19.99}',"
      f" 'PENDING', UTC_TIMESTAMP(6) + INTERVAL seq MICROSECOND FROM seq_1_to_{N}")
# Under AddressSanitizer freed memory waits in a quarantine (up to 256 MiB)
# before it is reused: that is the sanitizer's growth, not the relay's.
asan = ":".join(x for x in [os.environ.get("ASAN_OPTIONS", ""), "quarantine_size_mb=0",
                            "thread_local_quarantine_size_kb=0"] if x)
r = Relay(ex, batch=256, lease_ms=30000, poll_ms=50).start(env={"ASAN_OPTIONS": asan})


def published():
    st, body = r.get("/metrics") if r.http_port() else (0, "")
    m = re.search(r"^sidecar_relay_published_total\{[^}]*\} (\d+)$", body, re.M) if st == 200 else None
    return int(m.group(1)) if m else 0


def rss_kib():
    for line in open(f"/proc/{r.proc.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None


ok(wait_until(lambda: published() >= WARM, timeout=120), f"warm-up: {WARM} events published")
warm = rss_kib()
ok(wait_until(lambda: published() >= N, timeout=300), f"all {N} events published")
end = rss_kib()
diag(f"relay RSS {warm / 1024:.1f} MiB after {WARM} events, {end / 1024:.1f} MiB after {N}")
ok(end - warm <= 2048, f"RSS growth {(end - warm) / 1024:+.2f} MiB over {N - WARM} events (bound 2 MiB)")
is_eq(r.stop(), 0, "clean stop")
c = amqp()
c.channel().queue_delete(q)
c.close()
clear_outbox()
done()
