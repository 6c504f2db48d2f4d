"""The alert rules and the Grafana dashboard, checked by promtool (Debian's
prometheus package): the rules parse and pass their unit tests
(sidecar-rules.test.yml), every dashboard query parses (as the recording
rules of deploy/prometheus/sidecar-dashboard-queries.yml, which must be what
dashboard_queries.py makes of the dashboard now) and returns series when fed
series of every metric the sidecar exports, every metric named in a rule or
a panel is one the code exports, and every alert has a unit test and a
paragraph in docs/operations.md. TAP."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import dashboard_queries  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tap import ok, done  # noqa: E402

RULES = os.path.join(ROOT, "deploy", "prometheus", "sidecar-rules.yml")
QUERIES = os.path.join(ROOT, "deploy", "prometheus", "sidecar-dashboard-queries.yml")
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "sidecar-dashboard.json")




def promtool(*args, cwd=None):
    p = subprocess.run(["promtool", *args], capture_output=True, text=True, cwd=cwd, timeout=120)
    return p.returncode, p.stdout + p.stderr


if not shutil.which("promtool"):
    print("Bail out! promtool is missing (Debian: prometheus; tests/install-deps installs it)")
    sys.exit(1)

rc, out = promtool("check", "rules", RULES)
ok(rc == 0, "promtool check rules deploy/prometheus/sidecar-rules.yml", out)
rc, out = promtool("test", "rules", "sidecar-rules.test.yml", cwd=HERE)
ok(rc == 0 and "SUCCESS" in out, "promtool test rules tests/prometheus/sidecar-rules.test.yml", out)
rc, out = promtool("check", "config", os.path.join(ROOT, "deploy", "prometheus", "prometheus.yml"))
ok(rc == 0, "promtool check config deploy/prometheus/prometheus.yml", out)

dashboard = json.load(open(DASHBOARD))
queries = dashboard_queries.queries(dashboard)
ok(len(queries) >= 10 and all(e for _, e in queries), f"the dashboard has {len(queries)} queries, none empty")
ok(open(QUERIES).read() == dashboard_queries.render(dashboard),
   "deploy/prometheus/sidecar-dashboard-queries.yml is current (run tests/prometheus/dashboard_queries.py)")
rc, out = promtool("check", "rules", QUERIES)
ok(rc == 0, "promtool check rules: every dashboard query parses", out)

# Every metric a rule or a panel names is one the code exports.
exported = {"up"}
for src in ("sidecar/metrics.c", "sidecar/metrics_tenants.c", "sidecar/console/console_metrics.c"):
    text = open(os.path.join(ROOT, src)).read()
    for name in re.findall(r'"(?:# TYPE |# HELP )?(sidecar_[a-z_]+)', text):
        exported.add(name)
    for name in re.findall(r"\{\"(sidecar_[a-z_]+)\"", text):
        exported.add(name)
hist = {f"{h}{s}" for h in exported for s in ("_bucket", "_sum", "_count")}
exprs = [e for _, e in queries] + re.findall(r"expr: \|?\n?((?:.*\n)+?)\s+(?:for|labels):", open(RULES).read())
named = set()
for e in exprs:
    named |= set(re.findall(r"\b(sidecar_[a-z_]+|up)\b(?=\s*[{\[)\s]|$)", e))
named = {m for m in named if not m.startswith("sidecar_dashboard")}
unknown = sorted(m for m in named if m not in exported and m not in hist)
ok(not unknown and len(named) > 15, f"the {len(named)} metrics the rules and panels name are exported by the code",
   "unknown: " + ", ".join(unknown))

# Each dashboard query returns series on series of every metric: absent()
# of its recording rule is empty.
work = tempfile.mkdtemp(prefix="sc-promtool-")
shutil.copy(QUERIES, os.path.join(work, "queries.yml"))
L = {"consume": 'job="sidecar-consume",instance="k1",consumer="planner"',
     "relay": 'job="sidecar-relay",instance="r1",worker="relay-1"',
     "console": 'job="sidecar-console",instance="c1"'}
series = []


def s(metric, labels, values):
    series.append({"series": f"{metric}{{{labels}}}", "values": values})


for outcome in ("applied", "duplicate", "retried", "dead_lettered", "unknown", "malformed"):
    s("sidecar_messages_total", L["consume"] + f',outcome="{outcome}"', "0+10x30")
for h in ("sidecar_receive_to_commit_seconds", "sidecar_batch_size", "sidecar_relay_confirm_seconds"):
    lab = L["relay"] if "relay" in h else L["consume"]
    for le in ("0.1", "1", "+Inf"):
        s(f"{h}_bucket", lab + f',le="{le}"', "0+5x30")
    s(f"{h}_sum", lab, "0+3x30")
    s(f"{h}_count", lab, "0+5x30")
s("sidecar_workers", L["consume"], "2x30")
s("sidecar_consuming", L["consume"], "2x30")
for m in ("published", "lease_lost", "returned", "nacked", "unconfirmed", "claim_failed", "invalid"):
    s(f"sidecar_relay_{m}_total", L["relay"], "0+2x30")
s("sidecar_relay_pending", L["relay"], "5x30")
s("sidecar_relay_oldest_pending_age_seconds", L["relay"], "1x30")
for server in ("mysql", "amqp"):
    s("sidecar_relay_connected", L["relay"] + f',server="{server}"', "1x30")
    s("sidecar_console_up", L["console"] + f',server="{server}"', "1x30")
for st in ("PENDING", "PUBLISHING", "PUBLISHED", "FAILED"):
    s("sidecar_outbox_rows", L["console"] + f',status="{st}"', "3x30")
s("sidecar_outbox_oldest_pending_age_seconds", L["console"], "1x30")
s("sidecar_outbox_expired_leases", L["console"], "0x30")
for m in ("sidecar_queue_messages", "sidecar_queue_consumers", "sidecar_dlq_messages"):
    s(m, L["console"] + ',consumer="planner",queue="planner"', "4x30")
for job in ("sidecar-consume", "sidecar-relay", "sidecar-console"):
    s("up", f'job="{job}",instance="x"', "1x30")
test = {"rule_files": ["queries.yml"], "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series,
                   "promql_expr_test": [{"expr": f"absent({record})", "eval_time": "20m", "exp_samples": []}
                                        for record, _ in queries]}]}
with open(os.path.join(work, "dashboard.test.yml"), "w") as f:
    json.dump(test, f, indent=1)  # JSON is YAML
rc, out = promtool("test", "rules", "dashboard.test.yml", cwd=work)
ok(rc == 0 and "SUCCESS" in out, f"each of the {len(queries)} dashboard queries returns series", out)
shutil.rmtree(work, ignore_errors=True)

# Every alert has a unit test and is explained in docs/operations.md.
alerts = re.findall(r"- alert: (\w+)", open(RULES).read())
tests_text = open(os.path.join(HERE, "sidecar-rules.test.yml")).read()
ops = open(os.path.join(ROOT, "docs", "operations.md")).read()
untested = [a for a in alerts if f"alertname: {a}\n" not in tests_text]
ok(len(alerts) >= 10 and not untested, f"each of the {len(alerts)} alerts has a unit test", ", ".join(untested))
undocumented = [a for a in alerts if f"`{a}`" not in ops]
ok(not undocumented, "each alert is explained in docs/operations.md", ", ".join(undocumented))

# Every metric the code exports has a row in docs/operations.md's table of
# meanings, and every alert a row names is a rule.
table = ops[ops.index("### What each metric means, and its alert"):]
table = table[:table.index("\n\n", table.index("| metric |"))]
rows = {}
for line in table.splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    m = re.fullmatch(r"`([a-z_]+)`", cells[0]) if cells else None
    if m and len(cells) == 3:
        rows[m.group(1)] = cells[2]
missing = sorted(m for m in exported if m not in rows)
ok(not missing and len(rows) >= 30, f"each of the {len(exported)} exported metrics has a row in docs/operations.md's table",
   "no row: " + ", ".join(missing))
extra = sorted(m for m in rows if m not in exported)
ok(not extra, "every metric of that table is exported", ", ".join(extra))
named_alerts = {a for cell in rows.values() for a in re.findall(r"`(Sidecar\w+)`", cell)}
bad = sorted(named_alerts - set(alerts))
ok(named_alerts and not bad, f"the {len(named_alerts)} alerts the table names are rules", ", ".join(bad))
unread = sorted(set(alerts) - named_alerts)
ok(not unread, "every rule appears beside a metric it reads", ", ".join(unread))

done()
