"""Repository and build hygiene (issue 10.16, 10.17):
- no Erlang crash dump is committed, and the test broker writes its dumps
  into its own folder, never into the caller's checkout;
- `meson setup` with the tests enabled works on a machine without
  docker-compose (the compose check is then simply not defined);
- no code or SQL reads or sets tx_isolation by name (@@tx_isolation,
  SET tx_isolation = ...): MySQL 8.0.3 removed it; transaction_isolation
  and SET TRANSACTION ISOLATION LEVEL work on both servers."""
import os
import shutil
import subprocess
import sys
import tempfile
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tap import ok, done  # noqa: E402

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))




tracked = subprocess.run(["git", "-C", root, "ls-files", "--", "erl_crash.dump", "*/erl_crash.dump"],
                         capture_output=True, text=True)
ok(tracked.returncode == 0 and tracked.stdout.strip() == "", "no erl_crash.dump is tracked",
   tracked.stdout + tracked.stderr)
ok("erl_crash.dump" in open(os.path.join(root, ".gitignore")).read().split(), ".gitignore names erl_crash.dump")
servers = open(os.path.join(root, "tests", "servers")).read()
ok('export ERL_CRASH_DUMP="$dir/rabbit/erl_crash.dump"' in servers,
   "tests/servers points the broker's ERL_CRASH_DUMP into its own folder")
dump = os.environ.get("ERL_CRASH_DUMP", "")
test_dir = os.environ.get("SC_TEST_DIR", "")
ok(bool(test_dir) and dump.startswith(test_dir + "/"),
   f"the test environment carries ERL_CRASH_DUMP under the servers' folder ({dump!r})")

import re  # noqa: E402
removed = re.compile(r"@@(?:session\.|global\.)?tx_isolation|\btx_isolation\s*=", re.I)
hits = []
for top in ("sidecar", "handlers", "producer", "examples", "include", "sql"):
    for d, _, files in os.walk(os.path.join(root, top)):
        for f in files:
            if f.endswith((".c", ".h", ".sql", ".py", ".go", ".java", ".js", ".sh")):
                path = os.path.join(d, f)
                for n, line in enumerate(open(path, errors="replace"), 1):
                    if removed.search(line):
                        hits.append(f"{os.path.relpath(path, root)}:{n}: {line.strip()}")
ok(not hits, "no code uses tx_isolation, the name MySQL 8 removed", "\n".join(hits))

# A PATH with everything but docker-compose.
shadow = tempfile.mkdtemp(prefix="sc-nocompose-")
seen = set()
for d in os.environ.get("PATH", "").split(":"):
    if not os.path.isdir(d):
        continue
    for name in os.listdir(d):
        if name in seen or name.startswith("docker-compose"):
            continue
        seen.add(name)
        try:
            os.symlink(os.path.join(d, name), os.path.join(shadow, name))
        except OSError:
            pass
ok(shutil.which("docker-compose", path=shadow) is None, "the shadow PATH has no docker-compose")
build = tempfile.mkdtemp(prefix="sc-setup-")
r = subprocess.run(["meson", "setup", build, root, "-Dtests=true"], capture_output=True, text=True,
                   env=dict(os.environ, PATH=shadow), timeout=300)
ok(r.returncode == 0, "meson setup -Dtests=true succeeds without docker-compose", r.stdout + r.stderr)
shutil.rmtree(build, ignore_errors=True)
shutil.rmtree(shadow, ignore_errors=True)
done()
