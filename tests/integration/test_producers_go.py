"""examples/producers/go (database/sql, Debian's go-sql-driver/mysql) against
the real servers: see producers_common.py for what is run and checked."""
from producers_common import *

DRIVER = "/usr/share/gocode/src/github.com/go-sql-driver/mysql"
if not (shutil.which("go") and os.path.isdir(DRIVER)):
    toolchain_missing("go", f"go, {DRIVER}", "golang-go golang-github-go-sql-driver-mysql-dev")
out = tempfile.mkdtemp(prefix="sc-go-")
# Offline, in GOPATH mode: the driver comes from Debian's package, nothing
# from the network (GOPROXY=off).
goenv = {"GO111MODULE": "off", "GOPATH": "/usr/share/gocode", "GOPROXY": "off", "GOFLAGS": "",
         "GOCACHE": os.path.join(out, "cache")}
src = os.path.join(ROOT, "examples", "producers", "go")
r = run_cmd(["go", "vet", "main.go"], env=goenv, cwd=src)
ok(r.returncode == 0, "go: go vet is clean", detail=r.stdout + r.stderr)
fmt = run_cmd(["gofmt", "-l", "main.go"], cwd=src)
ok(fmt.returncode == 0 and not fmt.stdout.strip(), "go: gofmt has nothing to change", detail=fmt.stdout + fmt.stderr)
exe = os.path.join(out, "order-producer-go")
r = run_cmd(["go", "build", "-o", exe, "main.go"], env=goenv, cwd=src)
ok(r.returncode == 0, "go: builds offline (GO111MODULE=off GOPATH=/usr/share/gocode)", detail=r.stdout + r.stderr)
if r.returncode != 0:
    done()


# The flag package takes --count as well as -count.
run_suite("go", [exe])
done()
