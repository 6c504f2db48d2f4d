"""examples/quickstart, the README's first command, run against the suite's
servers (its folder and ports, so it starts nothing new) and this build: it
exits 0 within a minute and shows the whole chain: per order of its run,
outbox PUBLISHED -> consumed -> a notification_job row; the relay's
republish recognised as a repeat; the malformed message dead-lettered."""
import json
import os
import re
import subprocess
import sys
import time

from harness import diag, done, is_eq, ok

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
build = os.path.dirname(os.path.dirname(os.environ["SIDECAR_BIN"]))
env = dict(os.environ, SC_DEMO_DIR=os.environ["SC_TEST_DIR"], SC_BUILD_DIR=build,
           SC_MYSQL_PORT=os.environ["SC_TEST_MYSQL_PORT"], SC_AMQP_PORT=os.environ["SC_TEST_AMQP_PORT"])
t0 = time.monotonic()
r = subprocess.run([os.path.join(root, "examples", "quickstart")], cwd=root, env=env,
                   capture_output=True, text=True, timeout=180)
took = time.monotonic() - t0
out = re.sub(r"\x1b\[[0-9;]*m", "", r.stdout + r.stderr)
is_eq(r.returncode, 0, "examples/quickstart exits 0")
ok(took < 60, f"in under a minute ({took:.1f} s, servers already up)")
for title in ("1. the demo producer", "2. the relay publishes", "3. a repeat", "4. a malformed message",
              "5. per order"):
    ok(f"== {title}" in out, f"shows step '{title}'", out[-2000:])
rows = [l for l in out.splitlines() if re.match(r"^\|\s+\d+ \| qs\d+-\d ", l)]
is_eq(len(rows), 3, "the summary has one row per order of this run")
ok(all(re.search(r"\| PUBLISHED \| yes\s+\| notification_job PENDING \|", l) for l in rows),
   "each: outbox PUBLISHED -> consumed yes -> notification_job row", "\n".join(rows))
is_eq(sum("delivered twice, applied once" in l for l in rows), 1, "one order delivered twice, applied once")
ok(re.search(r"repeats recognised as already consumed: [1-9]", out), "the repeat is recognised", out[-1500:])
ok(re.search(r"dead-lettered \(malformed\): [1-9]", out), "the malformed message is dead-lettered", out[-1500:])
ok(re.search(r"the relay published ([4-9]|\d\d+) messages", out), "the relay published the 3 orders and the repeat (and any row other tests left PENDING)", out[-800:])
ok("stopped cleanly (exit 0)" in out, "consume and relay stop cleanly")
m = re.search(r"^  (\S+/sidecar) console -c (\S+console\.json)", out, re.M)
ok(m and os.environ["SC_TEST_MYSQL_ADMIN_URL"] in out, "it ends with the `sidecar console` command and the admin URL",
   out[-800:])
if m:
    cfg = os.path.join(root, m.group(2))
    ok(os.path.exists(cfg) and json.load(open(cfg))["mysql"]["url"] == os.environ["SC_TEST_MYSQL_ADMIN_URL"],
       "its config connects as the admin user", cfg)
if r.returncode:
    for line in out.splitlines()[-30:]:
        diag(line)
done()
