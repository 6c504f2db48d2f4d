"""Log once, at the level that decides (issue 14 item 5): a failure is
reported by the one function that decides what happens next, not again by
the function that found it. Every daemon line goes to stderr, so a refusal
printed both as a plain line and as a JSON line is the same thing twice on
the same stream."""
import copy
import socket

from harness import *


def count(out, text):
    return out.count(text)


def json_lines(out):
    lines = []
    for line in out.splitlines():
        if line.startswith("{"):
            try:
                lines.append(json.loads(line))
            except ValueError:
                pass
    return lines


base = {"amqp": {"url": os.environ["SC_TEST_AMQP_URL"]},
        "mysql": {"url": os.environ["SC_TEST_MYSQL_URL"]},
        "http": {"listen": "127.0.0.1:0"},
        "consumers": [{"name": "log-once-" + suffix(), "handler": HANDLER}]}

# ---- 1. a bad handler refuses start-up with exactly one line ---------------
bad_dir = os.path.join(os.path.dirname(os.path.dirname(TEST_HANDLER)), "unit")
c = copy.deepcopy(base)
c["consumers"][0]["handler"] = os.path.join(bad_dir, "bad_abi.so")
rc, out = run_sidecar_cmd(["consume"], c)
is_eq(rc, 2, "bad handler: exit 2")
is_eq(count(out, "abi_version: expected 1, got 2"), 1,
      f"bad handler: the refusal is printed once ({out.strip()[:400]})")
errs = [l for l in json_lines(out) if l.get("level") == "error"]
ok(len(errs) == 1 and "consumers[0].handler" in errs[0].get("msg", ""),
   "bad handler: one JSON line at level error, naming the key", detail=out)

# ---- 2. an http.listen that cannot bind refuses start-up once ---------------
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
busy = "127.0.0.1:%d" % s.getsockname()[1]
c = copy.deepcopy(base)
c["http"]["listen"] = busy
rc, out = run_sidecar_cmd(["consume"], c)
s.close()
is_eq(rc, 1, "http.listen in use: exit 1")
is_eq(count(out, "cannot listen on " + busy), 1,
      f"http.listen in use: the refusal is printed once ({out.strip()[:400]})")

# ---- 3. an unreachable database: one warn per attempt, with its number -----
c = copy.deepcopy(base)
c["mysql"]["url"] = "mysql://sidecar:sidecar@127.0.0.1:1/app"
d = tempfile.mkdtemp(prefix="sc-it-")
p = os.path.join(d, "c.json")
json.dump(c, open(p, "w"))
log = os.path.join(d, "out.log")
proc = subprocess.Popen([SIDECAR, "consume", "-c", p], stdout=open(log, "w"), stderr=subprocess.STDOUT)
wait_until(lambda: open(log).read().count("database connect failed") >= 3 or proc.poll() is not None,
           timeout=15)
proc.send_signal(signal.SIGTERM)
try:
    proc.wait(15)
except subprocess.TimeoutExpired:
    proc.kill()
out = open(log).read()
fails = [l for l in json_lines(out) if "database connect failed" in l.get("msg", "")]
ok(len(fails) >= 3 and all(l.get("level") == "warn" for l in fails),
   f"unreachable database: one warn per attempt ({len(fails)} lines)", detail=out[-800:])
ok(all(f"attempt {i + 1}, retrying in " in l.get("msg", "") for i, l in enumerate(fails)),
   "unreachable database: each line says its attempt number and the delay",
   detail=[l.get("msg") for l in fails[:4]])
is_eq(len(set(l.get("msg") for l in fails)), len(fails), "unreachable database: no identical repeats")

# ---- 4. the broker closes the publishing connection: one line, with why ----
sc = Sidecar()
ok(sc.start(), "sidecar started")


def publish_connection():
    r = rabbitmqctl("list_connections", "pid", "client_properties")
    pids = [line.split("\t")[0] for line in r.stdout.splitlines()
            if f"sidecar publish {sc.name}" in line]
    return pids[0] if pids else None


pid = wait_until(publish_connection, timeout=15)
closed = pid is not None and rabbitmqctl("close_connection", pid, "log-once test").returncode == 0
ok(closed, "closed the publishing connection")
ok(wait_until(lambda: sc.text().count("log-once test") >= 1 and
              sum(l.get("msg", "").startswith("worker") for l in sc.lines()) >= 2, timeout=30),
   "the loss was noticed and the worker reconnected")
text = sc.text()
is_eq(count(text, "log-once test"), 1, "publisher connection closed: the reason is logged once")
lost = [l for l in sc.lines() if "log-once test" in l.get("msg", "")]
ok(len(lost) == 1 and lost[0].get("consumer") == sc.name and lost[0].get("level") == "warn"
   and "publisher connection lost" in lost[0].get("msg", ""),
   "publisher connection closed: one warn naming the consumer and the reason", detail=lost)
is_eq(sc.stop(), 0, "clean stop")

# ---- 5. check: a broker node that is down is reported once ----------------
c = copy.deepcopy(base)
c["amqp"]["url"] = [os.environ["SC_TEST_AMQP_URL"], "amqp://guest:guest@127.0.0.3:1/"]
rc, out = run_sidecar_cmd(["check"], c)
is_eq(rc, 1, "check with a broker node down: exit 1")
# The consumer's connect starts at the node after the last one used (node 1,
# down) and must fail over to node 0, not try node 1 twice.
ok(f"amqp: consumer {c['consumers'][0]['name']}: queue" in out,
   "check: the consumer's connect fails over to the node that is up", detail=out[-600:])
down = [line for line in out.splitlines() if "127.0.0.3" in line]
is_eq(len(down), 1, f"check: the node that is down is reported on one line ({out.strip()[:600]})")
done()
