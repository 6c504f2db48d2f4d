"""The producer helper through examples/order-producer: the business row and
the outbox row commit together; a COMMIT whose reply is lost (connection cut
after COMMIT is sent) is UNKNOWN and reconciled by request id, never replayed
blindly; a crash before COMMIT leaves nothing, and the rerun completes."""
import re

from harness import *


def orders_for(prefix):
    return query("SELECT o.request_id, o.acceptance_event_id, o.id, e.event_id, e.aggregate_id, e.status"
                 " FROM orders o LEFT JOIN outbox_event e ON e.event_id = o.acceptance_event_id"
                 " WHERE o.tenant_id = 'it' AND o.request_id LIKE %s", (prefix + "-%",))


# Lost COMMIT reply.
proxy = CommitCuttingProxy(int(os.environ["SC_TEST_MYSQL_PORT"]))
proxy.armed = 1
prefix = "u" + suffix()
rc, lines, err = run_order_producer(["--count", "10", "--tenant", "it", "--prefix", prefix],
                                    env={"SIDECAR_MYSQL_URL": proxy.url("PRODUCER")})
is_eq(rc, 0, "order-producer finished every request")
is_eq(proxy.cuts, 1, "one COMMIT lost its reply")
is_eq(len(lines), 10, "one result line per request")
rec = [l for l in lines if l["reconciled"] > 0]
is_eq(len(rec), 1, "exactly one request was reconciled")
ok(rec and rec[0]["outcome"] == "committed" and rec[0]["attempts"] == 1,
   "the UNKNOWN request was found committed by request id, without a second attempt", detail=rec)
rows = orders_for(prefix)
is_eq(len(rows), 10, "ten orders, none twice")
eids = [l["event_id"] for l in lines]
ok(all(re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", e) for e in eids),
   "event ids are lowercase UUIDv7", detail=eids)
ok(eids == sorted(eids), "ids made one after another sort in creation order (time-ordered)", detail=eids)
ms = int(eids[0].replace("-", "")[:12], 16)
ok(abs(ms / 1000 - time.time()) < 600, "the v7 timestamp is the creation time (Unix ms)", detail=ms)
ok(all(r[3] is not None for r in rows), "every order has its outbox_event (same transaction)")
ok(all(r[4] == str(r[2]) for r in rows), "each outbox_event's aggregate_id is its order id")
by_req = {r[0]: r for r in rows}
ok(all(by_req[l["request_id"]][1] == l["event_id"] for l in lines),
   "the event id the producer reports is the stored acceptance_event_id")

# Crash before COMMIT, then the same requests again.
prefix = "c" + suffix()
rc, lines, err = run_order_producer(["--count", "10", "--tenant", "it", "--prefix", prefix],
                                    env={"SIDECAR_MYSQL_URL": os.environ["SC_TEST_MYSQL_PRODUCER_URL"],
                                         "SIDECAR_FAULT": "producer.before_commit:4"})
is_eq(rc, 86, "the producer died at the fault point before its 4th COMMIT")
is_eq(len(orders_for(prefix)), 3, "the uncommitted 4th order left no row")
is_eq(count_in("outbox_event", "aggregate_id", [str(r[2]) for r in orders_for(prefix)]), 3,
      "and no outbox row")
rc, lines, err = run_order_producer(["--count", "10", "--tenant", "it", "--prefix", prefix],
                                    env={"SIDECAR_MYSQL_URL": os.environ["SC_TEST_MYSQL_PRODUCER_URL"]})
is_eq(rc, 0, "the rerun finished")
is_eq([l["outcome"] for l in lines], ["already_accepted"] * 3 + ["committed"] * 7,
      "the first three were recognised by request id, the rest committed")
rows = orders_for(prefix)
is_eq(len(rows), 10, "exactly ten orders")
ok(all(r[3] is not None and r[5] == "PENDING" for r in rows), "each with one PENDING outbox_event")
done()
