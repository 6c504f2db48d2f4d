"""What relay.ordering "per_aggregate" costs, measured on the test servers (a
shared machine: the figures are reported, the assertions are loose). The
claim takes only the head of each aggregate, and an aggregate's next event
becomes claimable when its head is marked PUBLISHED, so one aggregate moves
one event per relay round (claim, confirm, mark):

- one aggregate of 1,000 events through one relay, ordered and unordered;
- 1,000 aggregates x 5 events, ordered and unordered (the ratio);
and in each ordered run the queue's order per aggregate is checked."""
import datetime

from harness import *

EX = "ex-rate-" + suffix()


def load(aggs, per):
    base = datetime.datetime.utcnow() - datetime.timedelta(hours=1)
    ids = {}
    with admin_db() as c, c.cursor() as cur:
        vals = []
        for v in range(1, per + 1):
            for a in range(aggs):
                eid = str(uuid.uuid4())
                ids[eid] = (a, v)
                vals.append((eid, f"r{a}", v))
        cur.executemany("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version,"
                        " payload, status, created_at) VALUES (%s, 'ORDER', %s, 'ORDER.V', %s, '{}', 'PENDING',"
                        " %s)", [(e, a, v, (base + datetime.timedelta(microseconds=10 * i)).strftime("%Y-%m-%d %H:%M:%S.%f"))
                              for i, (e, a, v) in enumerate(vals)])
    return ids


def run(ordering, aggs, per):
    clear_outbox()
    q = bound_queue(EX, "ORDER.#")
    ids = load(aggs, per)
    r = Relay(EX, batch=100, lease_ms=30000, poll_ms=200)
    r.config["relay"]["ordering"] = ordering
    with open(r.config_path, "w") as f:
        json.dump(r.config, f)
    t0 = time.time()
    r.start()
    n = aggs * per
    done_ = wait_until(lambda: query("SELECT COUNT(*) FROM outbox_event WHERE status = 'PUBLISHED'")[0][0] == n,
                       timeout=300, step=0.05)
    secs = time.time() - t0
    r.stop()
    msgs = drain_with_keys(q)
    last, bad = {}, 0
    for _, props, _ in msgs:
        a, v = ids[props.message_id]
        bad += last.get(a, 0) >= v
        last[a] = v
    conn = amqp()
    conn.channel().queue_delete(q)
    conn.close()
    return bool(done_), n / secs, bad, len(msgs)


ok_, one_ord, bad, _ = run("per_aggregate", 1, 1000)
ok(ok_ and bad == 0, f"one aggregate, 1,000 events, per_aggregate: all published in order ({one_ord:.0f} events/s)")
ok_, one_none, _, _ = run("none", 1, 1000)
ok(ok_, f"one aggregate, 1,000 events, none: {one_none:.0f} events/s")
diag(f"one aggregate: per_aggregate {one_ord:.0f} events/s, none {one_none:.0f} events/s")
ok(one_ord >= 20, f"a single aggregate still moves at least 20 events/s ({one_ord:.0f})")
ok_, many_ord, bad, _ = run("per_aggregate", 1000, 5)
ok(ok_ and bad == 0, f"1,000 aggregates x 5, per_aggregate: all published in order ({many_ord:.0f} events/s)")
ok_, many_none, _, _ = run("none", 1000, 5)
ok(ok_, f"1,000 aggregates x 5, none: {many_none:.0f} events/s")
diag(f"1,000 aggregates x 5 (batch 100): per_aggregate {many_ord:.0f} events/s, none {many_none:.0f} events/s,"
     f" ratio {many_ord / many_none:.2f}")
clear_outbox()
done()
