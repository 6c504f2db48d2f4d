"""Each command needs only what it uses, and the two daemons can share a host
with their defaults.

1. `sidecar consume` and `sidecar relay` started on one host with no
   http.listen both come up: consume on 127.0.0.1:9464, relay on
   127.0.0.1:9466. (Before, both took 9464 and the second exited 1.) They run
   in a network namespace of their own, so the fixed ports cannot meet
   another test's listener on this machine; their servers are out of reach
   there, which they survive (they retry), and /healthz answers meanwhile.
2. `purge` and `try` run with a config that has no `amqp` section at all
   (they never connect to the broker); `check` and `dlq`, which do, still
   refuse it naming `amqp`; an `amqp` section that is there is still checked.
"""
import subprocess

from harness import *

# ---- 1. default ports, in a namespace of their own ---------------------------
INNER = r"""
import json, os, subprocess, sys, time, urllib.request
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
sidecar, consume_cfg, relay_cfg, logdir = sys.argv[1:5]
procs = {}
for cmd, cfg in (("consume", consume_cfg), ("relay", relay_cfg)):
    procs[cmd] = subprocess.Popen([sidecar, cmd, "-c", cfg], stdout=open(os.path.join(logdir, cmd + ".log"), "w"),
                                  stderr=subprocess.STDOUT)
out = {}
deadline = time.time() + 20
for cmd, port in (("consume", 9464), ("relay", 9466)):
    status = None
    while time.time() < deadline and status is None and procs[cmd].poll() is None:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=2) as r:
                status = r.status
        except OSError:
            time.sleep(0.1)
    out[cmd] = {"healthz": status, "alive": procs[cmd].poll() is None}
for p in procs.values():
    if p.poll() is None:
        p.terminate()
for cmd, p in procs.items():
    try:
        out[cmd]["exit"] = p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
        out[cmd]["exit"] = "killed"
print(json.dumps(out))
"""

d = tempfile.mkdtemp(prefix="sc-defaults-")
unreachable = {"amqp": {"url": "amqp://guest:guest@127.0.0.1:1/%2f"},
               "mysql": {"url": "mysql://sidecar:sidecar@127.0.0.1:1/app"}}
consume_cfg = dict(unreachable, consumers=[{"name": "defaults-" + suffix(), "handler": HANDLER}])
relay_cfg = dict(unreachable, relay={"exchange": "ex-defaults"})
paths = {}
for name, cfg in (("consume", consume_cfg), ("relay", relay_cfg)):
    paths[name] = os.path.join(d, name + ".json")
    with open(paths[name], "w") as f:
        json.dump(cfg, f)
try:
    # Unprivileged, a user namespace comes first (root inside it may make
    # the network namespace).
    userns = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    r = subprocess.run(["unshare", *userns, "--net", "/usr/bin/python3", "-c", INNER, SIDECAR,
                        paths["consume"], paths["relay"], d],
                       capture_output=True, text=True, timeout=90)
    res = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 and r.stdout.strip() else None
except (OSError, ValueError, subprocess.TimeoutExpired) as e:
    r, res = None, None
    diag(f"unshare failed: {e}")
# A machine where a namespace cannot be made fails this, never skips it.
ok(res is not None, "consume and relay ran in a network namespace of their own (unshare --net)",
   detail=(r.stdout + r.stderr) if r else "unshare not runnable")
res = res or {}


def log_of(name):
    p = os.path.join(d, name + ".log")
    return open(p).read() if os.path.exists(p) else ""


for name, port in (("consume", 9464), ("relay", 9466)):
    got = res.get(name, {})
    ok(got.get("healthz") == 200 and got.get("alive"),
       f"{name} with no http.listen serves /healthz on 127.0.0.1:{port} beside the other",
       detail=f"{got}\n{log_of(name)[-1500:]}")
    ok(f"127.0.0.1:{port}" in log_of(name), f"{name} logs where it listens (127.0.0.1:{port})",
       detail=log_of(name)[-1500:])
    is_eq(got.get("exit"), 0, f"{name} stops cleanly on SIGTERM")

# ---- 2. purge and try without a broker ----------------------------------------
admin_only = {"mysql": {"url": os.environ["SC_TEST_MYSQL_ADMIN_URL"]}}
rc, out = run_sidecar_cmd(["purge", "--older-than", "30d", "--dry-run"], admin_only)
ok(rc == 0 and "would delete" in out, "purge runs with no amqp section (exit 0)", detail=out)
rc, out = run_sidecar_cmd(["purge", "--older-than", "30d", "--dry-run"],
                          dict(admin_only, amqp={"heartbeat_s": 99999}))
ok(rc == 2 and "amqp.heartbeat_s" in out, "an amqp section that is there is still checked (exit 2)", detail=out)
rc, out = run_sidecar_cmd(["purge", "--older-than", "30d", "--dry-run"], admin_only,
                          env={"SIDECAR_AMQP_URL": "http://not-amqp"})
ok(rc == 2 and "amqp.url" in out, "and so is SIDECAR_AMQP_URL when it is set (exit 2)", detail=out)

consumer = "defaults-try-" + suffix()
try_cfg = {"mysql": {"url": os.environ["SC_TEST_MYSQL_CONSUMER_URL"]},
           "consumers": [{"name": consumer, "handler": HANDLER}]}
ev = os.path.join(d, "event.json")
with open(ev, "w") as f:
    f.write(event_body(str(uuid.uuid4()), subject="4242"))
rc, out = run_sidecar_cmd(["try", "--consumer", consumer, ev], try_cfg)
ok(rc == 0 and "1 applied" in out, "try runs with no amqp section (exit 0, the event would apply)", detail=out)
is_eq(query("SELECT COUNT(*) FROM consumed_event WHERE consumer_name = %s", (consumer,))[0][0], 0,
      "and rolled everything back")

for args in (["check"], ["dlq", "list", consumer]):
    rc, out = run_sidecar_cmd(args, try_cfg)
    ok(rc == 2 and "amqp" in out, f"{args[0]}, which uses the broker, refuses a config without amqp (exit 2)",
       detail=out)
done()
