"""The rollback procedures of docs/operations.md, run as written against the
real servers (the "previous version" is this binary with a config of only
the keys every version knows: what matters is what the procedure leaves in
the tables and queues).

Relay: SIGTERM (claims stop, the batch in hand is confirmed and marked),
the tables kept, the other relay started at once: it publishes the PENDING
rows, and the rows still leased (a crashed relay's batch) only once their
lease has ended; every event applied once.

Consumer: SIGTERM mid-stream, consumed_event kept, the other consumer
started under the same consumer name: the rest applied, repeats of what was
applied before (a republish) recognised as duplicates, every event once."""
import threading
import uuid

from harness import *

# ---- the relay ---------------------------------------------------------------
sc = Sidecar()
ok(sc.start(), "consumer started")
clear_outbox()
ids = insert_outbox(1000)
# A crashed relay's batch: PUBLISHING under a lease that ends in 4 s.
leased = insert_outbox(5, status="PUBLISHING", lease_owner="relay-crashed",
                       lease_until_sql="UTC_TIMESTAMP(6) + INTERVAL 4 SECOND")
lease_end = dict(query("SELECT event_id, lease_until FROM outbox_event WHERE lease_owner = 'relay-crashed'"))
everything = ids + leased


def published():
    return query("SELECT COUNT(*) FROM outbox_event WHERE status = 'PUBLISHED'")[0][0]


new = Relay(sc.exchange, worker_id="relay-new", batch=1).start()  # slow enough to stop midway
ok(wait_until(lambda: published() >= 50, timeout=30), "the new relay publishes")
is_eq(new.stop(), 0, "step 1: SIGTERM stops the new relay cleanly")
is_eq(query("SELECT COUNT(*) FROM outbox_event WHERE lease_owner = 'relay-new'")[0][0], 0,
      "it left no row under its own lease (its last batch confirmed and marked)")
ok(published() < len(ids), f"rows are left for the previous version ({published()} of {len(ids)} published)")
is_eq(query("SELECT COUNT(*) FROM outbox_event")[0][0], len(everything), "step 2: the tables are kept as they are")
old = Relay(sc.exchange, worker_id="relay-previous", batch=10).start()
ok(wait_until(lambda: published() == len(everything), timeout=60),
   "step 3: the previous version publishes every row, the leased ones included")
early = query("SELECT COUNT(*) FROM outbox_event WHERE event_id IN (%s) AND published_at < %%s"
              % ",".join(["%s"] * len(leased)), (*leased, min(lease_end.values())))[0][0]
is_eq(early, 0, "no row still under another relay's lease was taken before its lease ended")
is_eq(old.stop(), 0, "clean stop")
ok(wait_until(lambda: count_in("notification_job", "event_id", everything) == len(everything), timeout=60),
   "every event's effect is there")
is_eq(count_in("consumed_event", "event_id", everything, f"AND consumer_name = '{sc.name}'"), len(everything),
      "one claim per event")
is_eq(sc.stop(), 0, "consumer: clean stop")

# ---- the consumer ------------------------------------------------------------
a = Sidecar()
ok(a.start(), "the new consumer started")
events = new_events(200, start=7000)
pub = threading.Thread(target=publish_events, args=(a.exchange, events), kwargs={"pace_s": 0.01})
pub.start()
ok(wait_until(lambda: len(a.outcomes("applied")) >= 50, timeout=60), "it applies the stream")
is_eq(a.stop(), 0, "step 1: SIGTERM mid-stream: the batch in hand committed and acked")
stopped_mid = pub.is_alive()
applied_before = [l["event_id"] for l in a.outcomes("applied")]
ok(stopped_mid or len(applied_before) < len(events), "stopped while events were still arriving")
kept = count_in("consumed_event", "event_id", [e for e, _ in events], f"AND consumer_name = '{a.name}'")
is_eq(kept, len(applied_before), "step 2: consumed_event kept: one row per event applied so far")
# A repeat of ten events already applied (a relay republishing after a lost lease).
publish_events(a.exchange, [(e, s) for e, s in events if e in set(applied_before[:10])])
b = Sidecar(name=a.name, exchange=a.exchange)
ok(b.start(), "step 3: the previous version under the same consumer name")
pub.join()
all_ids = [e for e, _ in events]
ok(wait_until(lambda: count_in("notification_job", "event_id", all_ids) == len(all_ids), timeout=60),
   "every event applied")
ok(wait_until(lambda: queue_depth(a.queue) == 0, timeout=30), "the queue is drained")
dups = {l["event_id"] for l in b.outcomes("duplicate")}
ok(set(applied_before[:10]) <= dups, "the repeats of what the new version applied are duplicates", detail=sorted(dups))
applied_after = [l["event_id"] for l in b.outcomes("applied")]
ok(sorted(applied_before + applied_after) == sorted(all_ids),
   f"each event applied exactly once across the two ({len(applied_before)} + {len(applied_after)} of {len(all_ids)})")
is_eq(count_in("consumed_event", "event_id", all_ids, f"AND consumer_name = '{a.name}'"), len(all_ids),
      "one claim per event")
is_eq(b.stop(), 0, "clean stop")
done()
