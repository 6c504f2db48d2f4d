"""What the systemd units rely on, without systemd: `sidecar consume` and
`sidecar relay` send READY=1 (and a STATUS) to $NOTIFY_SOCKET from the main
process once start-up checks pass, and never when they fail (Type=notify,
NotifyAccess=main); the URLs come from $CREDENTIALS_DIRECTORY/amqp_url and
mysql_url (LoadCredential=) when no SIDECAR_*_URL variable names them."""
import json
import os
import socket
import struct
import tempfile
import time

from harness import Relay, Sidecar, diag, done, is_eq, ok, wait_until


def listen(abstract=False):
    """A datagram socket like systemd's notify socket, passing the sender's
    credentials (the pid systemd checks for NotifyAccess=main)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    if abstract:
        name = f"sc-notify-{os.getpid()}-{time.monotonic_ns()}"
        s.bind("\0" + name)
        return s, "@" + name
    path = os.path.join(tempfile.mkdtemp(prefix="sc-notify-"), "notify")
    s.bind(path)
    return s, path


def receive(s, timeout):
    """(text, sender pid) of the next datagram, or (None, None)."""
    s.settimeout(timeout)
    try:
        data, anc, _, _ = s.recvmsg(4096, socket.CMSG_SPACE(12))
    except socket.timeout:
        return None, None
    pid = None
    for level, kind, payload in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            pid = struct.unpack("iII", payload[:12])[0]
    return data.decode(), pid


def ready_fields(text):
    return dict(line.split("=", 1) for line in (text or "").splitlines() if "=" in line)


# 1. consume: READY=1 from the main process, after start-up.
s, path = listen()
sc = Sidecar(env={"NOTIFY_SOCKET": path})
ok(sc.start(), "consume starts with NOTIFY_SOCKET set")
text, pid = receive(s, 30)
f = ready_fields(text)
is_eq(f.get("READY"), "1", "consume sends READY=1")
ok(f.get("STATUS", "").startswith("consuming"), f"with a STATUS ({f.get('STATUS')!r})")
is_eq(pid, sc.proc.pid, "sent by the main process (NotifyAccess=main accepts it)")
ok(wait_until(lambda: sc.get("/readyz")[0] == 200, timeout=30), "and it consumes (/readyz 200)")
more, _ = receive(s, 0.5)
is_eq(more, None, "READY is sent once")
is_eq(sc.stop(), 0, "SIGTERM: exit 0")

# 2. A refused start never says READY (exit 2, which the units do not restart).
s2, path2 = listen()
bad = Sidecar(env={"NOTIFY_SOCKET": path2}, handler="/nonexistent/handler.so")
bad.start(wait=False)
is_eq(bad.wait_exit(30), 2, "a missing handler: exit 2")
text, _ = receive(s2, 0.5)
is_eq(text, None, "and no READY")

# 3. relay, abstract socket name (@...).
s3, name3 = listen(abstract=True)
r = Relay("ex-notify-" + str(os.getpid()))
r.start(env={"NOTIFY_SOCKET": name3})
text, pid = receive(s3, 30)
f = ready_fields(text)
is_eq(f.get("READY"), "1", "relay sends READY=1 to an abstract socket")
ok(f.get("STATUS", "").startswith("relaying"), f"with a STATUS ({f.get('STATUS')!r})")
is_eq(pid, r.proc.pid, "sent by the relay's main process")
is_eq(r.stop(), 0, "relay: SIGTERM, exit 0")

# 4. A socket nobody listens on: a warning, and the daemon runs on.
lost = Sidecar(env={"NOTIFY_SOCKET": os.path.join(tempfile.mkdtemp(), "gone")})
ok(lost.start(), "NOTIFY_SOCKET naming no socket: consume starts")
ok(wait_until(lambda: any("NOTIFY_SOCKET" in l.get("msg", "") for l in lost.lines()), timeout=10),
   "the failed notification is logged")
ok(wait_until(lambda: lost.get("/readyz")[0] == 200, timeout=30), "and it consumes (/readyz 200)")
is_eq(lost.stop(), 0, "exit 0")


# 5. Credentials: the URLs from $CREDENTIALS_DIRECTORY when no variable names them.
def credentials(amqp, mysql):
    d = tempfile.mkdtemp(prefix="sc-cred-")
    for name, value in (("amqp_url", amqp), ("mysql_url", mysql)):
        if value is not None:
            with open(os.path.join(d, name), "w") as fh:
                fh.write(value + "\n")
            os.chmod(os.path.join(d, name), 0o400)
    return d


def without_urls(sidecar):
    del sidecar.config["amqp"]["url"]
    del sidecar.config["mysql"]["url"]
    with open(sidecar.config_path, "w") as fh:
        json.dump(sidecar.config, fh)
    return sidecar


good_amqp, good_mysql = os.environ["SC_TEST_AMQP_URL"], os.environ["SC_TEST_MYSQL_CONSUMER_URL"]
clean = {k: "" for k in ("SIDECAR_AMQP_URL", "SIDECAR_MYSQL_URL", "SIDECAR_AMQP_URL_FILE",
                         "SIDECAR_MYSQL_URL_FILE")}
cred = credentials(good_amqp, good_mysql)
c1 = without_urls(Sidecar(env={**clean, "CREDENTIALS_DIRECTORY": cred}))
ok(c1.start(), "a config without URLs starts with the credentials amqp_url and mysql_url")
ok(wait_until(lambda: c1.get("/readyz")[0] == 200, timeout=30), "and reaches both servers")
is_eq(c1.stop(), 0, "exit 0")

wrong = credentials("not-a-url", "not-a-url")
c2 = without_urls(Sidecar(env={**clean, "SIDECAR_AMQP_URL": good_amqp, "SIDECAR_MYSQL_URL": good_mysql,
                               "CREDENTIALS_DIRECTORY": wrong}))
ok(c2.start(), "SIDECAR_AMQP_URL and SIDECAR_MYSQL_URL win over the credentials")
ok(wait_until(lambda: c2.get("/readyz")[0] == 200, timeout=30), "and reach both servers")
is_eq(c2.stop(), 0, "exit 0")

c4 = without_urls(Sidecar(env={**clean, "CREDENTIALS_DIRECTORY": credentials("not-a-url", good_mysql)}))
c4.start(wait=False)
is_eq(c4.wait_exit(30), 2, "a credential amqp_url that is not a URL: exit 2 (bad config)")
ok("amqp.url" in c4.text(), "naming the key", c4.text()[-600:])

only_amqp = credentials(good_amqp, None)
c3 = Sidecar(env={**clean, "CREDENTIALS_DIRECTORY": only_amqp})
c3.config["amqp"].pop("url")
with open(c3.config_path, "w") as fh:
    json.dump(c3.config, fh)
ok(c3.start(), "credential amqp_url alone: mysql.url comes from the config")
ok(wait_until(lambda: c3.get("/readyz")[0] == 200, timeout=30), "and both servers are reached")
is_eq(c3.stop(), 0, "exit 0")
diag("credentials read from " + cred)
done()
