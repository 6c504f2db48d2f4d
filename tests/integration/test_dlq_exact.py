"""`sidecar dlq replay` puts back exactly what was first delivered, and says
truly what it did; `--id` takes the id the logs show.

1. A message the quorum guard dead-lettered (x-delivery-count over
   max_attempts 1) comes back with fresh attempts: the copy carries neither
   x-delivery-count nor x-sidecar-attempts (read from a classic stand-in for
   the consumer's queue, which keeps headers as published, as RabbitMQ 4's
   quorum queues do on a first delivery), and on the real quorum queue the
   handler runs.
2. Every header is kept (100 of them, past the old 64) except the broker's
   death bookkeeping (x-death, x-first-death-*, x-last-death-*), the delivery
   count and the sidecar's attempt bookkeeping; other properties unchanged, no
   expiration.
3. `--id` matches the canonical id (as logged and as `inspect` takes it)
   whatever RFC 4122 spelling the body used, and a plain message id.
4. The connection lost right after the replay's confirm: the copy is in the
   consumer's queue and the DLQ copy stays; the tool says so (not "not
   replayed"), exit 1, and a second replay is harmless (the consumer dedups)."""
import subprocess
import uuid

from harness import *


def cmd(sc, *args, env=None):
    return run_sidecar_cmd(["dlq", *args], sc.config, env=env)


def put_in(queue, body, headers=None, **props):
    conn = amqp()
    ch = conn.channel()
    ch.confirm_delivery()
    ch.basic_publish("", queue, body, pika.BasicProperties(headers=headers, **props))
    conn.close()


def get_one(queue):
    conn = amqp()
    ch = conn.channel()
    m, props, body = ch.basic_get(queue, auto_ack=True)
    conn.close()
    return (props, body) if m else (None, None)


def declare(queue, quorum=False):
    conn = amqp()
    conn.channel().queue_declare(queue, durable=True,
                                 arguments={"x-queue-type": "quorum"} if quorum else None)
    conn.close()


def delete(queue):
    conn = amqp()
    conn.channel().queue_delete(queue)
    conn.close()


# --- 1. the quorum guard's dead letters come back with fresh attempts --------
sc = Sidecar(consumer_extra={"queue_type": "quorum", "max_attempts": 1, "prefetch": 1})
bound_queue(sc.exchange, queue=sc.queue, quorum=True)
e1, e2 = str(uuid.uuid4()), str(uuid.uuid4())
publish_events(sc.exchange, [(e1, "8001"), (e2, "8002")])
codes = []
for run in range(2):  # dies on e1; then e1 is over the limit, dies on e2
    sc.start(env={"SIDECAR_FAULT": "consumer.after_insert"}, wait=False)
    codes.append(sc.wait_exit(30))
is_eq(codes, [86, 86], "the process died on each event once")
ok(sc.start(), "restarted without the fault")
ok(wait_until(lambda: queue_depth(sc.dlq) == 2, timeout=30), "both went to the DLQ")
guard = [l.get("event_id") for l in sc.outcomes("dead_lettered") if "x-delivery-count" in l.get("msg", "")]
is_eq(sorted(guard), sorted([e1, e2]), "both dead-lettered by the x-delivery-count guard")
is_eq(sc.stop(), 0, "clean stop")

delete(sc.queue)
declare(sc.queue)  # classic stand-in: keeps what the replay publishes as published
rc, out = cmd(sc, "replay", sc.name, "--id", e1)
ok(rc == 0 and "replayed 1 of 1" in out, f"replayed e1 ({out.strip()[-200:]})")
props, body = get_one(sc.queue)
h = (props.headers or {}) if props else {}
ok(props is not None and json.loads(body)["id"] == e1, "the copy is in the consumer's queue")
ok("x-delivery-count" not in h, f"the copy carries no x-delivery-count (got {h.get('x-delivery-count')!r})")
is_eq(sorted(k for k in h if k.startswith("x-sidecar-") and "original" not in k), [],
      "nor the sidecar's attempt, reason, consumer and failed-at headers")
