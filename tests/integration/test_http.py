"""/metrics, /healthz and /readyz of the consumer and the relay."""
import re

from harness import *


def metric(text, name, **labels):
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


sc = Sidecar(consumer_extra={"workers": 2})
ok(sc.start(), "sidecar started")
ok(wait_until(lambda: sc.http_port(), timeout=10), f"HTTP port logged ({sc.http_port()})")
is_eq(sc.get("/healthz")[0], 200, "/healthz 200")
ok(wait_until(lambda: sc.get("/readyz")[0] == 200, timeout=10), "/readyz 200 once both workers consume")
events = new_events(50)
publish_events(sc.exchange, events)
publish_events(sc.exchange, events[:5])
wait_until(lambda: len(sc.outcomes("applied")) + len(sc.outcomes("duplicate")) >= 55, timeout=30)
st, text = sc.get("/metrics")
is_eq(st, 200, "/metrics 200")
is_eq(metric(text, "sidecar_messages_total", consumer=sc.name, outcome="applied"), 50.0, "applied counter")
is_eq(metric(text, "sidecar_messages_total", consumer=sc.name, outcome="duplicate"), 5.0, "duplicate counter")
is_eq(metric(text, "sidecar_messages_total", consumer=sc.name, outcome="malformed"), 0.0, "malformed counter present at 0")
is_eq(metric(text, "sidecar_receive_to_commit_seconds_count", consumer=sc.name), 50.0, "receive-to-commit histogram counts applied")
ok((metric(text, "sidecar_batch_size_count", consumer=sc.name) or 0) >= 1, "batch size histogram")
ok((metric(text, "sidecar_handler_seconds_count", consumer=sc.name) or 0) >= 1, "handler seconds histogram")
ok((metric(text, "sidecar_commit_seconds_count", consumer=sc.name) or 0) >= 1, "commit seconds histogram")
is_eq(metric(text, "sidecar_connected", consumer=sc.name, server="mysql"), 2.0, "both workers connected to MySQL")
is_eq(metric(text, "sidecar_consuming", consumer=sc.name), 2.0, "both workers consuming")
ok("# TYPE sidecar_receive_to_commit_seconds histogram" in text and 'le="+Inf"' in text, "Prometheus histogram format")
is_eq(sc.get("/nope")[0], 404, "unknown path 404")
is_eq(sc.stop(), 0, "clean stop")

# Not ready while the database cannot be reached; alive all the same.
down = Sidecar(mysql_url="mysql://sidecar:sidecar@127.0.0.1:1/app")
down.start(wait=False)
ok(wait_until(lambda: down.http_port(), timeout=10), "HTTP up with the database down")
st, body = down.get("/readyz")
ok(st == 503 and "0 of 1 workers consuming" in body, f"/readyz 503 and says why ({st} {body.strip()})")
is_eq(down.get("/healthz")[0], 200, "/healthz still 200")
down.stop()

# The relay's metrics.
clear_outbox()
ex = "http-" + suffix()
q = bound_queue(ex)
ids = insert_outbox(30)
r = Relay(ex).start()
wait_until(lambda: count_in("outbox_event", "event_id", ids, "AND status = 'PUBLISHED'") == 30, timeout=30)
ok(wait_until(lambda: r.http_port(), timeout=10), "relay HTTP port logged")
ok(wait_until(lambda: r.get("/readyz")[0] == 200, timeout=10), "relay /readyz 200")
st, text = r.get("/metrics")
is_eq(metric(text, "sidecar_relay_published_total", worker=r.worker_id), 30.0, "relay published counter")
ok((metric(text, "sidecar_relay_confirm_seconds_count", worker=r.worker_id) or 0) >= 1, "confirm seconds histogram")
ok(metric(text, "sidecar_relay_pending", worker=r.worker_id) is not None, "pending gauge present")
ok(metric(text, "sidecar_relay_oldest_pending_age_seconds", worker=r.worker_id) is not None, "oldest pending age gauge present")
r.stop()

# A port in use is a clear start-up error.
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
busy = s.getsockname()[1]
rc, out = run_sidecar_cmd(["consume"], dict(Sidecar().config, http={"listen": f"127.0.0.1:{busy}"}))
ok(rc == 1 and f"cannot listen on 127.0.0.1:{busy}" in out, f"a busy http.listen stops start-up ({rc}: {out.strip()[:160]})")
done()
