"""Stand-ins for a tenant's database host on 127.0.0.2, the test server's
port (a tenant named 2 in a database_url of 127.0.0.{tenant}): a host that
drops connects, one that accepts and never speaks, a forwarder to the test
server, and one that goes silent on open sessions."""
import socket
import threading

from harness import _accept_each, _pump, _shut

HOST = "127.0.0.2"


def _listen(port, backlog):
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, port))
    sock.listen(backlog)
    return sock


class Blackhole:
    """Never accepts, accept queue full: SYNs dropped."""

    def __init__(self, port):
        self.port = port
        self.sock = _listen(port, 0)
        self.fill = []
        for _ in range(3):
            s = socket.socket()
            s.setblocking(False)
            try:
                s.connect((HOST, port))
            except BlockingIOError:
                pass
            self.fill.append(s)

    def close(self):
        for s in self.fill:
            s.close()
        self.sock.close()


class Listener:
    """Accepts; forward=False: sends nothing, ever (held counts them);
    forward=True: forwards both ways to the test server."""

    def __init__(self, port, forward):
        self.port = port
        self.forward = forward
        self.sock = _listen(port, 64)
        self.held = []
        _accept_each(self.sock, self._take)

    def _take(self, c):
        if not self.forward:
            self.held.append(c)
            return
        s = socket.create_connection(("127.0.0.1", self.port))
        threading.Thread(target=_pump, args=(c, s), daemon=True).start()
        threading.Thread(target=_pump, args=(s, c), daemon=True).start()

    def close(self):
        _shut(self.sock)  # wakes the accept: a close alone would leave the port bound
        self.sock.close()
        for c in self.held:
            _shut(c)
            c.close()


class SilentProxy:
    """Forwards 127.0.0.2:port to the test server; silent(): every byte
    either way is swallowed from then on (no connection is closed), and
    answer() cuts the connections that lost bytes and forwards again."""

    def __init__(self, port):
        self.port = port
        self.quiet = threading.Event()
        self.lock = threading.Lock()
        self.links = []      # [client, server, lost a byte]
        self.swallowed = 0   # bytes
        self.sock = _listen(port, 64)
        _accept_each(self.sock, self._take)

    def _take(self, c):
        s = socket.create_connection(("127.0.0.1", self.port))
        link = [c, s, False]
        with self.lock:
            self.links.append(link)
        threading.Thread(target=self._pump, args=(link, c, s), daemon=True).start()
        threading.Thread(target=self._pump, args=(link, s, c), daemon=True).start()

    def _pump(self, link, src, dst):
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                if self.quiet.is_set() or link[2]:
                    with self.lock:
                        link[2] = True
                        self.swallowed += len(b)
                    continue
                dst.sendall(b)
        except OSError:
            pass
        _shut(src, dst)

    def silent(self):
        self.quiet.set()

    def answer(self):
        with self.lock:
            for c, s, lost in self.links:
                if lost:
                    _shut(c, s)
        self.quiet.clear()

    def close(self):
        _shut(self.sock)
        self.sock.close()
        with self.lock:
            for c, s, _ in self.links:
                _shut(c, s)
