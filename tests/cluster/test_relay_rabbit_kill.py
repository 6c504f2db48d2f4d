"""The relay publishing with confirms to a quorum queue while the broker node
it is connected to dies: no PUBLISHED mark without a confirm from the
surviving majority (every PUBLISHED event is in the queue)."""
import collections

from cluster_lib import *

N = 1500
ex = "outbox-" + suffix()
q = quorum_queue(ex)
ids = insert_outbox(N)
r = configure(Relay(ex, worker_id="relay-k-" + suffix(), batch=25, lease_ms=5000, poll_ms=20,
                    confirm_timeout_ms=2000),
              [MYSQL_RELAY[1], MYSQL_RELAY[2]], [AMQP[2], AMQP[0], AMQP[1]])
r.start()
published = lambda: count_in("outbox_event", "event_id", ids, "AND status = 'PUBLISHED'")
ok(wait_until(lambda: connects(r, "amqp"), timeout=30) and connects(r, "amqp")[0][0] == 0,
   f"relay on RabbitMQ node 3 ({connects(r, 'amqp')[:1]})")
ok(wait_until(lambda: published() >= N // 6, timeout=120), f"mid-stream before the kill ({published()} of {N})")
kill("rabbit", 3)
t_kill = time.time()
at_kill = published()
ok(at_kill < N, f"still publishing when the node died ({at_kill} of {N})")
wait_until(lambda: published() > at_kill + 50, timeout=120)
diag(f"stall after the kill: {time.time() - t_kill:.1f} s until 50 more rows were PUBLISHED")
wait_until(lambda: published() == N, timeout=180)
is_eq(published(), N, "every row PUBLISHED")
r.stop()
msgs = drain_with_keys(q)
seen = collections.Counter(json.loads(body)["id"] for _, _, body in msgs)
is_eq(len(set(seen) & set(ids)), N, "every PUBLISHED event is in the quorum queue (confirmed by the majority)")
later = [n for n, _ in connects(r, "amqp")[1:]]
ok(later and later[0] != 0, f"relay reconnected to a surviving node ({later})")
failed = [l for l in r.lines() if "publishing failed" in l.get("msg", "")
          or "broker connection lost" in l.get("msg", "") or l.get("outcome") == "unconfirmed"]
# a row left unsent when the connection died (no log line of its own) is
# published again after its lease: publish_attempts > 1
again = count_in("outbox_event", "event_id", ids, "AND publish_attempts > 1")
ok(len(failed) > 0 or len(msgs) > N or again > 0,
   f"the death was felt: {len(failed)} failed/unconfirmed publishes, {len(msgs) - N} repeats,"
   f" {again} rows published again after their lease")
diag(f"repeat cost: {len(msgs) - N} events published twice")
restart("rabbit", 3)
done()
