"""One row never holds back its batch: an event_type longer than a routing
key may be (256 bytes of a VARCHAR(128) utf8mb4 column) and a payload with a
repeated member name (MariaDB's JSON type accepts {"a":1,"a":2}) are marked
FAILED with their reason within one lease, while the good rows claimed with
them are PUBLISHED once each. The producer helper refuses both the same way,
and the relay's configuration checks of the same change exit 2 naming their
key."""
import collections
import re

from harness import *

LONG_TYPE = "\U0001F600" * 64  # 64 characters, 256 bytes
assert len(LONG_TYPE.encode()) == 256
DUP = '{"a":1,"a":2}'


def insert_one(event_type="ORDER_ACCEPTED", payload='{"orderId": 1}'):
    eid = str(uuid.uuid4())
    query("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version, payload,"
          " status, created_at) VALUES (%s, 'ORDER', '7', %s, 1, %s, 'PENDING', UTC_TIMESTAMP(6))",
          (eid, event_type, payload))
    return eid


clear_outbox()
ex = "poison-" + suffix()
q = bound_queue(ex)
good = insert_outbox(3)
long_row = insert_one(event_type=LONG_TYPE)
good += insert_outbox(2)
dup_row = insert_one(payload=DUP)
good += insert_outbox(2)
is_eq(query("SELECT payload FROM outbox_event WHERE event_id = %s", (dup_row,))[0][0], DUP,
      "the server stores the repeated member name as written")

LEASE_MS = 3000
r = Relay(ex, batch=10, lease_ms=LEASE_MS).start()
t0 = time.time()
ok(wait_until(lambda: count_in("outbox_event", "event_id", good, "AND status = 'PUBLISHED'") == len(good)
              and count_in("outbox_event", "event_id", [long_row, dup_row], "AND status = 'FAILED'") == 2,
              timeout=30),
   "the 7 good rows are PUBLISHED and the two bad ones FAILED")
took = time.time() - t0
ok(took < LEASE_MS / 1000.0, f"within one lease ({took:.2f} s, lease {LEASE_MS / 1000.0:.0f} s): nothing waited for a lease to expire")
is_eq(query("SELECT MAX(publish_attempts) FROM outbox_event WHERE event_id IN (%s)" % ",".join(["%s"] * 9),
            tuple(good + [long_row, dup_row]))[0][0], 1, "every row was claimed once")
logged = {l["event_id"]: l["msg"] for l in r.outcomes("invalid")}
ok("event_type" in logged.get(long_row, "") and "256 bytes" in logged.get(long_row, ""),
   "the long event_type is logged with its reason", detail=logged.get(long_row))
ok('"a"' in logged.get(dup_row, "") and "I-JSON" in logged.get(dup_row, ""),
   "the repeated member name is logged with its reason", detail=logged.get(dup_row))
seen = collections.Counter(json.loads(b)["id"] for _, _, b in drain_with_keys(q))
ok(sorted(seen) == sorted(good), "only the good rows reached the queue", detail=sorted(seen))
ok(all(c == 1 for c in seen.values()), "each once: none was published again after a lease", detail=seen)
st, metrics = r.get("/metrics")
m = re.search(r"^sidecar_relay_invalid_total\{[^}]*\} (\d+)$", metrics, re.M)
is_eq(int(m.group(1)) if m else None, 2, "both counted in sidecar_relay_invalid_total")
is_eq(r.stop(), 0, "clean stop")

# --- the producer helper applies the same rules -------------------------------
env = {"SIDECAR_MYSQL_URL": os.environ["SC_TEST_MYSQL_PRODUCER_URL"]}
for args, words in [(["ORDER", "1", LONG_TYPE, "{}"], ["event_type", "256 bytes"]),
                    (["ORDER", "1", "ORDER_ACCEPTED", DUP], ["payload", "member name", "I-JSON"])]:
    rc, lines, err = run_order_producer(["--event", *args], env=env)
    res = lines[0] if lines else {"stderr": err}
    ok(rc == 1 and res.get("outcome") == "rolled_back" and all(w in res.get("error", "") for w in words),
       f"the producer helper refuses it too, naming {words[0]}", detail=res)

# --- configuration: what the code does, checked at start --------------------
base = {"amqp": {"url": os.environ["SC_TEST_AMQP_URL"], "heartbeat_s": 5},
        "mysql": {"url": os.environ["SC_TEST_MYSQL_RELAY_URL"]},
        "http": {"listen": "off"}, "relay": {"exchange": ex, "lease_ms": 10000, "confirm_timeout_ms": 5000}}
rc, out = run_sidecar_cmd(["relay"], base)
ok(rc == 2 and "relay.lease_ms" in out and "twice" in out,
   "a lease of two confirm waits: relay exits 2 naming relay.lease_ms", detail=out)
cfg = json.loads(json.dumps(base))
cfg["relay"]["lease_ms"] = 30000
cfg["mysql"]["lock_wait_timeout_s"] = 6
rc, out = run_sidecar_cmd(["relay"], cfg)
ok(rc == 2 and "mysql.lock_wait_timeout_s" in out and "amqp.heartbeat_s" in out,
   "a lock wait longer than the heartbeat: exit 2 naming mysql.lock_wait_timeout_s", detail=out)
clear_outbox()
done()
