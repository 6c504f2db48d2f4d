"""Bad configuration and bad handlers stop start-up with exit 2 and a message
that names the key or says expected/got; `check` and `version` work."""
import copy

from harness import *

base = {"amqp": {"url": os.environ["SC_TEST_AMQP_URL"]},
        "mysql": {"url": os.environ["SC_TEST_MYSQL_URL"]},
        "consumers": [{"name": "refusal-" + suffix(), "handler": HANDLER}]}

c = copy.deepcopy(base)
c["consumers"][0]["prefetchh"] = 10
rc, out = run_sidecar_cmd(["consume"], c)
is_eq(rc, 2, "unknown key: exit 2")
ok("consumers[0].prefetchh" in out, f"unknown key named by its path ({out.strip()})")

c = copy.deepcopy(base)
c["consumers"][0]["max_attempts"] = "five"
rc, out = run_sidecar_cmd(["check"], c)
is_eq(rc, 2, "mistyped key: exit 2")
ok("consumers[0].max_attempts: expected integer, got string" in out, f"mistyped key named ({out.strip()})")

rc, out = run_sidecar_cmd(["consume"], "{not json")
is_eq(rc, 2, "invalid JSON: exit 2")

bad_dir = os.path.join(os.path.dirname(os.path.dirname(TEST_HANDLER)), "unit")
for so, want in [("bad_abi.so", "abi_version: expected 1, got 2"),
                 ("bad_size.so", "struct_size: expected at least 40, got 16"),
                 ("bad_symbol.so", "expected an exported function sc_handler_v1, got none"),
                 ("bad_handle.so", "handle: expected a function, got NULL")]:
    c = copy.deepcopy(base)
    c["consumers"][0]["handler"] = os.path.join(bad_dir, so)
    rc, out = run_sidecar_cmd(["consume"], c)
    is_eq(rc, 2, f"{so}: refused with exit 2")
    ok(want in out and so in out, f"{so}: message names the file and expected/got ({out.strip()[:200]})")

c = copy.deepcopy(base)
c["consumers"][0]["handler"] = "/nonexistent/handler.so"
rc, out = run_sidecar_cmd(["consume"], c)
is_eq(rc, 2, "missing handler file: exit 2")
ok("/nonexistent/handler.so" in out, "missing handler file named")

# The harness itself: start() of a sidecar that exits during start-up (here
# exit 2, its handler file is missing) must report failure, not readiness.
dead = Sidecar(handler="/nonexistent/handler.so")
ok(dead.start() is False and not dead.alive() and dead.proc.returncode == 2,
   f"harness: Sidecar.start() fails when the process already exited (exit {dead.proc.returncode})")

rc, out = run_sidecar_cmd(["check"], base)
is_eq(rc, 0, f"check with a good config: exit 0 ({out.strip()[:300]})")
ok("mysql: connected" in out and "notification_job loaded" in out, "check reports both servers and the handler")

c = copy.deepcopy(base)
c["mysql"]["url"] = "mysql://sidecar:wrong@127.0.0.1:%s/app" % os.environ["SC_TEST_MYSQL_PORT"]
rc, out = run_sidecar_cmd(["check"], c)
is_eq(rc, 1, "check with a wrong password: exit 1")
ok("wrong" not in out, "the password is not printed")

# The docker compose config is the same format: check it against these servers.
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
compose_cfg = json.load(open(os.path.join(root, "examples", "compose", "sidecar.json")))
compose_cfg["consumers"][0]["handler"] = HANDLER
compose_cfg["consumers"][0]["name"] = compose_cfg["consumers"][0]["queue"] = "compose-" + suffix()
compose_cfg["consumers"][0]["dead_letter_queue"] = compose_cfg["consumers"][0]["name"] + ".dlq"
rc, out = run_sidecar_cmd(["check"], compose_cfg, env={"SIDECAR_AMQP_URL": os.environ["SC_TEST_AMQP_URL"],
                                                        "SIDECAR_MYSQL_URL": os.environ["SC_TEST_MYSQL_URL"]})
is_eq(rc, 0, f"the docker compose config passes check with the URLs from the environment ({out.strip()[:200]})")

r = subprocess.run([SIDECAR, "version"], capture_output=True, text=True)
ok(r.returncode == 0 and r.stdout.startswith("sidecar "), f"version ({r.stdout.strip()})")
r = subprocess.run([SIDECAR, "frobnicate"], capture_output=True, text=True)
is_eq(r.returncode, 2, "unknown command: exit 2")
r = subprocess.run([SIDECAR, "consume"], capture_output=True, text=True)
is_eq(r.returncode, 2, "missing -c: exit 2")

# SIGTERM while idle and while servers are unreachable: clean exit 0.
c = copy.deepcopy(base)
c["mysql"]["url"] = "mysql://sidecar:sidecar@127.0.0.1:1/app"
d = tempfile.mkdtemp()
p = os.path.join(d, "c.json")
json.dump(c, open(p, "w"))
log = os.path.join(d, "out.log")
proc = subprocess.Popen([SIDECAR, "consume", "-c", p], stdout=open(log, "w"), stderr=subprocess.STDOUT)
# Retrying means: at least two failed connects logged, and still running.
ok(wait_until(lambda: open(log).read().count("database connect failed") >= 2 or proc.poll() is not None,
              timeout=15) and proc.poll() is None,
   "with the database unreachable the sidecar keeps retrying instead of exiting")
proc.send_signal(signal.SIGTERM)
try:
    rc = proc.wait(15)
except subprocess.TimeoutExpired:
    proc.kill()
    rc = None
out = open(log).read()
is_eq(rc, 0, "SIGTERM during reconnect backoff: exit 0")
ok("database connect failed" in out, "the connect failure was logged")
done()
