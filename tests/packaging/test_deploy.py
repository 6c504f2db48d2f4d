"""What a system install gets, checked on `meson install` into a scratch
folder (no servers, no root needed beyond the build):
- the layout: one binary (the demo order-producer is not installed), the
  handlers, the schema with its grants, the units, the man pages, example
  configs that pass `sidecar check` up to the connection;
- the units: `systemd-analyze verify`, `systemd-analyze security` (offline)
  at or below the exposure the units were written to, the same hardening
  block in both, the settings the package documents;
- the man pages: groff renders them without a warning, every command of
  `sidecar help` and every key of `sidecar help config` is in them;
- one version everywhere: meson, `sidecar version`, debian/changelog, README.

usage: test_deploy.py BUILD_DIR SIDECAR"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tap import ok, done, skip  # noqa: E402

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
build, sidecar = sys.argv[1], sys.argv[2]
# The exposure `systemd-analyze security` gave the units when they were
# written (1.1 on systemd 252); more means a hardening setting went missing.
MAX_EXPOSURE = 1.5






def run(*cmd, **kw):
    return subprocess.run(list(cmd), capture_output=True, text=True, **kw)


info = json.load(open(os.path.join(build, "meson-info", "intro-projectinfo.json")))
version = info["version"]
opts = {o["name"]: o["value"] for o in json.load(open(os.path.join(build, "meson-info", "intro-buildoptions.json")))}
prefix, libdir = opts["prefix"], opts["libdir"]

# ---- one version -------------------------------------------------------------
r = run(sidecar, "version")
ok(r.returncode == 0 and r.stdout.startswith(f"sidecar {version} "), f"`sidecar version` says {version}", r.stdout + r.stderr)
first = open(os.path.join(root, "debian", "changelog")).readline()
m = re.match(r"sidecar \(([^)]+)\)", first)
ok(m and m.group(1) == version, f"debian/changelog's version is {version}", first)
readme = open(os.path.join(root, "README.md")).read()
ok(re.search(r"^" + re.escape(version) + r"\b", readme, re.M), f"README's status names {version}")

# ---- meson install -----------------------------------------------------------
dest = tempfile.mkdtemp(prefix="sc-install-")
r = run("meson", "install", "-C", build, "--no-rebuild", "--quiet", "--destdir", dest)
ok(r.returncode == 0, "meson install --destdir", r.stdout + r.stderr)
top = dest + prefix
bindir = os.path.join(top, opts["bindir"])
ok(sorted(os.listdir(bindir)) == ["sidecar"], "bin/ holds sidecar only (examples are not installed)",
   os.listdir(bindir))
handlerdir = os.path.join(top, libdir, "sidecar", "handlers")
ok(os.path.isdir(handlerdir) and sorted(os.listdir(handlerdir)) == ["notification_job.so", "sql.so"],
   f"handlers in {libdir}/sidecar/handlers", os.listdir(handlerdir) if os.path.isdir(handlerdir) else "")
sqldir = os.path.join(top, opts["datadir"], "sidecar", "sql")
src_sql = sorted(os.path.relpath(p, os.path.join(root, "sql")) for p in glob.glob(os.path.join(root, "sql", "**"), recursive=True) if os.path.isfile(p))
got_sql = sorted(os.path.relpath(p, sqldir) for p in glob.glob(os.path.join(sqldir, "**"), recursive=True) if os.path.isfile(p))
ok(src_sql == got_sql and "grants/consumer.sql" in got_sql, "share/sidecar/sql: the schema and the grants, as in sql/",
   f"source {src_sql}\ninstalled {got_sql}")
unitdir = opts.get("systemdunitdir") or os.path.join(prefix, "lib", "systemd", "system")
units = {u: os.path.join(dest + unitdir, u) for u in ("sidecar-consume@.service", "sidecar-relay@.service")}
ok(all(os.path.isfile(p) for p in units.values()), f"units in {unitdir}", units)
purge_units = {u: os.path.join(dest + unitdir, u) for u in ("sidecar-purge@.service", "sidecar-purge@.timer")}
ok(all(os.path.isfile(p) for p in purge_units.values()), f"the purge schedule's units in {unitdir}", purge_units)
mandir = os.path.join(top, opts["mandir"])
pages = {"sidecar.1": os.path.join(mandir, "man1", "sidecar.1"),
         "sidecar.json.5": os.path.join(mandir, "man5", "sidecar.json.5")}
ok(all(os.path.isfile(p) for p in pages.values()), "man pages sidecar(1) and sidecar.json(5)", pages)
exdir = os.path.join(top, opts["datadir"], "doc", "sidecar", "examples")
examples = sorted(os.listdir(exdir)) if os.path.isdir(exdir) else []
ok(examples == ["consume-tenants.json", "consume.json", "purge.json", "relay-tenants.json", "relay.json"], "example configs in share/doc/sidecar/examples", examples)

# The examples are valid configs: check gets past config and handlers and
# fails only at connecting (exit 1, not 2), with unreachable URLs given.
for e in examples:
    text = open(os.path.join(exdir, e)).read()
    consume = e.startswith("consume")
    ok(os.path.join(prefix, libdir, "sidecar", "handlers") in text or not consume,
       f"{e} names the installed handler folder" if consume else f"{e} needs no handler")
    cfg = os.path.join(dest, e)
    with open(cfg, "w") as f:
        f.write(text.replace(os.path.join(prefix, libdir, "sidecar", "handlers"), handlerdir))
    env = dict(os.environ, SIDECAR_AMQP_URL="amqp://u:p@127.0.0.1:1/%2f",
               SIDECAR_MYSQL_URL="mysql://u:p@127.0.0.1:1/app",
               SIDECAR_TENANTS_DATABASE_URL="mysql://u:p@127.0.0.1:1/app_{tenant}")
    if e == "purge.json":  # the purge unit's: no broker at all
        env.pop("SIDECAR_AMQP_URL")
        r = run(os.path.join(bindir, "sidecar"), "purge", "-c", cfg, "--older-than", "14d", "--dry-run",
                env=env, timeout=60)
    else:
        r = run(os.path.join(bindir, "sidecar"), "check", "-c", cfg, env=env, timeout=60)
    ok(r.returncode == 1 and "bad config" not in r.stderr, f"{e}: a valid config (it fails only at connecting)",
       r.stdout + r.stderr)

# ---- the units -----------------------------------------------------------------
texts = {u: open(p).read() for u, p in units.items() if os.path.isfile(p)}
for u, t in texts.items():
    for want in ("Type=notify", "NotifyAccess=main", "Restart=on-failure", "RestartPreventExitStatus=2",
                 "User=sidecar", "NoNewPrivileges=yes", "ProtectSystem=strict", "PrivateTmp=yes",
                 "ProtectHome=yes", "LoadCredential=amqp_url:", "LoadCredential=mysql_url:"):
        ok(re.search("^" + re.escape(want), t, re.M), f"{u}: {want}")
    ok(re.search(r"^CapabilityBoundingSet=$", t, re.M), f"{u}: an empty CapabilityBoundingSet")
    ro = re.search(r"^ReadOnlyPaths=(.*)$", t, re.M)
    ok(ro and os.path.join(prefix, libdir, "sidecar", "handlers") in ro.group(1).split(),
       f"{u}: the handler folder is a ReadOnlyPaths entry", ro.group(0) if ro else t)
    verb = "consume" if "consume" in u else "relay"
    ok(re.search(rf"^ExecStart={re.escape(os.path.join(prefix, opts['bindir']))}/sidecar {verb} -c \S+/%i\.json$", t, re.M),
       f"{u}: ExecStart runs `sidecar {verb} -c .../%i.json`")
purge_texts = {u: open(p).read() for u, p in purge_units.items() if os.path.isfile(p)}
purge_svc = purge_texts.get("sidecar-purge@.service", "")
for want in ("Type=oneshot", "User=sidecar", "LoadCredential=mysql_url:", "Environment=SIDECAR_PURGE_OLDER_THAN="):
    ok(re.search("^" + re.escape(want), purge_svc, re.M), f"sidecar-purge@.service: {want}")
ok(re.search(rf"^ExecStart={re.escape(os.path.join(prefix, opts['bindir']))}/sidecar purge -c \S+/%i\.json "
             r"--older-than \$\{SIDECAR_PURGE_OLDER_THAN\}$", purge_svc, re.M),
   "sidecar-purge@.service: ExecStart runs `sidecar purge -c .../%i.json --older-than ...`")
ok(not re.search(r"^LoadCredential=amqp_url", purge_svc, re.M), "sidecar-purge@.service: no broker credential")
timer = purge_texts.get("sidecar-purge@.timer", "")
ok(re.search(r"^OnCalendar=daily$", timer, re.M) and re.search(r"^Persistent=true$", timer, re.M),
   "sidecar-purge@.timer: daily, a missed run caught up at boot")
if len(texts) == 2:
    hard = [t[t.index("# Hardening"):].split("[Install]")[0] if "# Hardening" in t else "" for t in
            list(texts.values()) + [purge_svc]]
    ok(hard[0] and hard[0] == hard[1] == hard[2], "the three units carry the same hardening block")

analyze = shutil.which("systemd-analyze")
if not analyze:
    skip("systemd-analyze verify and security", "systemd-analyze is not installed")
else:
    # verify wants ExecStart's binary to exist: point it at the scratch install.
    vdir = tempfile.mkdtemp(prefix="sc-units-")
    with open(os.path.join(vdir, "sidecar-purge@.timer"), "w") as f:
        f.write(timer)
    for u, t in list(texts.items()) + [("sidecar-purge@.service", purge_svc)]:
        with open(os.path.join(vdir, u), "w") as f:
            f.write(t.replace(os.path.join(prefix, opts["bindir"], "sidecar"), os.path.join(bindir, "sidecar")))
        inst = u.replace("@.", "@demo.")
        r = run(analyze, "verify", "--man=no", os.path.join(vdir, inst), cwd=vdir)
        ok(r.returncode == 0 and not r.stderr.strip(), f"systemd-analyze verify {inst}", r.stdout + r.stderr)
        r = run(analyze, "security", "--offline=true", os.path.join(vdir, inst), cwd=vdir)
        m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", r.stdout)
        score = float(m.group(1)) if m else None
        print(f"# systemd-analyze security {inst}: {m.group(0).split(': ')[-1] if m else '?'}", flush=True)
        ok(score is not None and score <= MAX_EXPOSURE,
           f"systemd-analyze security {inst}: exposure {score} <= {MAX_EXPOSURE}", r.stdout + r.stderr)
        # only lines systemd marks as not set ("✗") matter
        for line in r.stdout.splitlines():
            if line.startswith("\u2717"):
                parts = line.split()
                print(f"#   not set: {parts[1]} ({parts[-1]})", flush=True)
    r = run(analyze, "verify", "--man=no", os.path.join(vdir, "sidecar-purge@demo.timer"), cwd=vdir)
    ok(r.returncode == 0 and not r.stderr.strip(), "systemd-analyze verify sidecar-purge@demo.timer", r.stdout + r.stderr)

# ---- the man pages -------------------------------------------------------------
groff = shutil.which("groff")
rendered = {}
for name, path in pages.items():
    if not os.path.isfile(path):
        continue
    src = open(path, encoding="ascii", errors="replace").read()
    ok(all(ord(c) < 128 for c in src), f"{name} is plain ASCII roff")
    ok(f'"sidecar {version}"' in src, f"{name} carries version {version}")
    if groff:
        r = run(groff, "-man", "-ww", "-z", "-Tutf8", path)
        ok(r.returncode == 0 and not r.stderr.strip(), f"groff renders {name} without a warning", r.stderr)
        rendered[name] = run(groff, "-man", "-Tascii", "-P-cbou", "-rLL=250n", path).stdout
if not groff:
    skip("man pages render", "groff is not installed")
else:
    text1 = " ".join(rendered.get("sidecar.1", "").split())
    usage = run(sidecar, "help").stdout
    cmds = [" ".join(l.split()) for l in usage.splitlines() if l.startswith("  ") and not l.startswith("      ")]
    missing = [c for c in cmds if f"sidecar {c}" not in text1]
    ok(cmds and not missing, f"sidecar(1) has all {len(cmds)} commands of `sidecar help`", missing)
    for section in ("EXIT STATUS", "ENVIRONMENT", "FILES"):
        ok(section in text1, f"sidecar(1) has {section}")
    for var in ("SIDECAR_AMQP_URL", "SIDECAR_MYSQL_URL_FILE", "SIDECAR_LOG_LEVEL", "CREDENTIALS_DIRECTORY"):
        ok(var in text1, f"sidecar(1) describes {var}")
    text5 = rendered.get("sidecar.json.5", "")
    table = run(sidecar, "help", "config").stdout.splitlines()[2:]
    keys = [l.split("|")[1].strip().strip("`") for l in table]
    missing = [k for k in keys if not re.search(r"^\s*" + re.escape(k) + r" \(default: ", text5, re.M)]
    ok(keys and not missing, f"sidecar.json(5) has all {len(keys)} keys of `sidecar help config`", missing)

shutil.rmtree(dest, ignore_errors=True)
done()
