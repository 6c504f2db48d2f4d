"""Browsing a dead-letter queue cannot lose what it browses. `dlq list` and
`show` take every message with basic.get and give it back by closing the
channel; a quorum queue counts each give-back as a delivery (x-delivery-count)
and RabbitMQ 4 drops a message at its delivery limit, 20 unless declared.

- A quorum DLQ the sidecar declares carries a delivery limit no browse can
  reach, and survives 30 lists; the replay that follows is exact: the message
  arrives once in the consumer's queue, is handled once at attempt 1, and the
  DLQ is empty.
- A quorum DLQ that already exists with a limit of 20 (what RabbitMQ 4 gives
  every quorum queue declared without one; the sidecar cannot change a
  queue's arguments) still keeps its message through 30 lists: a dead letter
  whose count nears a limit is put back as a fresh copy.
- While one `dlq` command holds the messages, a second one sees an empty
  queue (documented in operations.md), and nothing is lost."""
import subprocess
import uuid

from harness import *

LISTS = 30


def blocked_dead_letter(sc, subject):
    """A real dead letter of sc: the sample handler REJECTs an event whose
    notification_job row already exists (1062 on its primary key). Returns the
    id; delete the row to let a replay apply it."""
    eid = str(uuid.uuid4())
    query("INSERT INTO notification_job (event_id, order_id, source_version, status, created_at)"
          " VALUES (%s, 1, 1, 'DONE', UTC_TIMESTAMP(6))", (eid,))
    publish_events(sc.exchange, [(eid, subject)])
    ok(wait_until(lambda: queue_depth(sc.dlq) == 1, timeout=30), f"{sc.name}: the event is in the DLQ")
    return eid


def list_many(sc, eid, n):
    """Runs `dlq list` n times; returns the runs whose output did not show eid."""
    missing = []
    for i in range(n):
        rc, out = run_sidecar_cmd(["dlq", "list", sc.name], sc.config)
        if rc != 0 or "1 message(s)" not in out or eid not in out:
            missing.append((i + 1, rc, out.strip()[-200:]))
    return missing


def replay_once_exactly(sc, eid, label):
    query("DELETE FROM notification_job WHERE event_id = %s", (eid,))
    rc, out = run_sidecar_cmd(["dlq", "replay", sc.name, "--id", eid], sc.config)
    ok(rc == 0 and "replayed 1 of 1" in out, f"{label}: replayed once ({out.strip()[-300:]})")
    applied = wait_until(lambda: [l for l in sc.outcomes("applied") if l.get("event_id") == eid], timeout=30)
    ok(applied, f"{label}: the consumer handled the replayed event")
    time.sleep(1)  # room for a second copy, were there one
    seen = [l for l in sc.lines() if l.get("event_id") == eid and l.get("outcome")]
    is_eq([(l["outcome"], l.get("attempt")) for l in seen if l["outcome"] != "dead_lettered"],
          [("applied", 1)], f"{label}: arrived once, handled once, at attempt 1")
    is_eq(count_in("notification_job", "event_id", [eid], "AND order_id != 1"), 1, f"{label}: one effect")
    is_eq(queue_depth(sc.dlq), 0, f"{label}: the DLQ is empty")
    is_eq(queue_depth(sc.queue), 0, f"{label}: nothing else waits in the consumer's queue")


def queue_arguments(name):
    for line in rabbitmqctl("list_queues", "name", "arguments").stdout.splitlines():
        parts = line.split("\t")
        if parts[0] == name:
            return parts[1] if len(parts) > 1 else ""
    return None


# --- a quorum DLQ the sidecar declares -------------------------------------
sc = Sidecar(consumer_extra={"queue_type": "quorum", "retry_delays_ms": [200], "max_attempts": 2})
ok(sc.start(), "quorum consumer started")
args = queue_arguments(sc.dlq)
ok(args is not None and '"x-queue-type","quorum"' in args and '"x-delivery-limit",2147483647' in args,
   f"the quorum DLQ is declared with a delivery limit no browse reaches (arguments {args})")
eid = blocked_dead_letter(sc, "7001")
missing = list_many(sc, eid, LISTS)
ok(not missing, f"{LISTS} lists each showed the dead letter", detail=missing)
rc, out = run_sidecar_cmd(["dlq", "show", sc.name, "--id", eid], sc.config)
ok(rc == 0 and "x-sidecar-reason: rejected by handler" in out, "show still finds it, reason intact",
   detail=out)
replay_once_exactly(sc, eid, "declared DLQ")

# --- while one dlq command holds the messages, another sees none -----------
eid2 = blocked_dead_letter(sc, "7002")
d = tempfile.mkdtemp(prefix="sc-it-")
cfg_path = os.path.join(d, "c.json")
with open(cfg_path, "w") as f:
    json.dump(sc.config, f)
err_path = os.path.join(d, "holder.err")
holder = subprocess.Popen([SIDECAR, "dlq", "list", sc.name, "-c", cfg_path],
                          env=dict(os.environ, SIDECAR_FAULT="dlq.browsed", SIDECAR_FAULT_PAUSE_MS="4000"),
                          stdout=subprocess.PIPE, stderr=open(err_path, "w"), text=True)
ok(wait_until(lambda: "pausing" in open(err_path).read(), timeout=10),
   "a first list holds the DLQ's messages (paused at a fault point)")
rc, out = run_sidecar_cmd(["dlq", "list", sc.name], sc.config)
ok(rc == 0 and "0 message(s)" in out, f"a concurrent list sees an empty queue ({out.strip()[:80]})")
hout, _ = holder.communicate(timeout=30)
herr = open(err_path).read()
ok(holder.returncode == 0 and "1 message(s)" in hout and eid2 in hout,
   "the first list, paused while holding it, showed it", detail=hout + herr)
ok(wait_until(lambda: queue_depth(sc.dlq) == 1, timeout=10), "and gave it back: still in the DLQ")
replay_once_exactly(sc, eid2, "after the concurrent lists")
is_eq(sc.stop(), 0, "clean stop")

# --- a quorum DLQ that exists with RabbitMQ 4's default limit of 20 ---------
old = Sidecar(consumer_extra={"queue_type": "quorum", "retry_delays_ms": [200], "max_attempts": 2})
conn = amqp()
conn.channel().queue_declare(old.dlq, durable=True,
                             arguments={"x-queue-type": "quorum", "x-delivery-limit": 20})
conn.close()
ok(old.start(), "a consumer whose quorum DLQ already exists with a delivery limit of 20 starts")
warned = [l for l in old.lines() if "x-delivery-limit" in l.get("msg", "") and old.dlq in l.get("msg", "")]
ok(warned and warned[0].get("level") == "warn", "and warns that the DLQ keeps its own limit", detail=warned)
eid3 = blocked_dead_letter(old, "7003")
missing = list_many(old, eid3, LISTS)
ok(not missing, f"{LISTS} lists of a DLQ limited to 20 deliveries each showed the dead letter",
   detail=missing)
rc, out = run_sidecar_cmd(["dlq", "show", old.name, "--id", eid3], old.config)
count = [int(l.split(":")[1]) for l in out.splitlines() if l.strip().startswith("x-delivery-count:")]
ok(rc == 0 and count and count[0] < 20, f"its delivery count stays below the limit (x-delivery-count {count})",
   detail=out)
replay_once_exactly(old, eid3, "DLQ with a limit of 20")
is_eq(old.stop(), 0, "clean stop")
done()