delete(sc.queue)
ok(sc.start(), "the consumer again, on its quorum queue")
rc, out = cmd(sc, "replay", sc.name, "--id", e2)
ok(rc == 0 and "replayed 1 of 1" in out, f"replayed e2 ({out.strip()[-200:]})")
applied = wait_until(lambda: [l for l in sc.outcomes("applied") if l.get("event_id") == e2], timeout=30)
ok(applied and applied[0].get("attempt") == 1, "the handler ran on it, at attempt 1", detail=applied)
is_eq(count_in("notification_job", "event_id", [e2]), 1, "its effect")
is_eq(queue_depth(sc.dlq), 0, "the DLQ is empty")

# --- 3. --id is the id the logs show ----------------------------------------
loud = str(uuid.uuid4())
conn = amqp()
ch = conn.channel()
ch.confirm_delivery()
publish(ch, sc.exchange, "ORDER_ACCEPTED", event_body("{" + loud.upper() + "}", subject="abc"))
conn.close()
dead = wait_until(lambda: [l for l in sc.outcomes("dead_lettered") if l.get("event_id") == loud], timeout=30)
ok(dead, "the consumer dead-lettered an event whose body id is in braces, uppercase, and logged it canonical")
rc, out = cmd(sc, "show", sc.name, "--id", loud)
ok(rc == 0 and "event " + loud in out, "dlq show --id <logged id> finds it", detail=out)
rc, out = cmd(sc, "list", sc.name)
ok(rc == 0 and loud in out and loud.upper() not in out, "dlq list shows the canonical id", detail=out)
rc, out = run_sidecar_cmd(["inspect", loud, "--json"], dict(sc.config, mysql={"url": os.environ["SC_TEST_MYSQL_ADMIN_URL"]}))
ok(rc in (0, 1) and "expected an EVENT_ID" not in out, "inspect takes the same id")
is_eq(sc.stop(), 0, "clean stop")

cx = Sidecar()  # classic; never started: its queues are declared here
bound_queue(cx.exchange, queue=cx.queue)
declare(cx.dlq)
u1, u2, u3, u4 = (str(uuid.uuid4()) for _ in range(4))
put_in(cx.dlq, event_body(u1.upper()))
put_in(cx.dlq, event_body("urn:uuid:" + u2))
put_in(cx.dlq, b'{"orderId": 5}', message_id="order-42")        # plain: its id is the message_id
put_in(cx.dlq, b"not json", message_id="{" + u3.upper() + "}")
put_in(cx.dlq, event_body(u4))
rc, out = cmd(cx, "list", cx.name)
ok(rc == 0 and all(u in out for u in (u1, u2, u3, u4, "order-42")), "list shows each id canonical", detail=out)
for want, label in ((u1, "uppercase body id"), ("{" + u1.upper() + "}", "--id itself in another spelling"),
                    (u2, "urn:uuid: body id"), ("order-42", "plain message id"), (u3, "message_id only")):
    rc, out = cmd(cx, "show", cx.name, "--id", want)
    is_eq((rc, out.count("\nevent ") + out.startswith("event ")), (0, 1), f"show --id matches the {label}")
rc, out = cmd(cx, "replay", cx.name, "--all")
ok(rc == 0 and "replayed 5 of 5" in out, "replay --all", detail=out)
drain(cx.queue)
is_eq(queue_depth(cx.dlq), 0, "DLQ empty")

# --- 2. every header but the death and attempt bookkeeping -------------------
rid = str(uuid.uuid4())
custom = {f"h-{i:03d}": (f"value {i}" if i % 3 else i) for i in range(100)}
custom["h-table"] = {"nested": "yes", "n": 7}
custom["h-flag"] = True
bookkeeping = {
    "x-death": [{"count": 2, "reason": "rejected", "queue": cx.queue, "exchange": "",
                 "routing-keys": [cx.queue]}],
    "x-first-death-queue": cx.queue, "x-first-death-reason": "rejected", "x-first-death-exchange": "",
    "x-last-death-queue": cx.queue, "x-last-death-reason": "expired", "x-last-death-exchange": "",
    "x-delivery-count": 7,
    "x-sidecar-reason": "rejected by handler: test", "x-sidecar-attempts": 3,
    "x-sidecar-consumer": cx.name, "x-sidecar-failed-at": "2026-01-01T00:00:00.000000Z",
    "x-sidecar-last-error": "earlier",
}
route = {"x-sidecar-original-exchange": "orders", "x-sidecar-original-routing-key": "ORDER_ACCEPTED"}
body = event_body(rid, subject="8100")
put_in(cx.dlq, body, headers={**bookkeeping, **route, **custom}, message_id=rid, type="ORDER_ACCEPTED",
       content_type="application/cloudevents+json", correlation_id="corr-1", app_id="shop",
       timestamp=1700000000, delivery_mode=2, expiration="600000")
