"""The configuration reference in docs/configuration.md is the output of
`sidecar help config`, which prints it from the config tables: the docs
cannot drift from the code (issue 14.4). Also checks every key the loader
knows appears once."""
import os
import subprocess
import sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tap import ok, done  # noqa: E402

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sidecar = sys.argv[1]




r = subprocess.run([sidecar, "help", "config"], capture_output=True, text=True)
ok(r.returncode == 0 and r.stdout.startswith("| key | default | meaning |"), "sidecar help config prints the table", r.stderr)
ref = r.stdout.rstrip("\n").splitlines()
doc = open(os.path.join(root, "docs", "configuration.md")).read().splitlines()
start = next((i for i, l in enumerate(doc) if l.startswith("| key | default | meaning |")), None)
ok(start is not None, "docs/configuration.md has the reference table")
block = []
if start is not None:
    for l in doc[start:]:
        if not l.startswith("|"):
            break
        block.append(l)
missing = [l for l in ref if l not in block]
extra = [l for l in block if l not in ref]
ok(not missing and not extra, "docs/configuration.md's table is exactly `sidecar help config`",
   "\n".join(["missing from the docs:"] + missing + ["in the docs only:"] + extra))
keys = [l.split("|")[1].strip() for l in ref[2:]]
ok(len(keys) == len(set(keys)) and len(keys) > 30, f"{len(keys)} keys, each once")
ok(all(l.split("|")[3].strip() for l in ref[2:]), "every key has a description",
   "\n".join(l for l in ref[2:] if not l.split("|")[3].strip()))
done()
