"""The operator commands with tenants: `sidecar migrate --all` brings two
fresh, empty tenant databases to the schema of sql/schema (and says so once
more as "already current"), continues past a tenant whose database does not
exist and exits 1 then; `--tenant` with a name tenants.names refuses is
refused naming it; `inspect --tenant` reads that tenant's database only;
`purge` goes over mysql.url's database and every listed tenant, reporting
each, `--tenant` limits it to one, and a tenant out of reach is reported
while the others are still purged (exit 1). Exact rows by event id."""
import re
import uuid

from harness import *
from tenants_common import *

sfx = suffix()
P, Q, M = "p_" + sfx, "q_" + sfx, "m_" + sfx  # M: its database never exists
REF = "r_" + sfx                              # made by the tests' own loader, to compare with
SCHEMA = os.path.join(ROOT, "sql", "schema")
N_FILES = len([f for f in os.listdir(SCHEMA) if re.match(r"^\d{3}_.*\.sql$", f)])
OWNER, OWNER_PW = "tn_owner_" + sfx, "owner-" + sfx

make_tenant_db(P, schema=False)
make_tenant_db(Q, schema=False)
drop_tenant_db(M)
make_tenant_db(REF)
# migrate needs a user that may change the schema: one with every privilege
# on the tenants' databases and nothing else.
with admin_db() as c, c.cursor() as cur:
    cur.execute(f"CREATE USER '{OWNER}'@'%' IDENTIFIED BY '{OWNER_PW}'")
    for t in (P, Q, M):
        cur.execute(f"GRANT ALL ON `{PREFIX + t}`.* TO '{OWNER}'@'%'")
owner_url = f"mysql://{OWNER}:{OWNER_PW}@127.0.0.1:{os.environ['SC_TEST_MYSQL_PORT']}/{PREFIX}{{tenant}}"


def config(tenants_list, tenants=True):
    c = {"amqp": {"url": os.environ["SC_TEST_AMQP_URL"]},
         "mysql": {"url": os.environ["SC_TEST_MYSQL_URL"]}, "consumers": []}
    if tenants:
        c["tenants"] = {"key": "extension:tenant", "database_url": owner_url, "list": tenants_list}
    return c