rc, out = cmd(cx, "replay", cx.name, "--id", rid)
ok(rc == 0 and "replayed 1 of 1" in out, f"replayed ({out.strip()[-200:]})")
props, got = get_one(cx.queue)
ok(props is not None and got == body.encode(), "the copy's body is unchanged")
want = {**custom, **route}
hdrs = props.headers or {}
is_eq(sorted(set(want) - set(hdrs)), [], "no header lost (102 custom and the original route)")
is_eq(sorted(set(hdrs) - set(want)), [], "no bookkeeping header left")
ok(all(hdrs.get(k) == v for k, v in want.items()), "each header's value unchanged",
   detail={k: (v, hdrs.get(k)) for k, v in want.items() if hdrs.get(k) != v})
is_eq((props.message_id, props.type, props.content_type, props.correlation_id, props.app_id,
       props.timestamp, props.delivery_mode, props.expiration),
      (rid, "ORDER_ACCEPTED", "application/cloudevents+json", "corr-1", "shop", 1700000000, 2, None),
      "properties unchanged, without the expiration")

# --- 4. the connection lost right after the replay's confirm ------------------
lost = str(uuid.uuid4())
put_in(cx.dlq, event_body(lost, subject="8200"), message_id=lost, delivery_mode=2,
       content_type="application/cloudevents+json")
d = tempfile.mkdtemp(prefix="sc-it-")
cfg_path, err_path = os.path.join(d, "c.json"), os.path.join(d, "replay.err")
with open(cfg_path, "w") as f:
    json.dump(cx.config, f)
p = subprocess.Popen([SIDECAR, "dlq", "replay", cx.name, "--id", lost, "-c", cfg_path],
                     env=dict(os.environ, SIDECAR_FAULT="dlq.replay_confirmed", SIDECAR_FAULT_PAUSE_MS="15000"),
                     stdout=subprocess.PIPE, stderr=open(err_path, "w"), text=True)
ok(wait_until(lambda: "pausing" in open(err_path).read(), timeout=15), "paused right after the confirm")


def dlq_connections():
    lines = rabbitmqctl("list_connections", "pid", "client_properties").stdout.splitlines()
    return [l.split("\t")[0] for l in lines if '{"connection_name","sidecar dlq"}' in l]


pids = dlq_connections()
is_eq(len(pids), 1, "one broker connection of the replay")
for pid in pids:
    rabbitmqctl("close_connection", pid, "test: connection lost after the confirm")
out, _ = p.communicate(timeout=30)
out += open(err_path).read()
is_eq(p.returncode, 1, "exit 1: the DLQ copy may remain")
ok(f"replayed {lost}" in out and "may remain" in out and "not replayed" not in out,
   "the report says it was replayed and its DLQ copy may remain", detail=out)
ok(wait_until(lambda: queue_depth(cx.queue) == 1, timeout=10), "the copy is in the consumer's queue")
ok(wait_until(lambda: queue_depth(cx.dlq) == 1, timeout=10), "and the DLQ copy stayed")
ok(cx.start(), "the consumer")
ok(wait_until(lambda: [l for l in cx.outcomes("applied") if l.get("event_id") == lost], timeout=30),
   "applied the replayed copy")
rc, out = cmd(cx, "replay", cx.name, "--id", lost)
ok(rc == 0 and "replayed 1 of 1" in out, f"replaying the DLQ copy again ({out.strip()[-200:]})")
ok(wait_until(lambda: [l for l in cx.outcomes("duplicate") if l.get("event_id") == lost], timeout=30),
   "is harmless: the consumer takes it for a duplicate")
is_eq(count_in("notification_job", "event_id", [lost]), 1, "one effect")
is_eq(queue_depth(cx.dlq), 0, "the DLQ is empty")
is_eq(cx.stop(), 0, "clean stop")
done()
