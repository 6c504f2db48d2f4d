"""otel.endpoint: the relay's publish and the consumer's transaction of an
event with trace context become OTLP/HTTP JSON spans, checked by an
independent decoder (the OpenTelemetry JS project's protobuf code of the
official OTLP definitions: every member known, verify() passes, a protobuf
wire round trip): the producer's trace id, each span a child of the
producer's span, the consumer's span id the one in its log lines, the
messaging.* attributes and the outcome. Events without trace context make
no span. A collector that is down costs only the dropped-span counter: the
events are applied all the same."""
import http.server
import re
import socket
import subprocess
import threading
import time

from envelope_lib import *
from node_deps import node_modules

HERE = os.path.dirname(os.path.abspath(__file__))
NODE = node_modules()
TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"
TP = f"00-{TRACE}-{PARENT}-01"


class Collector(http.server.BaseHTTPRequestHandler):
    bodies, paths = [], []

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        Collector.bodies.append(self.rfile.read(n).decode())
        Collector.paths.append((self.path, self.headers.get("Content-Type")))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Collector)
threading.Thread(target=srv.serve_forever, daemon=True).start()
endpoint = f"http://127.0.0.1:{srv.server_address[1]}/v1/traces"

rc, out = run_sidecar_cmd(["check"], {"amqp": {"url": os.environ["SC_TEST_AMQP_URL"]},
                                      "mysql": {"url": os.environ["SC_TEST_MYSQL_URL"]},
                                      "otel": {"endpoint": "https://collector:4318"}})
ok(rc == 2 and "otel.endpoint" in out, "an endpoint that is not http:// is refused, naming the key", detail=out)

seen_table()
ex = "otel-" + suffix()
sc = Sidecar(handler=TEST_HANDLER, exchange=ex, extra={"otel": {"endpoint": endpoint}, "log": {"level": "debug"}})
ok(sc.start(), "a consumer exporting spans started")
clear_outbox()
ids = []
for i, trace in enumerate([[TP], [TP, "rojo=1"], []]):
    rcp, lines, err = run_order_producer(["--event", "ORDER", str(10 + i), "KEEP_OTEL", '{"i":%d}' % i, *trace],
                                         env={"SIDECAR_MYSQL_URL": os.environ["SC_TEST_MYSQL_PRODUCER_URL"]})
    ids.append(lines[0]["event_id"] if lines else None)
traced, untraced = ids[:2], ids[2]
r = Relay(ex)
r.config["otel"] = {"endpoint": endpoint}
with open(r.config_path, "w") as f:
    json.dump(r.config, f)
t0 = time.time_ns()
r.start()
ok(wait_until(lambda: all(seen(e) for e in ids), timeout=30), "every event applied")
is_eq((r.stop(), sc.stop()), (0, 0), "clean stops (the exporters send what they hold)")
t1 = time.time_ns()
ok(all(p == ("/v1/traces", "application/json") for p in Collector.paths) and Collector.paths,
   "POSTs to the endpoint's path as application/json", detail=Collector.paths)

p = subprocess.run(["node", os.path.join(HERE, "test_otel_export.js")], input=json.dumps(Collector.bodies),
                   env=dict(os.environ, NODE_PATH=NODE), capture_output=True, text=True, timeout=60)
if p.returncode != 0:
    bail("node failed: " + p.stderr[-800:])
spans = [json.loads(l) for l in p.stdout.splitlines()]
ok(spans and all(s["verify_error"] is None and not s["unknown"] and s["wire_bytes"] > 0 for s in spans),
   "the official OTLP definitions take every request: verify passes, no unknown member, wire round trip",
   detail=[(s["verify_error"], s["unknown"]) for s in spans])
by = {}
for s in spans:
    by.setdefault((s["attributes"].get("messaging.message.id"), s["kind"]), []).append(s)
