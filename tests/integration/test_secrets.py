"""No byte of a configured secret reaches stderr, the JSON log, /metrics,
/readyz or `check` output, whatever shape the URL comes in: one URL, a list
(multi-node warnings), SIDECAR_*_URL, SIDECAR_*_URL_FILE, a bad port, a
wrong password, a config file that is not valid JSON inside a password, and
passwords with '/', '?' or '#' written without percent-encoding (refused at
config time, naming the key, exit 2).

The secrets are real passwords of a database user and a broker user made
here, so the runs that should work do (a consumer applies an event, a relay
starts). A leak is any piece of a secret: every substring of 4 or more
characters that holds a '/', '?' or '#', every run of 6 letters or digits
(each secret starts with 7 of them, so a cut-off prefix like the one
issue 27 found, "user:Tm90", is caught), and the same for the
percent-encoded form."""
import os
import urllib.parse
import uuid

from harness import *

DB_SECRET = "QzXw7Tk/vB3nRq?Lp9Mh#Ys2Kd"
AMQP_SECRET = "HjW4mPx/cN8tZr?Fq6Lb#Gv5Sy"
WRONG = "PmK8vQzR/Xr3?Tn#Wc"  # a wrong password: must not show either
SECRETS = (DB_SECRET, AMQP_SECRET, WRONG)
DB_USER, AMQP_USER = "sc_secret_" + suffix()[:6], "sc_secret_amqp"
enc = lambda s: urllib.parse.quote(s, safe="")
port = os.environ["SC_TEST_MYSQL_PORT"]
amqp_port = os.environ["SC_TEST_AMQP_PORT"]

GOOD_DB = f"mysql://{DB_USER}:{enc(DB_SECRET)}@127.0.0.1:{port}/app"
DEAD_DB = f"mysql://{DB_USER}:{enc(DB_SECRET)}@127.0.0.1:1/app"  # nothing listens on port 1
GOOD_AMQP = f"amqp://{AMQP_USER}:{enc(AMQP_SECRET)}@127.0.0.1:{amqp_port}/%2f"
DEAD_AMQP = f"amqp://{AMQP_USER}:{enc(AMQP_SECRET)}@127.0.0.1:1/%2f"
RAW_DB = f"mysql://{DB_USER}:{DB_SECRET}@127.0.0.1:{port}/app"       # '/', '?', '#' unencoded
RAW_AMQP = f"amqp://{AMQP_USER}:{AMQP_SECRET}@127.0.0.1:{amqp_port}/%2f"


def pieces(secret):
    out = set()
    for form in (secret, enc(secret)):
        for i in range(len(form)):
            for j in range(i + 4, len(form) + 1):
                p = form[i:j]
                if (not p.isalnum() and any(c in p for c in "/?#%")) or (p.isalnum() and len(p) >= 6):
                    out.add(p)
    return out


PIECES = {s: pieces(s) for s in SECRETS}


def leaks(text):
    found = []
    for s, ps in PIECES.items():
        hit = sorted((p for p in ps if p in text), key=len, reverse=True)
        if hit:
            found.append(hit[0])
    return found


def no_leak(text, label):
    found = leaks(text)
    ok(not found, f"no piece of a secret in {label}", detail="found: " + ", ".join(found) +
       "\n" + "\n".join(l for l in text.splitlines() if any(f in l for f in found))[:3000])


def config(mysql_urls=None, amqp_urls=None, **extra):
    c = {"http": {"listen": "127.0.0.1:0"},
         "consumers": [{"name": "secrets-" + suffix(), "handler": HANDLER}]}
    c["mysql"] = {"url": mysql_urls} if mysql_urls is not None else {}
    c["amqp"] = {"url": amqp_urls, "heartbeat_s": 5} if amqp_urls is not None else {"heartbeat_s": 5}
    c.update(extra)
    return c


def clean_env(**kv):
    e = {k: "" for k in ("SIDECAR_AMQP_URL", "SIDECAR_MYSQL_URL", "SIDECAR_AMQP_URL_FILE",
                         "SIDECAR_MYSQL_URL_FILE")}
    e.update(kv)
    return e


def secret_file(text):
    d = tempfile.mkdtemp(prefix="sc-secret-")
    p = os.path.join(d, "url")
    with open(p, "w") as f:
        f.write(text + "\n")
    os.chmod(p, 0o600)
    return p


