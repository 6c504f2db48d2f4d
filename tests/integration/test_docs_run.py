"""Docs that a test runs: every fenced block of the pages below that is marked
runnable (docs/testing.md, "Runnable blocks") is run, in the page's order,
on a machine made for the page, and gives one TAP line naming its file and
line. A recipe that drifts from the code fails here.

The machine of a page, made fresh for each page: this process runs in a
mount namespace of its own (unshare -m), where
  - /usr/share, /etc and /run are overlays (writes stay in the page's scratch
    folder) and /usr/share/sidecar/sql holds sql/ as the package installs it;
  - a MariaDB of the page's own (the suite's mariadbd binary, a new data
    directory, no TCP port) listens on /run/mysqld/mysqld.sock, where
    Debian's client looks, with root over the socket, as on a new host: the
    recipes create the database `app` and the server-wide role users, which
    on the suite's server exist already and are used by the other tests;
  - the broker is the suite's (SC_TEST_AMQP_URL), in a virtual host of this
    test's own, deleted afterwards: AMQP_URL and SIDECAR_AMQP_URL name it;
    SIDECAR_MYSQL_URL names the page's MariaDB as root;
  - the working directory is a copy of the checkout's files with `build`
    the build tree; PATH is Debian's with `sidecar` (the built binary) and
    `sudo` (we are root already: it runs its command) in front; HOME is
    empty; EDITOR is `true`.
Needs root (unshare, mount, mariadbd --user=root): a failure otherwise,
never a skip."""
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tap import ok, done  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGES = ["docs/deploy.md", "docs/upgrading.md", "docs/producers.md", "docs/handlers.md",
         "docs/configuration.md"]
SIDECAR = os.environ.get("SIDECAR_BIN", "")
SOCK = "/run/mysqld/mysqld.sock"
MYSQL_URL = f"mysql://root@localhost/app?socket={SOCK}"
BLOCK_TIMEOUT = 180


def bail(msg):
    print("Bail out! " + msg, flush=True)
    sys.exit(1)


if not SIDECAR or not os.path.exists(SIDECAR):
    bail("SIDECAR_BIN does not name the built sidecar")
for var in ("SC_TEST_AMQP_URL", "SC_TEST_RABBIT_NODE", "SC_TEST_RABBIT_HOME"):
    if not os.environ.get(var):
        bail(f"{var} is not set: run the suite through tests/run (it starts the servers)")
if os.geteuid() != 0:
    bail("the docs' recipes run as root in a mount namespace of their own: run as root")
if os.environ.get("SC_DOCS_NAMESPACE") != "1":
    # Everything below (mounts, the pages' MariaDB, their blocks) in a
    # private mount namespace: nothing of it is seen outside, and it all
    # goes when this process ends.
    os.environ["SC_DOCS_NAMESPACE"] = "1"
    try:
        os.execvp("unshare", ["unshare", "--mount", "--propagation", "private",
                              sys.executable, os.path.abspath(__file__), *sys.argv[1:]])
    except OSError as e:
        bail(f"unshare: {e}")

BUILD = os.path.dirname(os.path.dirname(os.path.abspath(SIDECAR)))
SCRATCH = tempfile.mkdtemp(prefix="sc-docs-run-")
GOCACHE = os.path.join(BUILD, "docs-run-gocache")  # kept: the next run compiles less
T0 = time.monotonic()


# ---- the Markdown: marked blocks --------------------------------------------------

MARK = re.compile(r"^<!--\s*runnable(?::\s*(?!-->)(\S+)(?:\s+(?!-->)(\S+))?)?\s*(-->)?\s*$")


def marked_blocks(rel):
    """[(line, kind, arg, info, body)] of a page, in order. kind: 'run',
    'file', 'consumer', 'transcript', or 'setup'/'check' (the commands inside
    a comment: not shown to readers). line: the fence's (a comment's) line."""
    lines = open(os.path.join(ROOT, rel)).read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = MARK.match(lines[i].strip())
        if not m:
            i += 1
            continue
        kind, arg, closed = m.group(1) or "run", m.group(2), m.group(3)
        if kind in ("setup", "check"):
            if closed:
                bail(f"{rel}:{i + 1}: a runnable {kind} holds its commands inside the comment")
            start, body = i + 1, []
            i += 1
            while i < len(lines) and lines[i].strip() != "-->":
                body.append(lines[i])
                i += 1
            out.append((start, kind, arg, "sh", "\n".join(body) + "\n"))
            i += 1
            continue
        if not closed:
            bail(f"{rel}:{i + 1}: unterminated runnable marker")
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        f = re.match(r"^(\s*)(```+|~~~+)\s*([\w+-]*)", lines[j]) if j < len(lines) else None
        if not f:
            bail(f"{rel}:{i + 1}: a runnable marker not followed by a fenced block")
        indent, fence, info = len(f.group(1)), f.group(2), f.group(3)
        body, k = [], j + 1
        while k < len(lines) and not (lines[k].strip().startswith(fence) and lines[k].strip().strip(fence[0]) == ""):
            body.append(lines[k][indent:] if lines[k][:indent].strip() == "" else lines[k])
            k += 1
        if kind not in ("run", "file", "consumer", "transcript"):
            bail(f"{rel}:{i + 1}: unknown runnable kind '{kind}'")
        if kind in ("file", "consumer") and not arg:
            bail(f"{rel}:{i + 1}: runnable: {kind} needs a file name")
        out.append((j + 1, kind, arg, info, "\n".join(body) + "\n"))
        i = k + 1
    return out