def run_merged(args, cfg):
    """As run_sidecar_cmd, stdout and stderr in one pipe: the lines in the
    order the command wrote them."""
    import subprocess
    import tempfile
    d = tempfile.mkdtemp(prefix="sc-it-")
    path = os.path.join(d, "c.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    r = subprocess.run([SIDECAR, *args, "-c", path], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60)
    return r.returncode, r.stdout


def lines(out):
    return out.splitlines()


def tables(tenant):
    return sorted(r[0] for r in tenant_query(tenant, "SHOW TABLES"))


def definitions(tenant):
    out = {}
    for t in tables(tenant):
        out[t] = tenant_query(tenant, f"SHOW CREATE TABLE `{t}`")[0][1]
    return out


# --- migrate --------------------------------------------------------------
ok(N_FILES >= 10, f"sql/schema has its {N_FILES} files")
rc, out = run_sidecar_cmd(["migrate", "--all", "--schema", SCHEMA], config([P, Q]))
is_eq(rc, 0, "migrate --all onto two empty databases: exit 0")
is_eq(lines(out), [f"tenant {P}: database {PREFIX}{P}: {N_FILES} files applied, {N_FILES} changed the schema",
                   f"tenant {Q}: database {PREFIX}{Q}: {N_FILES} files applied, {N_FILES} changed the schema",
                   "migrate: 2 tenants, 2 brought current, 0 failed"],
      "one line per tenant: every file applied and each changed the schema")
want_tables = ["consumed_event", "consumer_held_event", "consumer_held_key", "consumer_tenant_copy",
               "outbox_event", "relay_checkpoint"]
is_eq(tables(P), want_tables, f"tenant {P}: the schema's tables")
is_eq(tables(Q), want_tables, f"tenant {Q}: the schema's tables")
ref = {t: d for t, d in definitions(REF).items() if t in want_tables}
is_eq(definitions(P), ref, f"tenant {P}: every table defined as the schema files define it")
is_eq(definitions(Q), ref, f"tenant {Q}: every table defined as the schema files define it")

rc, out = run_sidecar_cmd(["migrate", "--all", "--schema", SCHEMA], config([P, Q]))
is_eq(rc, 0, "migrate --all again: exit 0")
is_eq(lines(out), [f"tenant {P}: database {PREFIX}{P}: already current ({N_FILES} files applied, none changed anything)",
                   f"tenant {Q}: database {PREFIX}{Q}: already current ({N_FILES} files applied, none changed anything)",
                   "migrate: 2 tenants, 2 brought current, 0 failed"],
      "a second run: both already current")

rc, out = run_sidecar_cmd(["migrate", "--tenant", Q, "--schema", SCHEMA], config([P]))
is_eq((rc, lines(out)), (0, [f"tenant {Q}: database {PREFIX}{Q}: already current ({N_FILES} files "
                             "applied, none changed anything)"]),
      "migrate --tenant: only that tenant (listed or not)")

rc, out = run_sidecar_cmd(["migrate", "--tenant", "Bad_" + sfx, "--schema", SCHEMA], config([P, Q]))
is_eq((rc, lines(out)), (2, [f'sidecar: migrate: --tenant: tenant name "Bad_{sfx}" does not match '
                             'tenants.names']),
      "migrate --tenant with a name tenants.names refuses: exit 2 naming it")

rc, out = run_merged(["migrate", "--all", "--schema", SCHEMA], config([P, M, Q]))
is_eq(rc, 1, "migrate --all with a tenant whose database does not exist: exit 1")
got = lines(out)
ok(f"tenant {P}: database {PREFIX}{P}: already current ({N_FILES} files applied, none changed anything)" in got
   and f"tenant {Q}: database {PREFIX}{Q}: already current ({N_FILES} files applied, none changed anything)" in got,
   "the tenants before and after it were still migrated", detail=out)
miss = [l for l in got if l.startswith(f"sidecar migrate: tenant {M}: its database does not exist")]
is_eq(len(miss), 1, "the missing one: one line naming the tenant, the database not created")
is_eq([l.split(":")[0] for l in got], [f"tenant {P}", "sidecar migrate", f"tenant {Q}", "migrate"],
      "in the order of tenants.list, the summary last")
ok(miss and f"Unknown database '{PREFIX}{M}'" in miss[0], "with the server's error", detail=out)
is_eq(got[-1], "migrate: 3 tenants, 2 brought current, 1 failed", "the summary counts it")
is_eq(query("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE schema_name = %s", (PREFIX + M,))[0][0],
      0, "no database was created for it")

rc, out = run_sidecar_cmd(["migrate", "--tenant", P, "--schema", SCHEMA], config([], tenants=False))
is_eq((rc, lines(out)), (2, ["sidecar: migrate: --tenant needs a tenants section in the config"]),
      "migrate --tenant without a tenants section: refused")

# --- inspect --tenant -----------------------------------------------------
ep, eq_ = str(uuid.uuid4()), str(uuid.uuid4())
agg = "T" + sfx


def insert_outbox_row(tenant, eid, status, age_days, aggregate_id="7"):
    published = f"UTC_TIMESTAMP(6) - INTERVAL {age_days} DAY" if status == "PUBLISHED" else "NULL"
    tenant_query(tenant, "INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, "
                 "event_version, payload, status, created_at, published_at) VALUES (%s, %s, %s, "
                 f"'ORDER_ACCEPTED', 1, '{{}}', %s, UTC_TIMESTAMP(6) - INTERVAL {age_days} DAY, {published})",
                 (eid, agg, aggregate_id, status))


def insert_consumed(tenant, eid, age_days):
    tenant_query(tenant, "INSERT INTO consumed_event (consumer_name, event_id, consumed_at) VALUES "
                 f"('tools', %s, UTC_TIMESTAMP(6) - INTERVAL {age_days} DAY)", (eid,))


insert_outbox_row(P, ep, "PENDING", 0)
insert_outbox_row(Q, eq_, "PENDING", 0)
insert_consumed(P, ep, 0)
rc, out = run_sidecar_cmd(["inspect", ep, "--tenant", P, "--json"], config([P, Q]))
j = json.loads(out) if rc == 0 else {}
is_eq((rc, j.get("tenant"), (j.get("outbox") or {}).get("status"),
       [c["consumer"] for c in j.get("consumed") or []]), (0, P, "PENDING", ["tools"]),
      "inspect --tenant P: P's outbox row and its consumed_event row")
rc, out = run_sidecar_cmd(["inspect", ep, "--tenant", Q, "--json"], config([P, Q]))
j = json.loads(out) if out.startswith("{") else {}
is_eq((rc, j.get("known"), j.get("outbox"), j.get("consumed")), (1, False, None, []),
      "inspect --tenant Q of P's event: nothing known there")
rc, out = run_sidecar_cmd(["inspect", ep, "--json"], config([P, Q]))
j = json.loads(out) if out.startswith("{") else {}
is_eq((rc, j.get("known")), (1, False), "inspect without --tenant: mysql.url's database knows nothing of it")
rc, out = run_sidecar_cmd(["inspect", ep, "--tenant", P], config([P, Q]))
is_eq((rc, lines(out)[:3]), (0, [f"event {ep}", f"  tenant:   {P} (its database)",
                                 lines(out)[2] if len(lines(out)) > 2 else None]),
      "the text form names the tenant")
ok(len(lines(out)) > 2 and lines(out)[2].startswith("  outbox:   PENDING (type ORDER_ACCEPTED v1"),
   "and shows P's row", detail=out)
for t, e in ((P, ep), (Q, eq_)):
    rc, out = run_sidecar_cmd(["inspect", "--aggregate", agg, "7", "--json", "--tenant", t], config([P, Q]))
    j = json.loads(out) if rc == 0 else {}
    is_eq((rc, j.get("tenant"), [ev["event_id"] for ev in j.get("events", [])]), (0, t, [e]),
          f"inspect --aggregate --tenant {t[0]}: only that tenant's event")
rc, out = run_sidecar_cmd(["inspect", ep, "--tenant", P], config([], tenants=False))
is_eq((rc, lines(out)), (2, ["sidecar: inspect: --tenant needs a tenants section in the config"]),
      "inspect --tenant without a tenants section: refused")
rc, out = run_sidecar_cmd(["inspect", ep, "--tenant", M], config([P, Q]))
is_eq((rc, lines(out)), (1, [f"sidecar inspect: tenant {M}: mysql: error 1049: Unknown database '{PREFIX}{M}'"]),
      "inspect --tenant of a missing database: exit 1 naming the tenant")

# --- purge ----------------------------------------------------------------
def seed(tenant):
    """3 old PUBLISHED rows and 2 old consumed_event rows (to go); a recent
    PUBLISHED row, an old PENDING row and a recent consumed row (to stay)."""
    old = [str(uuid.uuid4()) for _ in range(3)]
    for e in old:
        insert_outbox_row(tenant, e, "PUBLISHED", 40)
    stay = [str(uuid.uuid4()), str(uuid.uuid4())]
    insert_outbox_row(tenant, stay[0], "PUBLISHED", 1)
    insert_outbox_row(tenant, stay[1], "PENDING", 40)
    old_c = [str(uuid.uuid4()) for _ in range(2)]
    for e in old_c:
        insert_consumed(tenant, e, 40)
    stay_c = str(uuid.uuid4())
    insert_consumed(tenant, stay_c, 1)
    return old, stay, old_c, stay_c


def left(tenant, seeded):
    old, stay, old_c, stay_c = seeded
    return (tenant_count(tenant, "outbox_event", old), tenant_count(tenant, "outbox_event", stay),
            tenant_count(tenant, "consumed_event", old_c), tenant_count(tenant, "consumed_event", [stay_c]))


def purged_lines(out, tenant):
    return [re.sub(r" \(\d+ batches\)$", "", l) for l in lines(out) if l.startswith(f"tenant {tenant}: ")]


sp, sq = seed(P), seed(Q)
rc, out = run_sidecar_cmd(["purge", "--older-than", "30d"], config([P, Q]))
is_eq(rc, 0, "purge over two tenants: exit 0")
is_eq(purged_lines(out, P), [f"tenant {P}: consumed_event: deleted 2 rows",
                             f"tenant {P}: outbox_event (PUBLISHED): deleted 3 rows"], "tenant P reported")
is_eq(purged_lines(out, Q), [f"tenant {Q}: consumed_event: deleted 2 rows",
                             f"tenant {Q}: outbox_event (PUBLISHED): deleted 3 rows"], "tenant Q reported")
ok(any(re.match(r"^consumed_event: deleted \d+ rows", l) for l in lines(out)),
   "mysql.url's database purged too, its lines unprefixed as before", detail=out)
is_eq(lines(out)[-1], "purge: 3 databases (mysql.url and 2 tenants), none failed", "the summary")
is_eq(left(P, sp), (0, 2, 0, 1), "tenant P: the old PUBLISHED and consumed rows gone, the rest kept")
is_eq(left(Q, sq), (0, 2, 0, 1), "tenant Q: the old PUBLISHED and consumed rows gone, the rest kept")

sp, sq = seed(P), seed(Q)
rc, out = run_sidecar_cmd(["purge", "--older-than", "30d", "--tenant", Q], config([P, Q]))
is_eq((rc, [re.sub(r" \(\d+ batches\)$", "", l) for l in lines(out)]),
      (0, [f"tenant {Q}: consumed_event: deleted 2 rows", f"tenant {Q}: outbox_event (PUBLISHED): deleted 3 rows"]),
      "purge --tenant Q: only Q reported")
is_eq(left(Q, sq), (0, 2, 0, 1), "tenant Q purged")
is_eq(left(P, sp), (3, 2, 2, 1), "tenant P untouched")

# P out of reach (every privilege of the user taken): reported, Q still purged.
with admin_db() as c, c.cursor() as cur:
    cur.execute(f"REVOKE ALL ON `{PREFIX + P}`.* FROM '{OWNER}'@'%'")
sq = seed(Q)
rc, out = run_merged(["purge", "--older-than", "30d"], config([P, Q]))
is_eq(rc, 1, "purge with tenant P out of reach: exit 1")
is_eq([re.sub(r" \(\d+ batches\)$", "", l) for l in lines(out)[-4:]],
      [f"sidecar purge: tenant {P}: mysql: error 1044: Access denied for user '{OWNER}'@'%' to database '{PREFIX}{P}'",
       f"tenant {Q}: consumed_event: deleted 2 rows", f"tenant {Q}: outbox_event (PUBLISHED): deleted 3 rows",
       f"purge: 3 databases (mysql.url and 2 tenants), 1 failed (the first: {P})"],
      "P's error named, Q after it, and the summary counts it")
is_eq(purged_lines(out, Q), [f"tenant {Q}: consumed_event: deleted 2 rows",
                             f"tenant {Q}: outbox_event (PUBLISHED): deleted 3 rows"],
      "Q after it still purged and reported")
is_eq(left(Q, sq), (0, 2, 0, 1), "tenant Q: its old rows gone")
is_eq(left(P, sp), (3, 2, 2, 1), "tenant P: nothing deleted")

rc, out = run_sidecar_cmd(["purge", "--older-than", "30d", "--tenant", Q], config([], tenants=False))
is_eq((rc, lines(out)), (2, ["sidecar: purge: --tenant needs a tenants section in the config"]),
      "purge --tenant without a tenants section: refused")

with admin_db() as c, c.cursor() as cur:
    cur.execute(f"DROP USER '{OWNER}'@'%'")
for t in (P, Q, M, REF):
    drop_tenant_db(t)
done()
