"""relay.max_message_bytes: a row whose message would be larger is FAILED
with a reason naming its size and the bound, and never sent; its
batch-mates are published once, within the round. The bound is on the
built body: a payload under it whose envelope takes it over is refused too,
one just under is sent. Values outside 1024..512 MiB are refused at start
(exit 2, naming the key)."""
import collections
import re

from harness import *

BOUND = 64 * 1024
LEASE_MS = 3000

clear_outbox()
ex = "maxbytes-" + suffix()
q = bound_queue(ex)
good = insert_outbox(3)
payload_over = insert_sized(100 * 1024)     # the payload alone is over
good += insert_outbox(2)
envelope_over = insert_sized(BOUND - 100)   # under, until the envelope is around it
good += [insert_sized(BOUND - 1024)]        # under, envelope and all
good += insert_outbox(2)
over = [payload_over, envelope_over]

r = Relay(ex, batch=20, lease_ms=LEASE_MS)
r.config["relay"]["max_message_bytes"] = BOUND
with open(r.config_path, "w") as f:
    json.dump(r.config, f)
r.start()
t0 = time.time()
ok(wait_until(lambda: count_in("outbox_event", "event_id", good, "AND status = 'PUBLISHED'") == len(good)
              and count_in("outbox_event", "event_id", over, "AND status = 'FAILED'") == 2, timeout=30),
   f"the {len(good)} rows within the bound are PUBLISHED, the 2 above it FAILED")
took = time.time() - t0
ok(took < LEASE_MS / 1000.0, f"within one lease ({took:.2f} s)")
is_eq(query("SELECT MAX(publish_attempts) FROM outbox_event WHERE event_id IN (%s)" % ",".join(["%s"] * 10),
            tuple(good + over))[0][0], 1, "every row was claimed once")
seen = collections.Counter(json.loads(b)["id"] for _, _, b in drain_with_keys(q))
ok(set(seen) == set(good) and all(c == 1 for c in seen.values()),
   "the rows within the bound reached the queue once each, the others never", detail=seen)
logged = {l["event_id"]: l["msg"] for l in r.outcomes("invalid")}
why = logged.get(payload_over, "")
ok("too large" in why and f"{100 * 1024} bytes" in why and f"relay.max_message_bytes ({BOUND})" in why,
   "the payload over the bound: logged FAILED naming its size and the bound", detail=why)
why = logged.get(envelope_over, "")
m = re.search(r"the message is (\d+) bytes", why)
ok(m and int(m.group(1)) > BOUND and f"relay.max_message_bytes ({BOUND})" in why,
   "the envelope over the bound: logged FAILED naming the message's size and the bound", detail=why)
st, metrics = r.get("/metrics")
m = re.search(r"^sidecar_relay_invalid_total\{[^}]*\} (\d+)$", metrics, re.M)
is_eq(int(m.group(1)) if m else None, 2, "both counted in sidecar_relay_invalid_total")
ok(not [l for l in r.lines() if "connection failed" in l.get("msg", "")], "no \"connection failed\" line")
is_eq(r.stop(), 0, "clean stop")
clear_outbox()

# --- the bound itself, checked at start ---------------------------------------
base = {"amqp": {"url": os.environ["SC_TEST_AMQP_URL"]}, "mysql": {"url": os.environ["SC_TEST_MYSQL_RELAY_URL"]},
        "http": {"listen": "off"}, "relay": {"exchange": ex}}
for bad in [100, 512 * 1024 * 1024 + 1, "big"]:
    cfg = json.loads(json.dumps(base))
    cfg["relay"]["max_message_bytes"] = bad
    rc, out = run_sidecar_cmd(["relay"], cfg)
    ok(rc == 2 and "relay.max_message_bytes" in out, f"max_message_bytes {bad!r}: exit 2 naming the key", detail=out)
rc, out = run_sidecar_cmd(["help", "config"], base)
ok(rc == 0 and re.search(r"^\| `relay.max_message_bytes` \| 15728640 \|", out, re.M),
   "the default is 15 MiB (under RabbitMQ 4's 16 MiB max_message_size)", detail=out[-2000:])
done()