# ---- the machine of a page ---------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)


def die_with_us():
    """preexec_fn: the server or consumer gets SIGKILL when this process dies
    (a test killed at its timeout leaves nothing running)."""
    _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def rabbitmqctl(*args):
    env = dict(os.environ, HOME=os.environ["SC_TEST_RABBIT_HOME"])
    return sh(["/usr/lib/rabbitmq/bin/rabbitmqctl", "-n", os.environ["SC_TEST_RABBIT_NODE"], "-q", *args],
              env=env, timeout=60)


def tracked_files():
    """The checkout's files (not the build trees, not .local)."""
    try:
        r = sh(["git", "-C", ROOT, "ls-files", "-co", "--exclude-standard"])
    except FileNotFoundError:  # no git on this machine
        r = None
    if r is not None and r.returncode == 0:
        return [f for f in r.stdout.split("\n") if f and os.path.isfile(os.path.join(ROOT, f))]
    found = []  # not a git checkout: walk it
    for d, dirs, files in os.walk(ROOT):
        dirs[:] = [x for x in dirs if not x.startswith((".", "build")) and x != "node_modules"]
        found += [os.path.relpath(os.path.join(d, f), ROOT) for f in files]
    return found


FILES = tracked_files()

# The suite's broker, in a virtual host of this test's own (rabbitmqctl
# starts an Erlang VM per call: one host for the pages, not one each).
VHOST = f"docs-run-{uuid.uuid4().hex[:8]}"
_r = rabbitmqctl("add_vhost", VHOST)
_r2 = rabbitmqctl("set_permissions", "-p", VHOST, "guest", ".*", ".*", ".*")
if _r.returncode or _r2.returncode:
    bail(f"rabbitmqctl add_vhost {VHOST}: {_r.stderr}{_r2.stderr}")
AMQP_URL = os.environ["SC_TEST_AMQP_URL"].rsplit("/", 1)[0] + "/" + VHOST


