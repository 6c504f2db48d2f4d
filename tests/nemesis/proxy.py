"""Loopback TCP proxies between the sidecars (and producers) and a server,
all served by one asyncio loop on one thread. A proxy forwards bytes until
told to cut (every open connection reset at once), stall (nothing forwarded
either way for a while; connections stay open, bytes are held, not lost) or
delay (each chunk waits before it is forwarded, in order). Everything is
bounded: a stall or delay ends at its deadline even if nobody calls clear()."""

import asyncio
import socket
import threading
import time


class _Loop:
    """The one event loop thread every proxy runs on."""

    _lock = threading.Lock()
    _loop = None

    @classmethod
    def get(cls):
        with cls._lock:
            if cls._loop is None:
                cls._loop = asyncio.new_event_loop()
                threading.Thread(target=cls._loop.run_forever, name="proxy-loop", daemon=True).start()
            return cls._loop


class Proxy:
    def __init__(self, name, target_port, listen_port=0):
        self.name = name
        self.target = ("127.0.0.1", target_port)
        self.loop = _Loop.get()
        self.pairs = set()  # (client transport, server transport)
        self.stall_until = 0.0
        self.delay_s = 0.0
        self.delay_until = 0.0
        self.accepted = 0
        self.cuts = 0
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", listen_port))
        self.port = sock.getsockname()[1]
        fut = asyncio.run_coroutine_threadsafe(self._start(sock), self.loop)
        self.server = fut.result(10)

    async def _start(self, sock):
        return await asyncio.start_server(self._handle, sock=sock, backlog=128)

    def _stalled(self):
        return time.monotonic() < self.stall_until

    def _delay(self):
        return self.delay_s if time.monotonic() < self.delay_until else 0.0

    async def _handle(self, cr, cw):
        self.accepted += 1
        try:
            sr, sw = await asyncio.wait_for(asyncio.open_connection(*self.target), 5)
        except (OSError, asyncio.TimeoutError):
            cw.transport.abort()
            return
        pair = (cw.transport, sw.transport)
        self.pairs.add(pair)
        try:
            await asyncio.gather(self._pipe(cr, sw), self._pipe(sr, cw), return_exceptions=True)
        finally:
            self.pairs.discard(pair)
            for t in pair:
                t.abort()

    async def _pipe(self, r, w):
        try:
            while True:
                data = await r.read(65536)
                if not data:
                    break
                while self._stalled():
                    await asyncio.sleep(0.05)
                d = self._delay()
                if d:
                    await asyncio.sleep(d)
                w.write(data)
                await w.drain()
        except (OSError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            w.transport.abort()  # one side gone: the other goes too

    def _call(self, fn):
        done = threading.Event()
        out = {}

        def run():
            try:
                out["v"] = fn()
            finally:
                done.set()
        self.loop.call_soon_threadsafe(run)
        done.wait(10)
        return out.get("v")

    def cut(self):
        """Resets every open connection. Returns how many were cut."""
        def do():
            n = len(self.pairs)
            for pair in list(self.pairs):
                for t in pair:
                    t.abort()
            self.cuts += n
            return n
        return self._call(do)

    def stall(self, seconds):
        self.stall_until = time.monotonic() + seconds

    def delay(self, seconds_per_chunk, for_seconds):
        self.delay_s = seconds_per_chunk
        self.delay_until = time.monotonic() + for_seconds

    def clear(self):
        self.stall_until = 0.0
        self.delay_until = 0.0

    def open_connections(self):
        return len(self.pairs)
