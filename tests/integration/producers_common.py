"""The common run of the producer programs in examples/producers/ (one test
per language, test_producers_<lang>.py), against the real servers:

1. 6 requests through a proxy that forwards the first COMMIT and cuts the
   connection before its reply: that request is UNKNOWN, its connection
   discarded, and reconciliation by (tenant_id, request_id) finds it
   committed, with no second attempt;
2. 4 requests through a proxy that drops the first COMMIT and cuts the
   connection: UNKNOWN, discarded, reconciled as not committed, and the
   retry (with the same event id) commits;
3. the requests of 1 again: each recognised as already accepted, no row added;
4. the rows: one order and one outbox row per request, in one transaction
   (ids, aggregate id, payload), event ids lowercase UUIDv7, created_at UTC;
5. `sidecar relay` and `sidecar consume` with the sample handler: every
   event has exactly one consumed_event row and one notification_job (its
   order id); then the rows are set PENDING again (a relay that died after
   the broker's confirm and before marking), every event is delivered a
   second time, recognised as a duplicate, and still has one effect.

A missing toolchain is a failed test (not a skip): CI installs it
(tests/install-deps)."""
import re
import shutil

from harness import *

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
V7 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def toolchain_missing(lang, what, packages):
    ok(False, f"{lang} toolchain missing ({what}): this test counts as failed, not skipped; "
              f"tests/install-deps installs {packages}")
    done()


def run_cmd(cmd, env=None, timeout=120, cwd=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout, cwd=cwd)


class CommitDroppingProxy(CommitCuttingProxy):
    """Like CommitCuttingProxy, but while armed the COMMIT never reaches the
    server: the connection is cut instead, the server rolls the transaction
    back when it sees the client gone, and the client sees a lost connection
    (outcome UNKNOWN, really not committed)."""

    CUT = CommitCuttingProxy.CUT_BEFORE


def produce(command, args, url):
    r = run_cmd(command + args, env={"PRODUCER_MYSQL_URL": url})
    lines = []
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            try:
                lines.append(json.loads(line))
            except ValueError:
                pass
    if r.returncode != 0:
        diag(f"producer exit {r.returncode}; stderr: {r.stderr[-1500:]}")
    return r.returncode, lines