def check(label, cfg, want_rc, env=None, want=None):
    rc, out = run_sidecar_cmd(["check"], cfg, env=clean_env(**(env or {})), timeout=60)
    ok(rc == want_rc and (want is None or want in out), f"check, {label}: exit {rc} (want {want_rc})"
       + (f", says '{want}'" if want else ""), detail=out[-2000:])
    no_leak(out, f"check output, {label}")
    return out


def consume_refused(label, cfg, key, env=None):
    d = tempfile.mkdtemp(prefix="sc-secret-")
    path = os.path.join(d, "c.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    p = subprocess.Popen([SIDECAR, "consume", "-c", path], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, env=dict(os.environ, **clean_env(**(env or {}))))
    try:
        out, _ = p.communicate(timeout=15)
        rc = p.returncode
    except subprocess.TimeoutExpired:  # still running: not refused (read what it printed so far)
        p.kill()
        out, _ = p.communicate()
        rc = None
    ok(rc == 2 and key in out, f"consume, {label}: refused with exit 2 naming {key} (exit {rc})",
       detail=out[-2000:])
    no_leak(out, f"consume stderr, {label}")


def consume_run(label, mysql_urls, amqp_urls, env=None, event=True):
    sc = Sidecar(extra={"mysql": {"url": mysql_urls}, "amqp": {"url": amqp_urls, "heartbeat_s": 5}},
                 env=clean_env(**(env or {})))
    ok(sc.start(), f"consume, {label}: started")
    if event:
        eid = str(uuid.uuid4())
        conn = amqp()
        ch = conn.channel()
        ch.confirm_delivery()
        publish(ch, sc.exchange, "ORDER_ACCEPTED", event_body(eid, subject="4242"), message_id=eid)
        conn.close()
        ok(wait_until(lambda: count_in("consumed_event", "event_id", [eid],
                                       f"AND consumer_name = '{sc.name}'") == 1, timeout=30),
           f"consume, {label}: the event applied as {DB_USER}")
    status, metrics = sc.get("/metrics")
    rstatus, ready = sc.get("/readyz")
    ok(status == 200 and "sidecar_endpoint" in metrics, f"consume, {label}: /metrics served ({status})")
    is_eq(sc.stop(), 0, f"consume, {label}: clean stop")
    no_leak(sc.text(), f"the JSON log, {label}")
    no_leak(metrics, f"/metrics, {label}")
    no_leak(ready, f"/readyz, {label}")


# ---- users with these passwords --------------------------------------------

with admin_db() as c, c.cursor() as cur:
    cur.execute(f"CREATE USER '{DB_USER}'@'%%' IDENTIFIED BY %s", (DB_SECRET,))
    cur.execute(f"GRANT SELECT, INSERT, DELETE ON app.consumed_event TO '{DB_USER}'@'%'")
    cur.execute(f"GRANT SELECT, INSERT ON app.notification_job TO '{DB_USER}'@'%'")
    cur.execute(f"GRANT SELECT, UPDATE ON app.outbox_event TO '{DB_USER}'@'%'")
r = rabbitmqctl("add_user", AMQP_USER, AMQP_SECRET)
r2 = rabbitmqctl("set_permissions", "-p", "/", AMQP_USER, ".*", ".*", ".*")
if r.returncode != 0 or r2.returncode != 0:
    bail(f"cannot make the broker user: {r.stderr} {r2.stderr}")

try:
    # ---- URLs that work: nothing of the password in what they print ----
    check("one URL each", config(GOOD_DB, GOOD_AMQP), 0, want="connected to node 0")
    consume_run("one URL each", GOOD_DB, GOOD_AMQP)
    check("a list whose node 0 is down", config([DEAD_DB, GOOD_DB], [DEAD_AMQP, GOOD_AMQP]), 1,
          want="node 0")
    consume_run("a list whose node 0 is down (multi-node warnings)", [DEAD_DB, GOOD_DB],
                [DEAD_AMQP, GOOD_AMQP])
    check("SIDECAR_*_URL lists", config(), 1,
          env={"SIDECAR_MYSQL_URL": f"{DEAD_DB},{GOOD_DB}", "SIDECAR_AMQP_URL": f"{DEAD_AMQP},{GOOD_AMQP}"},
          want="node 1")
    files = {"SIDECAR_MYSQL_URL_FILE": secret_file(DEAD_DB) + "," + secret_file(GOOD_DB),
             "SIDECAR_AMQP_URL_FILE": secret_file(GOOD_AMQP)}
    check("SIDECAR_*_URL_FILE", config(), 1, env=files, want="node 1")
    consume_run("SIDECAR_*_URL_FILE (config URLs overridden)", "mysql://x:y@127.0.0.1:1/app",
                "amqp://x:y@127.0.0.1:1/%2f", env=files)
    wrong = f"mysql://{DB_USER}:{enc(WRONG)}@127.0.0.1:{port}/app"
    check("a wrong password", config(wrong, GOOD_AMQP), 1, want="Access denied")
    wrong_amqp = f"amqp://{AMQP_USER}:{enc(WRONG)}@127.0.0.1:{amqp_port}/%2f"
    check("a wrong broker password", config(GOOD_DB, wrong_amqp), 1)

    # the relay prints the same endpoints
    relay_cfg = {"mysql": {"url": [DEAD_DB, GOOD_DB]}, "amqp": {"url": [DEAD_AMQP, GOOD_AMQP]},
                 "http": {"listen": "127.0.0.1:0"},
                 "relay": {"exchange": "secrets-" + suffix(), "poll_ms": 50}}
    d = tempfile.mkdtemp(prefix="sc-secret-relay-")
    rp = os.path.join(d, "relay.json")
    with open(rp, "w") as f:
        json.dump(relay_cfg, f)
    log = open(os.path.join(d, "relay.log"), "w+")
    proc = subprocess.Popen([SIDECAR, "relay", "-c", rp], stdout=log, stderr=subprocess.STDOUT,
                            env=dict(os.environ, **clean_env()))
    wait_until(lambda: "connected to node 1" in open(log.name).read() or proc.poll() is not None, timeout=30)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(30)
    text = open(log.name).read()
    ok(rc == 0 and "connected to node 1" in text, f"relay with a list: connected to node 1, clean stop ({rc})",
       detail=text[-2000:])
    no_leak(text, "the relay's log")

    # ---- refused at config time, naming the key, never echoing ----
    check("'/', '?', '#' unencoded in the mysql password", config(RAW_DB, GOOD_AMQP), 2,
          want="mysql.url: the user name or password holds")
    check("unencoded in the amqp password", config(GOOD_DB, RAW_AMQP), 2,
          want="amqp.url: the user name or password holds")
    check("unencoded, node 1 of a list", config([GOOD_DB, RAW_DB], GOOD_AMQP), 2, want="mysql.url[1]:")
    check("unencoded, in SIDECAR_MYSQL_URL", config(None, GOOD_AMQP), 2,
          env={"SIDECAR_MYSQL_URL": RAW_DB}, want="mysql.url")
    check("unencoded, in SIDECAR_AMQP_URL_FILE", config(GOOD_DB), 2,
          env={"SIDECAR_AMQP_URL_FILE": secret_file(RAW_AMQP)}, want="amqp.url")
    consume_refused("unencoded mysql password", config(RAW_DB, GOOD_AMQP), "mysql.url")
    consume_refused("unencoded amqp password, node 1", config(GOOD_DB, [GOOD_AMQP, RAW_AMQP]), "amqp.url[1]")
    check("a bad port", config(f"mysql://{DB_USER}:{enc(DB_SECRET)}@127.0.0.1:99999/app", GOOD_AMQP), 2,
          want="mysql.url: bad port")
    check("a bad amqp port", config(GOOD_DB, f"amqp://{AMQP_USER}:{enc(AMQP_SECRET)}@127.0.0.1:7x/%2f"), 2,
          want="amqp.url: bad port")
    check("a bad port, node 1", config([GOOD_DB, f"mysql://{DB_USER}:{DB_SECRET}@127.0.0.1:99999/app"],
                                        GOOD_AMQP), 2, want="mysql.url[1]:")
    # a password that breaks the JSON of the config file itself (jansson
    # quotes up to 20 characters of the token it stopped in: a short user
    # name leaves room for the password's start)
    text = ('{"mysql": {"url": "mysql://u:QzXw7Tk\\vB3nRq@127.0.0.1:%s/app"}, "amqp": {"url": "%s"}, '
            '"consumers": [{"name": "x", "handler": "%s"}]}' % (port, GOOD_AMQP, HANDLER))
    rc, out = run_sidecar_cmd(["check"], text, env=clean_env())
    ok(rc == 2 and "not valid JSON" in out and "line 1" in out,
       f"check, a backslash in a password breaks the JSON: exit {rc}, says where", detail=out)
    no_leak(out, "check output, invalid JSON inside a password")
finally:
    query(f"DROP USER IF EXISTS '{DB_USER}'@'%'")
    rabbitmqctl("delete_user", AMQP_USER)
done()
