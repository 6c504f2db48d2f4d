"""kill at each commit window of the consumer (a fault point that _exits),
restart, and check by event id: nothing lost, no effect twice, and the event
in hand at the crash really delivered again."""
from harness import *

N, K = 20, 5
POINTS = {
    # point: outcome the crashed event must show after the restart
    "consumer.after_insert": "applied",    # insert done, nothing committed
    "consumer.before_commit": "applied",   # handler done, nothing committed
    "consumer.after_commit": "duplicate",  # committed, never acked
}

for point, want in POINTS.items():
    sc = Sidecar(consumer_extra={"prefetch": 1})
    ok(sc.start(env={"SIDECAR_FAULT": f"{point}:{K}"}), f"{point}: started with the fault armed")
    events = new_events(N)
    ids = [e for e, _ in events]
    publish_events(sc.exchange, events)
    rc = sc.wait_exit(60)
    is_eq(rc, 86, f"{point}: the process died at the fault point")
    first_run = [l["event_id"] for l in sc.outcomes("applied", run=1)]
    is_eq(len(first_run), K - 1, f"{point}: {K - 1} events applied before the crash")
    in_hand = ids[K - 1]
    ok(in_hand not in first_run, f"{point}: the event in hand had no outcome before the crash")

    ok(sc.start(), f"{point}: restarted without the fault")
    wait_until(lambda: len(sc.outcomes("applied")) + len(sc.outcomes("duplicate")) >= N, timeout=60)
    wait_until(lambda: count_in("consumed_event", "event_id", ids) >= N, timeout=30)
    second = [l for l in sc.lines(run=2) if l.get("event_id") == in_hand and l.get("outcome")]
    ok(second and second[0]["outcome"] == want,
       f"{point}: the event in hand was delivered again and was {want}", detail=second)
    is_eq(count_in("notification_job", "event_id", ids), N, f"{point}: one effect per event, none lost")
    is_eq(count_in("consumed_event", "event_id", ids, f"AND consumer_name = '{sc.name}'"), N,
          f"{point}: one consumed_event row per event")
    applied_ids = [l["event_id"] for l in sc.outcomes("applied")]
    is_eq(len(applied_ids), len(set(applied_ids)), f"{point}: no event applied twice")
    is_eq(queue_depth(sc.queue), 0, f"{point}: queue drained")
    is_eq(sc.stop(), 0, f"{point}: clean stop")
done()
