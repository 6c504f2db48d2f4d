"""Every header under include/ and sidecar/ is self-contained: a file that
includes only it compiles (with the project's warnings, as C11 and, for the
public headers, as C++ too where a C++ compiler is present). Run by meson
with the build folder (for sc_build_config.h) as the first argument."""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
build = sys.argv[1]
cc = os.environ.get("CC", "cc")


def pkg(*names):
    for name in names:
        r = subprocess.run(["pkg-config", "--cflags", name], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split()
    return []


flags = ["-fsyntax-only", "-std=gnu11", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
         "-Wmissing-prototypes", "-Wstrict-prototypes", "-D_GNU_SOURCE",
         "-I" + os.path.join(root, "include"), "-I" + root, "-I" + os.path.join(root, "sidecar"),
         "-I" + build]
flags += pkg("mysqlclient", "libmariadb") + pkg("librabbitmq") + pkg("jansson") + pkg("libmicrohttpd")
headers = sorted(glob.glob(os.path.join(root, "include", "**", "*.h"), recursive=True) +
                 glob.glob(os.path.join(root, "sidecar", "*.h")))
n = failed = 0
tmp = tempfile.mkdtemp(prefix="sc-hdr-")
for h in headers:
    rel = os.path.relpath(h, root)
    src = os.path.join(tmp, "one.c")
    with open(src, "w") as f:
        # Twice: the include guard must hold too.
        f.write(f'#include "{h}"\n#include "{h}"\n')
    r = subprocess.run([cc, *flags, src], capture_output=True, text=True)
    n += 1
    good = r.returncode == 0
    failed += not good
    print(("ok" if good else "not ok") + f" {n} - {rel} compiles on its own", flush=True)
    if not good:
        for line in (r.stdout + r.stderr).splitlines()[:15]:
            print("#   " + line)
cxx = shutil.which("c++") or shutil.which("g++")
for h in glob.glob(os.path.join(root, "include", "**", "*.h"), recursive=True):
    if not cxx:
        break
    src = os.path.join(tmp, "one.cc")
    with open(src, "w") as f:
        f.write(f'#include "{h}"\n')
    r = subprocess.run([cxx, "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
                        "-I" + os.path.join(root, "include"), src], capture_output=True, text=True)
    n += 1
    good = r.returncode == 0
    failed += not good
    print(("ok" if good else "not ok") + f" {n} - {os.path.relpath(h, root)} compiles as C++", flush=True)
    if not good:
        for line in (r.stdout + r.stderr).splitlines()[:15]:
            print("#   " + line)
shutil.rmtree(tmp, ignore_errors=True)
print(f"1..{n}")
sys.exit(1 if failed else 0)