ok(not any(k[0] == untraced for k in by), "no span for the event without trace context", detail=list(by))
consumer_spans = {l.get("event_id"): l.get("span_id") for l in sc.lines() if l.get("outcome") == "applied"}
for eid in traced:
    pub = by.get((eid, 4), [])
    proc = by.get((eid, 5), [])
    if not is_eq((len(pub), len(proc)), (1, 1), f"{eid[:8]}: one publish (PRODUCER) and one process (CONSUMER) span"):
        continue
    pub, proc = pub[0], proc[0]
    ok(pub["traceId"] == TRACE == proc["traceId"] and pub["parentSpanId"] == PARENT == proc["parentSpanId"],
       f"{eid[:8]}: both in the producer's trace, children of the producer's span", detail=(pub, proc))
    ok(re.match(r"^[0-9a-f]{16}$", pub["spanId"]) and pub["spanId"] not in (PARENT, proc["spanId"]),
       f"{eid[:8]}: the relay's span has an id of its own", detail=pub)
    is_eq(proc["spanId"], consumer_spans.get(eid), f"{eid[:8]}: the consumer's span id is the span_id of its log lines")
    ok(pub["name"] == f"{ex} publish" and pub["resource"].get("service.name") == "sidecar-relay"
       and pub["attributes"] == {"messaging.system": "rabbitmq", "messaging.operation.type": "send",
                                 "messaging.operation.name": "publish", "messaging.destination.name": ex,
                                 "messaging.message.id": eid, "messaging.rabbitmq.destination.routing_key": "KEEP_OTEL",
                                 "sidecar.outcome": "published"} and pub["status"] == 1,
       f"{eid[:8]}: publish span name, resource, messaging attributes, outcome published, status OK", detail=pub)
    ok(proc["name"] == f"{sc.queue} process" and proc["resource"].get("service.name") == "sidecar-consume"
       and proc["attributes"] == {"messaging.system": "rabbitmq", "messaging.operation.type": "process",
                                  "messaging.operation.name": "process", "messaging.destination.name": sc.queue,
                                  "messaging.message.id": eid, "messaging.consumer.group.name": sc.name,
                                  "sidecar.outcome": "applied"} and proc["status"] == 1,
       f"{eid[:8]}: process span name, resource, messaging attributes, outcome applied, status OK", detail=proc)
    ok(all(t0 - 10**9 <= int(s["start"]) <= int(s["end"]) <= t1 + 10**9 for s in (pub, proc))
       and int(pub["start"]) <= int(proc["end"]),
       f"{eid[:8]}: start and end in Unix ns within the run, publish before the process ends", detail=(pub, proc))

# --- a dead collector: nothing but a counter ---------------------------------
s = socket.socket()
s.bind(("127.0.0.1", 0))
dead_port = s.getsockname()[1]
s.close()  # nobody listens there
dead = Sidecar(handler=TEST_HANDLER, extra={"otel": {"endpoint": f"http://127.0.0.1:{dead_port}/v1/traces"}})
ok(dead.start(), "a consumer with a dead collector started")
pubr = Publisher()
dead_ids = [str(uuid.uuid4()) for _ in range(20)]
for eid in dead_ids:
    pubr.publish(dead.exchange, "KEEP_OTEL", json.dumps({"specversion": "1.0", "id": eid, "type": "KEEP_OTEL",
                                                         "source": "S", "traceparent": TP, "data": {}}),
                 content_type="application/cloudevents+json", message_id=eid)
pubr.close()
ok(wait_until(lambda: all(seen(e) for e in dead_ids), timeout=30), "every event applied all the same")
ok(wait_until(lambda: metric_sum(dead.http_port(), r"^sidecar_otel_spans_dropped_total (\d+)$") >= len(dead_ids), timeout=15),
   "their spans are counted in sidecar_otel_spans_dropped_total")
is_eq(metric_sum(dead.http_port(), r"^sidecar_otel_spans_exported_total (\d+)$", default=-1), 0, "none exported")
warns = [l for l in dead.lines() if l.get("msg", "").startswith("otel: exporting") and "failed" in l["msg"]]
is_eq(len(warns), 1, "the failure is logged once, not per batch")
is_eq(dead.stop(), 0, "clean stop")
srv.shutdown()
clear_outbox()
done()
