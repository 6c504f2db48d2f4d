"""`sidecar inspect` reports a query it could not run, and exits 1 with the
error; it never prints "nothing is known" (or "by no consumer") for what it
could not read: a user without SELECT on a table, a connection lost between
two queries, a database down or out of reach."""
import re
import socket
import threading
import uuid

from harness import *

sc = Sidecar()
ok(sc.start(), "sidecar started")
clear_outbox()
eid = insert_outbox(1, status="PUBLISHED")[0]
publish_events(sc.exchange, [(eid, "5100")])
ok(wait_until(lambda: [l for l in sc.outcomes("applied") if l.get("event_id") == eid], timeout=30),
   "an event consumed")
is_eq(sc.stop(), 0, "clean stop")
admin_url = os.environ["SC_TEST_MYSQL_ADMIN_URL"]
cfg = dict(sc.config, mysql={"url": admin_url})
rc, out = run_sidecar_cmd(["inspect", eid], cfg)
ok(rc == 0 and "consumed: by " + sc.name in out, "the operator's user sees it all", detail=out)

# --- a user without SELECT on consumed_event --------------------------------
user = "sc_nosel_" + suffix()
query(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'nosel-pw'")
query(f"GRANT SELECT ON app.outbox_event TO '{user}'@'%'")
query(f"GRANT SELECT ON app.notification_job TO '{user}'@'%'")
port = os.environ["SC_TEST_MYSQL_PORT"]
nosel = dict(sc.config, mysql={"url": f"mysql://{user}:nosel-pw@127.0.0.1:{port}/app"})
rc, out = run_sidecar_cmd(["inspect", eid], nosel)
is_eq(rc, 1, "exit 1 when a query fails")
ok(re.search(r"consumed_event.*1142", out) and "by no consumer" not in out and "nothing is known" not in out,
   "the report names the table and the error (1142 SELECT denied), not 'by no consumer'", detail=out)
ok("outbox:   PUBLISHED" in out, "and still shows what it could read", detail=out)
rc, out = run_sidecar_cmd(["inspect", eid, "--json"], nosel)
is_eq(rc, 1, "--json: exit 1")
try:
    j = json.JSONDecoder().raw_decode(out[out.index("{"):])[0]
except ValueError:
    j = {}
ok(j.get("consumed") is None and any(e.get("table") == "consumed_event" and e.get("code") == 1142
                                     for e in j.get("errors", [])),
   "--json: consumed is null and errors names the table and code", detail=out)
rc, out = run_sidecar_cmd(["inspect", str(uuid.uuid4())], nosel)
ok(rc == 1 and "1142" in out and "nothing is known" not in out,
   "an unknown id with a failing query: the error, not 'nothing is known'", detail=out)
query(f"DROP USER '{user}'@'%'")


# --- the connection lost between two queries ---------------------------------
class CutAtQuery:
    """Forwards to MariaDB; closes both sides when the client sends a
    statement naming `table` (the server never sees it)."""

    def __init__(self, target_port, table):
        self.target, self.table = ("127.0.0.1", target_port), table.encode()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.cuts = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            c, _ = self.sock.accept()
            s = socket.create_connection(self.target)
            threading.Thread(target=self._up, args=(c, s), daemon=True).start()
            threading.Thread(target=self._down, args=(s, c), daemon=True).start()

    def _up(self, c, s):
        try:
            while True:
                b = c.recv(65536)
                if not b:
                    break
                if self.table in b:
                    self.cuts += 1
                    break
                s.sendall(b)
        except OSError:
            pass
        for x in (c, s):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _down(self, s, c):
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                c.sendall(b)
        except OSError:
            pass


proxy = CutAtQuery(int(port), "consumed_event")
cut_url = re.sub(r"@127\.0\.0\.1:\d+/", f"@127.0.0.1:{proxy.port}/", admin_url)
rc, out = run_sidecar_cmd(["inspect", eid], dict(sc.config, mysql={"url": cut_url}))
is_eq(proxy.cuts, 1, "the proxy cut the connection at the consumed_event query")
is_eq(rc, 1, "exit 1 when the connection is lost")
ok(re.search(r"consumed_event.*(2013|2006)", out) and "nothing is known" not in out
   and "by no consumer" not in out,
   "the report says the connection was lost (2013/2006) at that query", detail=out)

# --- the database down, or out of reach ---------------------------------------
s = socket.socket()
s.bind(("127.0.0.1", 0))
dead_port = s.getsockname()[1]
s.close()  # nothing listens there
down = re.sub(r"@127\.0\.0\.1:\d+/", f"@127.0.0.1:{dead_port}/", admin_url)
rc, out = run_sidecar_cmd(["inspect", eid], dict(sc.config, mysql={"url": down}))
ok(rc == 1 and re.search(r"mysql.*error (2002|2003)", out) and "nothing is known" not in out,
   "database out of reach: exit 1 with the connect error", detail=out)
done()
