"""What the console tests share: `sidecar console` run with a config of its
own (its port read from its log), its HTTP API, and the browser run
(Debian's headless Chromium driven by puppeteer-core, test_console.js, one
plan at a time, each of its checks a TAP line). Importing it bails out when
Chromium is missing."""
import json
import os
import re
import subprocess
import tempfile
import urllib.error
import urllib.request

from harness import Sidecar, bail, diag, ok, spawn, wait_until
from node_deps import node_modules

HERE = os.path.dirname(os.path.abspath(__file__))
CHROMIUM = os.environ.get("SC_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = os.environ.get("SC_ARTIFACTS") or tempfile.mkdtemp(prefix="sc-console-shots-")
if not os.path.exists(CHROMIUM):
    bail(f"{CHROMIUM} is missing (Debian: chromium; tests/install-deps installs it)")
NODE = node_modules()


class Console:
    """`sidecar console` with config (a dict) written to its own folder
    (dir, made when not given); logs per run like Sidecar."""

    def __init__(self, config, env=None, dir=None):
        self.dir = dir or tempfile.mkdtemp(prefix="sc-console-")
        self.config = config
        self.config_path = os.path.join(self.dir, "console.json")
        with open(self.config_path, "w") as f:
            json.dump(config, f)
        self.env = dict(os.environ)
        self.env.update(env or {})
        self.log_paths = []
        self.proc = None
        self.port = None

    def start(self):
        """True once it listens; False (its log's end as a diag) when it
        exited first or did not say where it listens within 20 s."""
        self.proc = spawn(self, "console")

        def port():
            for l in self.lines():
                m = re.match(r"console: listening on 127\.0\.0\.1:(\d+)", l.get("msg", ""))
                if m:
                    return int(m.group(1))
            return None
        self.port = wait_until(lambda: port() or (self.proc.poll() is not None and -1), timeout=20)
        if not self.port or self.port < 0:
            diag("console did not start: " + self.text()[-2000:])
            return False
        return True

    def url(self, path=""):
        return f"http://127.0.0.1:{self.port}{path}"

    def request(self, path, method="GET", body=None, headers=None, timeout=15):
        """(status, headers, parsed JSON or text)"""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url(path), data=data, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                status, hdrs, raw = r.status, dict(r.headers), r.read().decode()
        except urllib.error.HTTPError as e:
            status, hdrs, raw = e.code, dict(e.headers), e.read().decode()
        try:
            return status, hdrs, json.loads(raw)
        except ValueError:
            return status, hdrs, raw

    lines = Sidecar.lines
    text = Sidecar.text
    stop = Sidecar.stop


def browser(plan):
    """Runs test_console.js with plan (plus where Chromium is and where the
    screenshots go); each of its checks becomes one ok(). Returns them."""
    path = os.path.join(tempfile.mkdtemp(prefix="sc-plan-"), "plan.json")
    with open(path, "w") as f:
        json.dump(dict(plan, chromium=CHROMIUM, screenshots=ARTIFACTS), f)
    p = subprocess.run(["node", os.path.join(HERE, "test_console.js"), path],
                       env=dict(os.environ, NODE_PATH=NODE), capture_output=True, text=True, timeout=240)
    results = []
    for line in p.stdout.splitlines():
        try:
            results.append(json.loads(line))
        except ValueError:
            diag("node: " + line)
    for r in results:
        ok(r["ok"], "browser: " + r["label"], detail=r.get("detail"))
    if not results:
        ok(False, "the browser run produced results", detail=p.stderr[-2000:])
    return results
