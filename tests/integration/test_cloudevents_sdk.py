"""Issue 10.12 (relay and producer): `data` carries the payload text exactly
as the server returns it — never re-encoded, never a string — checked on the
raw bodies and by the official CloudEvents JavaScript SDK reading the relay's
output; the producer helper refuses rows that cannot become valid
CloudEvents, and the relay marks such rows (written around the helper)
FAILED, logs and counts them, and publishes nothing for them."""
import re
import subprocess

from harness import *
from node_deps import node_modules

HERE = os.path.dirname(os.path.abspath(__file__))
NODE = node_modules()


def sdk_read(bodies, big_int=False):
    env = dict(os.environ, NODE_PATH=NODE)
    if big_int:
        env["CE_USE_BIG_INT"] = "true"
    p = subprocess.run(["node", os.path.join(HERE, "test_cloudevents_sdk.js")], input=json.dumps(bodies),
                       env=env, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        bail("node failed: " + p.stderr[-500:])
    return [json.loads(l) for l in p.stdout.splitlines()]


def produce(*args):
    rc, lines, err = run_order_producer(["--event", *args],
                                        env={"SIDECAR_MYSQL_URL": os.environ["SC_TEST_MYSQL_PRODUCER_URL"]})
    return rc, (lines[0] if lines else {"stderr": err})


# The SDK is strict where it matters here: the check can fail.
bad_source = event_body(str(uuid.uuid4())).replace('"source": "ORDER"', '"source": "ORDER X"')
stringly = json.dumps(dict(json.loads(event_body(str(uuid.uuid4()))), data='{"a": 1}'))
got = sdk_read([bad_source, stringly])
ok(not got[0]["ok"] and "uri-reference" in got[0]["error"], "the SDK refuses a source with a space", detail=got[0])
is_eq(got[1].get("data_type"), "string", "the SDK sees a stringified payload as a string")

# --- the producer helper refuses what cannot become a valid CloudEvent ------
clear_outbox()
for args, field in [(["ORDER X", "1", "ORDER_ACCEPTED", "{}"], "aggregate_type"),
                    (["", "1", "ORDER_ACCEPTED", "{}"], "aggregate_type"),
                    (["ORDER", "", "ORDER_ACCEPTED", "{}"], "aggregate_id"),
                    (["ORDER", "1", "", "{}"], "event_type"),
                    (["ORDER", "1", "ORDER_ACCEPTED", "{\"a\":}"], "payload")]:
    rc, res = produce(*args)
    ok(rc == 1 and res.get("outcome") == "rolled_back" and field in res.get("error", ""),
       f"helper refuses {args[:3]}: {field} named", detail=res)
is_eq(query("SELECT COUNT(*) FROM outbox_event")[0][0], 0, "nothing was written for refused events")
rc, res = produce("urn:shop:order", "1", "ORDER_ACCEPTED", "{}")
is_eq((rc, res.get("outcome")), (0, "committed"), "a URI-reference source with ':' is accepted")

# --- payloads kept exactly ------------------------------------------------
ex = "cesdk-" + suffix()
q = bound_queue(ex)
PAYLOADS = ['{"n":123456789012345678901234567890}',
            '{"u64":18446744073709551615}',
            '{"inf":1E400}',
            '{"s":"a\\u0000b"}',
            '{"price":19.99,"x":0.1,"neg":-0.0,"e":1.5e-7}',
            '[1, 2.50, {"nested": [true, false, null]}]',
            '{"quote":"it\'s \\"quoted\\" \\\\ and \\u00e9 / \\ud83d\\ude00"}']
clear_outbox()
written = {}
for p in PAYLOADS:
    rc, res = produce("ORDER", "1001", "ORDER_ACCEPTED", p)
    ok(rc == 0 and res.get("outcome") == "committed", f"helper writes payload {p}", detail=res)
    written[res.get("event_id")] = p
stored = dict(query("SELECT event_id, payload FROM outbox_event"))
r = Relay(ex, batch=50).start()
ok(wait_until(lambda: count_in("outbox_event", "event_id", list(written), "AND status = 'PUBLISHED'") == len(written),
              timeout=30), "the relay published every payload")
bodies = {}
for _, props, body in drain_with_keys(q):
    bodies[json.loads(body)["id"]] = body.decode()
is_eq(sorted(bodies), sorted(written), "one message per event")
bad = [(eid, bodies[eid][-120:]) for eid in written
       if eid in bodies and not bodies[eid].endswith('"data":' + stored[eid] + "}")]
ok(not bad, "each body's data is the payload text exactly as the server returned it", detail=bad)
by_id = {x.get("id"): x for x in sdk_read(list(bodies.values()))}
big = {x.get("id"): x for x in sdk_read(list(bodies.values()), big_int=True)}
ok(all(x["ok"] for x in by_id.values()) and len(by_id) == len(written), "the SDK accepts every message",
   detail=list(by_id.values()))
ok(all(x.get("data_type") == "object" for x in by_id.values()), "data is never a string to the SDK",
   detail=[(x.get("id"), x.get("data_type")) for x in by_id.values()])
ids = {p: e for e, p in written.items()}
is_eq(by_id[ids[PAYLOADS[4]]]["data"], '{"price":19.99,"x":0.1,"neg":0,"e":1.5e-7}',
      "decimals reach the SDK with their own digits (19.99 stays 19.99)")
is_eq(big[ids[PAYLOADS[0]]]["data"], '{"n":"123456789012345678901234567890"}', "big-int mode: 30-digit integer exact")
is_eq(big[ids[PAYLOADS[1]]]["data"], '{"u64":"18446744073709551615"}', "big-int mode: UINT64_MAX exact")
is_eq(by_id[ids[PAYLOADS[3]]]["data"], '{"s":"a\\u0000b"}', "a \\u0000 escape arrives as a NUL in a string")
is_eq(json.loads(by_id[ids[PAYLOADS[6]]]["data"])["quote"], "it's \"quoted\" \\ and \u00e9 / \U0001F600",
      "escapes and non-ASCII arrive as written")

# --- rows written around the helper: FAILED, logged, counted, never published
bad_type = str(uuid.uuid4())
bad_subject = str(uuid.uuid4())
good = str(uuid.uuid4())
for eid, atype, aid in [(bad_type, "ORDER X", "1"), (bad_subject, "ORDER", ""), (good, "ORDER", "2")]:
    query("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version, payload,"
          " status, created_at) VALUES (%s, %s, %s, 'ORDER_ACCEPTED', 1, '{}', 'PENDING', UTC_TIMESTAMP(6))",
          (eid, atype, aid))
ok(wait_until(lambda: count_in("outbox_event", "event_id", [good], "AND status = 'PUBLISHED'") == 1, timeout=30),
   "a valid row next to invalid ones is published")
ok(wait_until(lambda: count_in("outbox_event", "event_id", [bad_type, bad_subject], "AND status = 'FAILED'") == 2,
              timeout=30), "the invalid rows are marked FAILED")
logged = {l["event_id"]: l["msg"] for l in r.outcomes("invalid")}
ok("aggregate_type" in logged.get(bad_type, "") and "aggregate_id" in logged.get(bad_subject, ""),
   "each is logged with its event_id and the reason", detail=logged)
st, metrics = r.get("/metrics")
m = re.search(r"^sidecar_relay_invalid_total\{[^}]*\} (\d+)$", metrics, re.M)
is_eq(int(m.group(1)) if m else None, 2, "and counted in sidecar_relay_invalid_total")
got = [json.loads(b)["id"] for _, _, b in drain_with_keys(q)]
is_eq(got, [good], "nothing was published for the invalid rows")
is_eq(query("SELECT publish_attempts, lease_owner FROM outbox_event WHERE event_id = %s", (bad_type,))[0], (1, None),
      "a FAILED row is claimed once and never again")
is_eq(r.stop(), 0, "clean stop")
clear_outbox()
done()
