"""The Node packages some tests use as outside readers (the official
CloudEvents SDK, an AMQP client, a MySQL grammar), installed once with npm
from tests/integration/node/package.json into .local/node (ignored by git)."""
import os
import shutil
import subprocess

from harness import bail

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def node_modules():
    """The node_modules folder with the packages of node/package.json."""
    if not shutil.which("node") or not shutil.which("npm"):
        bail("node and npm are needed (Debian: nodejs npm)")
    dest = os.path.join(ROOT, ".local", "node")
    want = open(os.path.join(HERE, "node", "package.json")).read()
    have_path = os.path.join(dest, "package.json")
    have = open(have_path).read() if os.path.exists(have_path) else None
    mods = os.path.join(dest, "node_modules")
    if have != want or not os.path.isdir(mods):
        os.makedirs(dest, exist_ok=True)
        with open(have_path, "w") as f:
            f.write(want)
        p = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=dest,
                           capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            bail("npm install failed: " + p.stderr[-500:])
    return mods
