"""Publishing connections keep a bounded heap: rabbitmq-c decodes every
confirm and basic.return into the channel's frame pool, which only grows
until amqp_maybe_release_buffers recycles it. Over >= 1,000,000 confirms,
on the two paths that publish: one message at a time (the consumer's retry
and dead-letter copies) and batches of unroutable mandatory messages, each
returned and then confirmed (an unroutable relay event, again every lease)."""
import json

from harness import *

TOOL = os.environ.get("SC_PUBLISHER_RSS", "")
if not TOOL or not os.path.exists(TOOL):
    bail("SC_PUBLISHER_RSS does not name the built publisher_rss")

# A leak of one frame per confirm is >= 40 bytes each: 24 MiB and more over
# these runs. A bounded pool stays within a few pages.
LIMIT_KIB = 2048
# Under AddressSanitizer freed memory waits in a quarantine of up to 256 MiB
# (each basic.return's message is malloc'd and freed): that is not a leak.
env = dict(os.environ)
env["ASAN_OPTIONS"] = ":".join(x for x in [os.environ.get("ASAN_OPTIONS", ""), "quarantine_size_mb=0",
                                            "thread_local_quarantine_size_kb=0"] if x)
total = 0
for count, batch, mandatory, label in [(300000, 1, 0, "one at a time (consumer retry/DLQ path)"),
                                       (700000, 200, 1, "batches of 200, each returned unroutable (relay)")]:
    r = subprocess.run([TOOL, os.environ["SC_TEST_AMQP_URL"], str(count), str(batch), str(mandatory)],
                       env=env, capture_output=True, text=True, timeout=120)
    if not ok(r.returncode == 0, f"{label}: every message confirmed", detail=r.stdout + r.stderr):
        continue
    m = json.loads(r.stdout.strip().splitlines()[-1])
    total += m["confirmed"]
    diag(f"{label}: {json.dumps(m)}")
    is_eq(m["confirmed"], count, f"{label}: confirms counted")
    if mandatory:
        is_eq(m["returned"], count, f"{label}: every message came back as a basic.return first")
    ok(m["growth_kib"] < LIMIT_KIB,
       f"{label}: RSS grew {m['growth_kib']} KiB after the warm-up (limit {LIMIT_KIB} KiB)")
ok(total >= 1000000, f"{total} confirms in all")
done()