class Machine:
    def __init__(self, rel):
        self.rel = rel
        self.dir = os.path.join(SCRATCH, os.path.splitext(os.path.basename(rel))[0])
        self.mounts, self.procs, self.groups = [], [], []
        self.consumer = None
        os.makedirs(self.dir)
        for d in ("/usr/share", "/etc", "/run"):
            base = os.path.join(self.dir, "root", d.strip("/").replace("/", "_"))
            up, work = os.path.join(base, "upper"), os.path.join(base, "work")
            os.makedirs(up)
            os.makedirs(work)
            if d == "/usr/share":
                shutil.copytree(os.path.join(ROOT, "sql"), os.path.join(up, "sidecar", "sql"))
            if d == "/run":
                os.makedirs(os.path.join(up, "mysqld"))
            r = sh(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={d},upperdir={up},workdir={work}", d])
            if r.returncode != 0:
                bail(f"mount overlay on {d}: {r.stderr.strip()}")
            self.mounts.append(d)
        # the checkout's files, `build` the build tree
        self.work = os.path.join(self.dir, "work")
        for f in FILES:
            dst = os.path.join(self.work, f)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(os.path.join(ROOT, f), dst)
        os.symlink(BUILD, os.path.join(self.work, "build"))
        self.home = os.path.join(self.dir, "home")
        os.makedirs(self.home)
        bindir = os.path.join(self.dir, "bin")
        os.makedirs(bindir)
        os.symlink(os.path.abspath(SIDECAR), os.path.join(bindir, "sidecar"))
        with open(os.path.join(bindir, "sudo"), "w") as f:
            f.write('#!/bin/sh\n# root already: run the command (VAR=value words first, as sudo takes them)\n'
                    'exec env "$@"\n')
        os.chmod(os.path.join(bindir, "sudo"), 0o755)
        self.amqp_url = AMQP_URL
        self.env = {
            "PATH": f"{bindir}:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": self.home, "USER": "root",
            "LOGNAME": "root", "SHELL": "/bin/bash", "LANG": "C.UTF-8", "TERM": "dumb", "EDITOR": "true",
            "TMPDIR": os.path.join(self.dir, "tmp"),
            "AMQP_URL": self.amqp_url, "SIDECAR_AMQP_URL": self.amqp_url, "SIDECAR_MYSQL_URL": MYSQL_URL,
            "GOCACHE": GOCACHE, "GOFLAGS": "", "GOPROXY": "off", "PYTHONDONTWRITEBYTECODE": "1",
        }
        for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):  # a sanitizer build's settings
            if os.environ.get(var):
                self.env[var] = os.environ[var]
        os.makedirs(self.env["TMPDIR"])
        self.start_mysql()

    def start_mysql(self):
        data = os.path.join(self.dir, "mysql")
        r = sh(["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=root",
                "--auth-root-authentication-method=socket", "--skip-test-db"], timeout=120)
        if r.returncode != 0:
            bail("mariadb-install-db: " + (r.stdout + r.stderr)[-500:])
        self.mysqld = subprocess.Popen(
            ["mariadbd", "--no-defaults", f"--datadir={data}", f"--socket={SOCK}", "--skip-networking",
             f"--pid-file={data}/mysqld.pid", f"--log-error={data}/error.log", "--user=root",
             "--innodb-buffer-pool-size=64M", f"--tmpdir={self.env['TMPDIR']}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_us)
        for _ in range(240):
            if sh(["mariadb", "-e", "SELECT 1"]).returncode == 0:
                return
            time.sleep(0.25)
        bail("the page's MariaDB did not start: " + open(f"{data}/error.log").read()[-800:])

    def run(self, argv, timeout=BLOCK_TIMEOUT, stdin=None):
        """(exit status or None on timeout, output) of argv in the page's machine."""
        p = subprocess.Popen(argv, cwd=self.work, env=self.env, stdin=stdin or subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
        self.groups.append(p.pid)
        try:
            out, _ = p.communicate(timeout=timeout)
            return p.returncode, out
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
            return None, out + f"\n(timed out after {timeout} s)"

    def close(self):
        if self.consumer:
            self.stop_consumer()
        for pgid in self.groups:  # what a block left running in the background
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.mysqld.kill()  # a scratch server: nothing to keep
        self.mysqld.wait()
        for d in reversed(self.mounts):
            sh(["umount", "-l", d])

    # ---- a page's consumer -----------------------------------------------------------

    def start_consumer(self, name, body):
        """The page's JSON config, written to name, run by `sidecar consume`
        (URLs from the environment; http.listen on a port the kernel picks:
        fixed ports are shared on the test machine)."""
        cfg = json.loads(body)
        cfg.setdefault("http", {})["listen"] = "127.0.0.1:0"
        path = os.path.join(self.work, name)
        with open(path, "w") as f:
            json.dump(cfg, f, indent=2)
        self.consumer_log = os.path.join(self.dir, "consume.log")
        self.consumer = subprocess.Popen(["sidecar", "consume", "-c", name], cwd=self.work, env=self.env,
                                         stdout=open(self.consumer_log, "w"), stderr=subprocess.STDOUT,
                                         preexec_fn=die_with_us)
        want = len(cfg.get("consumers", []))
        end = time.time() + 30
        while time.time() < end and self.consumer.poll() is None:
            if open(self.consumer_log).read().count("consuming from") >= want:
                return True, f"{want} consumers consuming"
            time.sleep(0.1)
        return False, open(self.consumer_log).read()[-3000:]

    def consumer_lines(self):
        out = []
        for line in open(self.consumer_log):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def applied(self, ids, timeout=30):
        """Waits until the page's consumer applied every id: (missing, other outcomes)."""
        end = time.time() + timeout
        while True:
            lines = self.consumer_lines()
            done_ids = {l.get("event_id") for l in lines if l.get("outcome") == "applied"}
            missing = [i for i in ids if i not in done_ids]
            if not missing or time.time() > end:
                other = [f"{l.get('event_id')}: {l.get('outcome')}: {l.get('msg')}" for l in lines
                         if l.get("event_id") in ids and l.get("outcome") not in (None, "applied")]
                return missing, other
            time.sleep(0.2)

    def stop_consumer(self):
        self.consumer.send_signal(signal.SIGTERM)
        try:
            rc = self.consumer.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.consumer.kill()
            rc = self.consumer.wait()
        self.consumer = None
        return rc


# ---- running the blocks ---------------------------------------------------------------

def summary(rc, out):
    """The line that says why: the first error line, else the last line."""
    lines = [l for l in out.splitlines() if l.strip()]
    err = [l for l in lines if re.search(r"\bERROR\b|error:|Error|failed|not found|No such", l)]
    why = (err[0] if err else (lines[-1] if lines else "no output")).strip()
    return f"exit {rc}: {why[:200]}" if rc is not None else f"timed out: {why[:200]}"


def transcript(m, body):
    """Runs each `$ ` line; the lines after it (to the next `$ `) must be its
    output, '...' or '…' standing for any text."""
    steps, cur = [], None
    lines = body.rstrip("\n").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            cmd = line[2:]
            while cmd.endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd = cmd[:-1] + " " + lines[i].strip()
            cur = (cmd, [])
            steps.append(cur)
        elif cur is not None:
            cur[1].append(line)
        i += 1
    problems = []
    for cmd, want in steps:
        rc, out = m.run(["bash", "-o", "pipefail", "-c", cmd])
        got = [l.rstrip() for l in out.rstrip("\n").split("\n")] if out.strip() else []
        pats = [re.compile("^" + ".*".join(re.escape(p) for p in re.split(r"\.\.\.|…", w.rstrip())) + "$")
                for w in want]
        if len(got) != len(pats) or not all(p.match(g) for p, g in zip(pats, got)):
            problems.append(f"$ {cmd}")
            problems += [f"  expected: {w}" for w in want]
            problems += [f"  got:      {g}" for g in got]
    return problems, len(steps)


UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def run_page(rel):
    blocks = marked_blocks(rel)
    if not blocks:
        ok(False, f"{rel}: has runnable blocks")
        return
    m = Machine(rel)
    try:
        for line, kind, arg, info, body in blocks:
            where = f"{rel}:{line}"
            t = time.monotonic()
            if kind == "file":
                path = os.path.join(m.work, arg)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(body)
                ok(True, f"{where} ({info or 'text'}): written to {arg}")
                continue
            if kind == "consumer":
                good, detail = m.start_consumer(arg, body)
                ok(good, f"{where} (json): `sidecar consume -c {arg}` runs ({detail if good else 'not consuming'})",
                   detail)
                continue
            if kind == "transcript":
                problems, n = transcript(m, body)
                ok(not problems, f"{where} (transcript): {n} command(s), output as shown"
                   f" ({time.monotonic() - t:.1f} s)", problems)
                continue
            if info not in ("sh", "bash"):
                ok(False, f"{where}: cannot run a block of '{info}' (sh only; other languages: runnable: file)")
                continue
            script = os.path.join(m.dir, f"block-{line}.sh")
            with open(script, "w") as f:
                f.write(body)
            rc, out = m.run(["bash", "-euo", "pipefail", script])
            label = f"{where} ({kind if kind != 'run' else info})"
            if rc != 0:
                ok(False, f"{label}: {summary(rc, out)}", out)
                continue
            # what it published (lines "published MODE EVENT_ID") must be applied by the page's consumer
            ids = re.findall(rf"^published \S+ ({UUID})$", out, re.M)
            if ids:
                if not m.consumer:
                    ok(False, f"{label}: published {len(ids)} messages but the page runs no consumer", out)
                    continue
                missing, other = m.applied(ids)
                ok(not missing, f"{label}: exit 0; {len(ids) - len(missing)} of {len(ids)} messages it published"
                   f" applied by the consumer ({time.monotonic() - t:.1f} s)",
                   [f"not applied: {i}" for i in missing] + other + out.splitlines()[-20:])
            else:
                ok(True, f"{label}: exit 0 ({time.monotonic() - t:.1f} s)")
        if m.consumer:
            lines = m.consumer_lines()
            dead = [f"{l.get('event_id')}: {l.get('msg')}" for l in lines
                    if l.get("outcome") in ("dead_lettered", "malformed", "retried")]
            rc = m.stop_consumer()
            ok(rc == 0 and not dead, f"{rel}: the page's consumer stopped cleanly (exit {rc}), "
               f"nothing retried or dead-lettered", dead)
    finally:
        m.close()


import tap  # noqa: E402

try:
    for page in PAGES:
        run_page(page)
finally:
    rabbitmqctl("delete_vhost", VHOST)
if tap._failed:
    print(f"# docs_run: {len(PAGES)} pages in {time.monotonic() - T0:.1f} s; kept for a look: {SCRATCH}",
          flush=True)
else:
    print(f"# docs_run: {len(PAGES)} pages in {time.monotonic() - T0:.1f} s", flush=True)
    shutil.rmtree(SCRATCH, ignore_errors=True)
done()