def run_suite(lang, command, extra_b=None):
    """command: the argv that runs the built producer; extra_b: more
    arguments for run 2 (e.g. the Python program's --ids sql)."""
    tenant = "it-" + lang
    port = int(os.environ["SC_TEST_MYSQL_PORT"])
    sc = Sidecar(name="producers-" + lang + "-" + suffix())
    ok(sc.start(), f"{lang}: sidecar consume with the sample handler is consuming")

    # ---- 1. COMMIT executed, reply cut ------------------------------------
    pa = lang[0] + "a" + suffix()
    proxy = CommitCuttingProxy(port)
    proxy.armed = 1
    rc, a = produce(command, ["--count", "6", "--tenant", tenant, "--prefix", pa], proxy.url("PRODUCER"))
    is_eq(rc, 0, f"{lang}: every request ended accepted (reply of one COMMIT cut)")
    is_eq(proxy.cuts, 1, f"{lang}: one COMMIT lost its reply")
    is_eq(len(a), 6, f"{lang}: one result line per request")
    rec = [l for l in a if l.get("reconciled")]
    ok(len(rec) == 1 and rec[0]["outcome"] == "committed" and rec[0]["attempts"] == 1
       and rec[0]["discarded"] == 1,
       f"{lang}: the UNKNOWN request: connection discarded, found committed by request id, no second attempt",
       detail=a)
    ok(all(l["outcome"] == "committed" and l["attempts"] == 1 for l in a),
       f"{lang}: every request committed at its first attempt", detail=a)

    # ---- 2. COMMIT dropped ----------------------------------------------------
    pb = lang[0] + "b" + suffix()
    proxy = CommitDroppingProxy(port)
    proxy.armed = 1
    rc, b = produce(command, ["--count", "4", "--tenant", tenant, "--prefix", pb] + (extra_b or []),
                    proxy.url("PRODUCER"))
    is_eq(rc, 0, f"{lang}: every request ended accepted (one COMMIT never reached the server)")
    is_eq(proxy.cuts, 1, f"{lang}: one COMMIT was dropped")
    rec = [l for l in b if l.get("reconciled")]
    ok(len(rec) == 1 and rec[0]["outcome"] == "committed" and rec[0]["attempts"] == 2
       and rec[0]["discarded"] == 1,
       f"{lang}: the UNKNOWN request: discarded, reconciled as not committed, committed by the retry",
       detail=b)

    # ---- 3. the same requests again ------------------------------------------------
    rc, again = produce(command, ["--count", "6", "--tenant", tenant, "--prefix", pa],
                        os.environ["SC_TEST_MYSQL_PRODUCER_URL"])
    is_eq(rc, 0, f"{lang}: the rerun finished")
    ok([l["outcome"] for l in again] == ["already_accepted"] * 6
       and [l["event_id"] for l in again] == [l["event_id"] for l in a],
       f"{lang}: a rerun of the same requests is recognised by request id and reports the stored event ids",
       detail=again)

    # ---- 4. the rows ----------------------------------------------------------------
    lines = a + b
    eids = [l["event_id"] for l in lines]
    rows = query("SELECT o.request_id, o.id, o.acceptance_event_id, e.event_id, e.aggregate_type, e.aggregate_id,"
                 " e.event_type, e.event_version, e.payload,"
                 " TIMESTAMPDIFF(MICROSECOND, e.created_at, UTC_TIMESTAMP(6)) / 1e6,"
                 " TIMESTAMPDIFF(MICROSECOND, o.created_at, UTC_TIMESTAMP(6)) / 1e6"
                 " FROM orders o LEFT JOIN outbox_event e ON e.event_id = o.acceptance_event_id"
                 " WHERE o.tenant_id = %s AND (o.request_id LIKE %s OR o.request_id LIKE %s)",
                 (tenant, pa + "-%", pb + "-%"))
    is_eq(len(rows), 10, f"{lang}: ten orders, none twice")
    by_req = {r[0]: r for r in rows}
    ok(all(l["request_id"] in by_req and by_req[l["request_id"]][2] == l["event_id"]
           and by_req[l["request_id"]][1] == l["order_id"] for l in lines),
       f"{lang}: the reported event id and order id are the stored ones", detail=rows)
    ok(all(r[3] is not None for r in rows), f"{lang}: every order has its outbox_event (same transaction)")
    is_eq(count_in("outbox_event", "event_id", eids), 10, f"{lang}: one outbox row per request")
    ok(all(r[4] == "ORDER" and r[5] == str(r[1]) and r[6] == "ORDER_ACCEPTED" and r[7] == 1 for r in rows),
       f"{lang}: source ORDER, subject the order id, type ORDER_ACCEPTED, version 1", detail=rows)
    ok(all(r[8] is not None and json.loads(r[8]).get("orderId") == r[1] for r in rows),
       f"{lang}: the payload is JSON naming the order", detail=[r[8] for r in rows])
    ok(all(r[9] is not None and 0 <= float(r[9]) < 300 and 0 <= float(r[10]) < 300 for r in rows),
       f"{lang}: created_at is UTC (seconds behind UTC_TIMESTAMP(6), not hours)", detail=[(r[9], r[10]) for r in rows])
    ok(all(V7.fullmatch(e) for e in eids), f"{lang}: event ids are lowercase UUIDv7", detail=eids)
    ms = [int(e.replace("-", "")[:12], 16) for e in eids]
    ok(all(abs(m / 1000 - time.time()) < 600 for m in ms), f"{lang}: the v7 timestamp is the creation time",
       detail=ms)

    # ---- 5. relayed and consumed once, then once more as a repeat ---------------------
    relay = Relay(sc.exchange, lease_ms=3000).start()
    order_of = {r[2]: r[1] for r in rows}

    def applied():
        return (count_in("consumed_event", "event_id", eids, f"AND consumer_name = '{sc.name}'") == 10
                and count_in("notification_job", "event_id", eids) == 10)

    ok(wait_until(applied, timeout=60), f"{lang}: the relay published and the sidecar applied all ten events")
    is_eq(count_in("outbox_event", "event_id", eids, "AND status = 'PUBLISHED'"), 10,
          f"{lang}: every outbox row PUBLISHED")
    jobs = query("SELECT event_id, order_id, source_version FROM notification_job WHERE event_id IN (%s)"
                 % ",".join(["%s"] * len(eids)), eids)
    ok(len(jobs) == 10 and all(order_of[j[0]] == j[1] and j[2] == 1 for j in jobs),
       f"{lang}: one notification_job per event, for its order", detail=jobs)

    marks = ",".join(["%s"] * len(eids))
    query(f"UPDATE outbox_event SET status = 'PENDING', published_at = NULL WHERE event_id IN ({marks})", eids)

    def repeated():
        return len({l.get("event_id") for l in sc.outcomes("duplicate")} & set(eids)) == 10

    ok(wait_until(repeated, timeout=60),
       f"{lang}: published again (a relay that died before marking), each recognised as a duplicate")
    is_eq(count_in("consumed_event", "event_id", eids, f"AND consumer_name = '{sc.name}'"), 10,
          f"{lang}: still one consumed_event per event")
    is_eq(count_in("notification_job", "event_id", eids), 10, f"{lang}: still one effect per event")
    is_eq(relay.stop(), 0, f"{lang}: the relay stops cleanly")
    is_eq(sc.stop(), 0, f"{lang}: the consumer stops cleanly")
