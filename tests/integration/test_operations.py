"""Operator commands against the real servers: inspect, purge (bounded, under
load, refusing a retention below the redelivery horizon), dlq list/show/replay."""
import threading
import uuid

from harness import *

sc = Sidecar(consumer_extra={"retry_delays_ms": [200], "max_attempts": 2, "inspect_effects": [
    {"table": "notification_job", "columns": ["order_id", "source_version", "status", "created_at"]}]})
ok(sc.start(), "sidecar started")
cfg = dict(sc.config, mysql={"url": os.environ["SC_TEST_MYSQL_ADMIN_URL"]})  # the operator's user

# --- inspect ---
clear_outbox()
eid = insert_outbox(1, status="PUBLISHED")[0]
publish_events(sc.exchange, [(eid, "5000")])
wait_until(lambda: sc.outcomes("applied"), timeout=20)
rc, out = run_sidecar_cmd(["inspect", eid, "--json"], cfg)
is_eq(rc, 0, "inspect a known event: exit 0")
info = json.loads(out[out.index("{"):])
is_eq(info["outbox"]["status"], "PUBLISHED", "inspect: outbox status")
ok(info["outbox"]["event_version"] == 1 and "lease_owner" in info["outbox"] and "published_at" in info["outbox"],
   "inspect: version, lease owner and published_at fields")
is_eq([c["consumer"] for c in info["consumed"]], [sc.name], "inspect: the consumer's consumed_event row")
is_eq(info["effects"][0]["rows"][0]["order_id"], 5000, "inspect: the sample handler's effect (inspect_effects)")
rc, out = run_sidecar_cmd(["inspect", eid], cfg)
ok(rc == 0 and "consumed: by " + sc.name in out and "notification_job (" + sc.name + "): order_id 5000" in out, "inspect: readable text")
rc, out = run_sidecar_cmd(["inspect", str(uuid.uuid4())], cfg)
ok(rc == 1 and "nothing is known" in out, "inspect an unknown id: exit 1")
rc, out = run_sidecar_cmd(["inspect", "not-a-uuid"], cfg)
ok(rc == 1 and "(UUIDv5 of message_id 'not-a-uuid')" in out and "nothing is known" in out,
   "inspect a non-UUID: a plain message's message_id, looked up by its UUIDv5 (unknown: exit 1)", detail=out)
rc, out = run_sidecar_cmd(["inspect", "x" * 256], cfg)
is_eq(rc, 2, "inspect an id longer than any message_id: exit 2")

# --- dlq list / show / replay ---
blocked = str(uuid.uuid4())
query("INSERT INTO notification_job (event_id, order_id, source_version, status, created_at)"
      " VALUES (%s, 1, 1, 'DONE', UTC_TIMESTAMP(6))", (blocked,))
bad = str(uuid.uuid4())
conn = amqp()
ch = conn.channel()
publish(ch, sc.exchange, "ORDER_ACCEPTED", event_body(blocked, subject="6001"), message_id=blocked)
publish(ch, sc.exchange, "ORDER_ACCEPTED", event_body(bad, subject="abc"), message_id=bad)
conn.close()
wait_until(lambda: queue_depth(sc.dlq) >= 2, timeout=20)
rc, out = run_sidecar_cmd(["dlq", "list", sc.name], cfg)
ok(rc == 0 and "2 message(s)" in out and blocked in out and bad in out and "1062" in out,
   f"dlq list shows both with their reasons")
is_eq(queue_depth(sc.dlq), 2, "listing leaves the messages in the DLQ")
rc, out = run_sidecar_cmd(["dlq", "show", sc.name, "--id", bad], cfg)
ok(rc == 0 and "x-sidecar-reason: rejected by handler: subject 'abc'" in out and '"subject": "abc"' in out,
   "dlq show prints headers and body")
rc, out = run_sidecar_cmd(["dlq", "replay", sc.name], cfg)
is_eq(rc, 2, "dlq replay without --id or --all is refused")
rc, out = run_sidecar_cmd(["dlq", "list", "no-such-consumer"], cfg)
is_eq(rc, 2, "dlq of an unknown consumer is refused")
# The operator removes the conflicting row, then replays that one message.
query("DELETE FROM notification_job WHERE event_id = %s", (blocked,))
rc, out = run_sidecar_cmd(["dlq", "replay", sc.name, "--id", blocked], cfg)
ok(rc == 0 and "replayed 1 of 1" in out, f"dlq replay --id ({out.strip().splitlines()[-1] if out.strip() else ''})")
ok(wait_until(lambda: count_in("notification_job", "event_id", [blocked], "AND order_id = 6001") == 1, timeout=20),
   "the replayed message went back to the consumer's queue and was applied")
is_eq(queue_depth(sc.dlq), 1, "only the other message is left in the DLQ")
# The outcome line follows the COMMIT the wait above saw (it is written after the ack).
applied = wait_until(lambda: [l for l in sc.outcomes("applied") if l["event_id"] == blocked], timeout=10)
ok(applied and applied[0]["attempt"] == 1, "the replay starts again at attempt 1")

# --- purge ---
old_ids = [str(uuid.uuid4()) for _ in range(2500)]
with admin_db() as c, c.cursor() as cur:
    cur.executemany("INSERT INTO consumed_event (consumer_name, event_id, consumed_at) VALUES"
                    " (%s, %s, UTC_TIMESTAMP(6) - INTERVAL 30 DAY)", [(sc.name, i) for i in old_ids])
    cur.execute("UPDATE outbox_event SET published_at = UTC_TIMESTAMP(6) - INTERVAL 30 DAY WHERE event_id = %s", (eid,))
rc, out = run_sidecar_cmd(["purge", "--older-than", "1h"], cfg)
ok(rc == 2 and "shorter than the redelivery horizon" in out and "--force" in out,
   "a retention below the redelivery horizon is refused, with the reason")
rc, out = run_sidecar_cmd(["purge", "--older-than", "10d", "--dry-run"], cfg)
ok(rc == 0 and "consumed_event: would delete 2500 rows" in out, f"dry run counts ({out.strip()})")
is_eq(count_in("consumed_event", "event_id", old_ids), 2500, "a dry run deletes nothing")
rc, out = run_sidecar_cmd(["purge", "--older-than", "twoweeks"], cfg)
is_eq(rc, 2, "a bad duration is refused")
# 213503982334602 days * 86400 wraps a 64-bit integer to 61184 s (17 h): it
# must be refused as absurd, not run as a 17-hour retention.
for absurd in ["213503982334602d", "99999999999999999999s", "36501d"]:
    rc, out = run_sidecar_cmd(["purge", "--older-than", absurd, "--force", "--dry-run"], cfg)
    ok(rc == 2 and "longer than the largest retention accepted, 36500d" in out,
       f"an absurd duration {absurd} is refused with a clear error ({out.strip()[:200]})")
is_eq(count_in("consumed_event", "event_id", old_ids), 2500, "nothing was deleted")

# Purge under load: a stream (with repeats of recent events) keeps flowing.
events = new_events(1500)
stream = events + events[:200]
t = threading.Thread(target=publish_events, args=(sc.exchange, stream), kwargs={"pace_s": 0.001})
t.start()
cfg_small = dict(cfg, purge={"batch": 200})
rc, out = run_sidecar_cmd(["purge", "--older-than", "10d"], cfg_small, timeout=120)
t.join()
ok(rc == 0 and "consumed_event: deleted 2500 rows (14 batches" in out, f"purge in bounded batches ({out.strip()})")
ok("outbox_event (PUBLISHED): deleted 1 rows" in out, "old PUBLISHED outbox rows purged too")
is_eq(count_in("consumed_event", "event_id", old_ids), 0, "every old row gone")
ids = [e for e, _ in events]
wait_until(lambda: count_in("consumed_event", "event_id", ids) >= 1500 and queue_depth(sc.queue) == 0, timeout=60)
is_eq(count_in("notification_job", "event_id", ids), 1500, "the live stream kept exact effects during the purge")
repeats = lambda: len([l for l in sc.outcomes("duplicate") if l["event_id"] in set(ids)])
wait_until(lambda: repeats() >= 200, timeout=10)
is_eq(repeats(), 200, "and its repeats were recognised")
ok(not sc.outcomes("retried"), "no deadlock or lock wait made a live delivery retry")
rc, out = run_sidecar_cmd(["purge", "--older-than", "1h", "--force"], cfg)
is_eq(rc, 0, "--force overrides the horizon")
is_eq(sc.stop(), 0, "clean stop")
done()
