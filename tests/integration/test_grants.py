"""The roles of sql/grants/ hold only what they need: the integration tests
run as these users, and here each is refused what it must not do.

Also: the relay's UPDATE covers only the columns it sets (never the event:
payload, type, ids); no grants file carries a password (the role's comes from
@sidecar_<role>_password, else a random one); the compose route, where
examples/compose/with-secrets.sh takes the passwords from the URL secrets and
sql/zz_grants.sh applies them, run here outside containers; and the documented
way to keep consumers out of each other's dedup history (a schema each)."""
import glob
import re
import shutil
import urllib.parse

from harness import *


def connect(role):
    m = re.match(r"mysql://([^:]+):([^@]+)@([^:]+):(\d+)/(\w+)", os.environ[f"SC_TEST_MYSQL_{role}_URL"])
    return pymysql.connect(user=m[1], password=m[2], host=m[3], port=int(m[4]), database=m[5], autocommit=False)


def refused(role, sql, label):
    c = connect(role)
    try:
        c.cursor().execute(sql)
        ok(False, f"{role.lower()} must not: {label}")
    except pymysql.err.OperationalError as e:
        ok(e.args[0] in (1142, 1143), f"{role.lower()} is refused: {label} ({e.args[0]})")
    except pymysql.err.ProgrammingError as e:
        ok(e.args[0] in (1142, 1143), f"{role.lower()} is refused: {label} ({e.args[0]})")
    finally:
        c.rollback()
        c.close()


refused("CONSUMER", "UPDATE outbox_event SET status = 'PUBLISHED'", "mark outbox rows")
refused("CONSUMER", "SELECT * FROM orders", "read the business table")
refused("CONSUMER", "DROP TABLE consumed_event", "drop tables")
refused("RELAY", "INSERT INTO consumed_event (consumer_name, event_id, consumed_at) VALUES ('x', 'y', NOW())", "claim events")
refused("RELAY", "DELETE FROM outbox_event", "delete outbox rows")
refused("RELAY", "SELECT * FROM notification_job", "read handler tables")
refused("PRODUCER", "UPDATE outbox_event SET status = 'PUBLISHED'", "publish-mark its own events")
refused("PRODUCER", "SELECT * FROM consumed_event", "read consumer bookkeeping")
refused("ADMIN", "INSERT INTO consumed_event (consumer_name, event_id, consumed_at) VALUES ('x', 'y', NOW())", "claim events")
# the console's one write is status and lease (FAILED -> PENDING); nothing else of a row
refused("ADMIN", "UPDATE outbox_event SET payload = '{}'", "change outbox payloads")
refused("ADMIN", "UPDATE outbox_event SET event_type = 'X', aggregate_id = 'y'", "change what an event is")
c = connect("RELAY")
cur = c.cursor()
cur.execute("SELECT COUNT(*) FROM outbox_event WHERE status = 'PENDING' FOR UPDATE SKIP LOCKED")
ok(cur.fetchone() is not None, "the relay can claim with FOR UPDATE SKIP LOCKED")
c.rollback()
c.close()
# ---- the relay updates only the columns it sets ----------------------------
for col, val in (("payload", "'{}'"), ("event_type", "'X'"), ("aggregate_id", "'1'"),
                 ("aggregate_type", "'X'"), ("event_id", "event_id"), ("event_version", "2"),
                 ("created_at", "created_at")):
    refused("RELAY", f"UPDATE outbox_event SET {col} = {val} WHERE event_id = 'none'", f"UPDATE {col}")
c = connect("RELAY")
try:
    c.cursor().execute("UPDATE outbox_event SET status = status, lease_owner = lease_owner, "
                       "lease_until = lease_until, publish_attempts = publish_attempts, "
                       "published_at = published_at WHERE event_id = 'none'")
    ok(True, "the relay may update status, lease_owner, lease_until, publish_attempts, published_at")
except pymysql.err.MySQLError as e:
    ok(False, f"the relay may update its columns ({e})")
finally:
    c.rollback()
    c.close()

# ---- no password in sql/grants/ --------------------------------------------
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
GRANTS = os.path.join(ROOT, "sql", "grants")
fixed = [f for f in sorted(os.listdir(GRANTS))
         if re.search(r"IDENTIFIED\s+BY\s+'(?!,)", open(os.path.join(GRANTS, f)).read(), re.I)]
is_eq(fixed, [], "no grants file has a password written in it")

# ---- sql/grants/ names only the schema's tables -----------------------------
# A system install applies sql/schema/ and then sql/grants/ (docs/deploy.md):
# a grant on an example table stops zz_grants.sh there (ERROR 1146), so the
# example tables' grants are in sql/examples/grants/, applied with them.
def tables_in(d, rx):
    return {t for f in glob.glob(os.path.join(ROOT, "sql", d, "*.sql"))
            for t in re.findall(rx, open(f).read(), re.I)}


schema_tables = tables_in("schema", r"CREATE TABLE IF NOT EXISTS\s+`?(\w+)")
granted = tables_in("grants", r"\bON\s+app\.(\w+)")
is_eq(sorted(granted - schema_tables), [], "sql/grants/ grants on sql/schema/'s tables only")
example_tables = tables_in("examples", r"CREATE TABLE IF NOT EXISTS\s+`?(\w+)")
granted_ex = tables_in("examples/grants", r"\bON\s+app\.(\w+)")
ok(granted_ex and granted_ex <= example_tables, f"sql/examples/grants/ grants on the example tables ({sorted(granted_ex)})")

MYSQL_CLIENT = shutil.which("mariadb") or shutil.which("mysql")
SOCK = os.environ["SC_TEST_MYSQL_SOCKET"]
PORT = int(os.environ["SC_TEST_MYSQL_PORT"])
tag = "zzt" + suffix()[:5]


def renamed(text):
    """A grants file for users tag_<role> instead of sidecar_<role>."""
    return re.sub(r"(?<![@\w])sidecar_(consumer|relay|producer|admin)\b(?!_password)", tag + r"_\1", text)


def as_root(sql_text):
    r = subprocess.run([MYSQL_CLIENT, "--no-defaults", "--protocol=socket", f"--socket={SOCK}", "-uroot", "app"],
                       input=sql_text, capture_output=True, text=True, timeout=60)
    return r.returncode, r.stderr


def can_login(user, password):
    try:
        pymysql.connect(host="127.0.0.1", port=PORT, user=user, password=password, database="app").close()
        return True
    except pymysql.err.OperationalError:
        return False


consumer_sql = renamed(open(os.path.join(GRANTS, "consumer.sql")).read())
rc, err = as_root(consumer_sql)
is_eq((rc, err), (0, ""), "consumer.sql runs without a password variable")
ok(not can_login(f"{tag}_consumer", "consumer-secret"), "and then the old fixed password does not log in")
query(f"DROP USER IF EXISTS '{tag}_consumer'@'%'")
rc, err = as_root("SET @sidecar_consumer_password = 'it''s/a?secret#\\\\x';\n" + consumer_sql)
ok(rc == 0 and can_login(f"{tag}_consumer", "it's/a?secret#\\x"),
   "with @sidecar_consumer_password set, that password (quote, backslash, / ? #) logs in", detail=err)
query(f"DROP USER IF EXISTS '{tag}_consumer'@'%'")

# ---- the compose route, outside containers ---------------------------------
work = tempfile.mkdtemp(prefix="sc-grants-")
secrets, init, datadir, gdir = (os.path.join(work, d) for d in ("secrets", "init", "data", "grants"))
for d in (secrets, datadir, gdir):
    os.makedirs(d)
for f in os.listdir(GRANTS):
    with open(os.path.join(gdir, f), "w") as out:
        out.write(renamed(open(os.path.join(GRANTS, f)).read()))
pw = {"consumer": "c0n/sum?er#\\'x", "relay": "r3lay%20/pw", "producer": "pr0d:ucer@x"}
for role, p in pw.items():
    with open(os.path.join(secrets, f"{role}_mysql_url"), "w") as out:
        out.write(f"mysql://{tag}_{role}:{urllib.parse.quote(p, safe='')}@mysql:3306/app\n")
with open(os.path.join(secrets, "amqp_url"), "w") as out:
    out.write(f"amqp://rabbit%40user:{urllib.parse.quote('am/qp?p#w', safe='')}@rabbitmq:5672/%2f\n")
wrapper = os.path.join(ROOT, "examples", "compose", "with-secrets.sh")
env = dict(os.environ, SIDECAR_SECRETS_DIR=secrets, SIDECAR_INIT_DIR=init, SIDECAR_DATADIR=datadir)
r = subprocess.run(["bash", wrapper, "mysql", "true"], env=env, capture_output=True, text=True, timeout=30)
is_eq(r.returncode, 0, f"with-secrets.sh mysql: runs the next entrypoint ({r.stderr.strip()})")
sets = open(os.path.join(init, "role-passwords.sql")).read() if os.path.exists(os.path.join(init, "role-passwords.sql")) else ""
ok(sets.count("SET @sidecar_") == 3, "it wrote one SET per role URL secret", detail=sets)
ok(oct(os.stat(os.path.join(init, "role-passwords.sql")).st_mode & 0o777) == "0o600" if sets else False,
   "readable by its owner only")
client = f'{MYSQL_CLIENT} --no-defaults --protocol=socket --socket={SOCK} -uroot app'
r = subprocess.run(["bash", "-c", f'set -eo pipefail; docker_process_sql() {{ {client} "$@"; }}; '
                    f'. {os.path.join(ROOT, "sql", "zz_grants.sh")}'],
                   env=dict(env, SIDECAR_GRANTS_DIR=gdir), capture_output=True, text=True, timeout=60)
is_eq(r.returncode, 0, f"zz_grants.sh applies every grants file ({r.stderr.strip()[-300:]})")
ok(not os.path.exists(os.path.join(init, "role-passwords.sql")), "and deletes the passwords file")
for role, p in pw.items():
    ok(can_login(f"{tag}_{role}", p), f"{role}: the password of its URL secret logs in ({p!r})")
ok(not can_login(f"{tag}_admin", "admin-secret"), "admin (no URL secret): a random password, not a fixed one")
os.makedirs(os.path.join(datadir, "mysql"))
r = subprocess.run(["bash", wrapper, "mysql", "true"], env=env, capture_output=True, text=True, timeout=30)
ok(r.returncode == 0 and not os.path.exists(os.path.join(init, "role-passwords.sql")),
   "on a later start (data directory initialised) no passwords file is written")
r = subprocess.run(["bash", wrapper, "rabbitmq", "bash", "-c", 'printf "%s\\n%s" "$RABBITMQ_DEFAULT_USER" "$RABBITMQ_DEFAULT_PASS"'],
                   env=env, capture_output=True, text=True, timeout=30)
is_eq(r.stdout.split("\n"), ["rabbit@user", "am/qp?p#w"],
      "with-secrets.sh rabbitmq: the broker's user and password from the amqp_url secret, decoded")
for role in ("consumer", "relay", "producer", "admin"):
    query(f"DROP USER IF EXISTS '{tag}_{role}'@'%'")
shutil.rmtree(work, ignore_errors=True)

# ---- a schema per consumer keeps them out of each other's history ----------
iso = f"app_iso_{tag}"
query(f"CREATE DATABASE {iso}")
with admin_db() as c2, c2.cursor() as cur:
    ddl = "\n".join(l for l in open(os.path.join(ROOT, "sql", "schema", "002_consumed_event.sql")).read().splitlines()
                    if not l.strip().startswith("--"))
    cur.execute(f"USE {iso}")
    cur.execute(ddl.strip().rstrip(";"))
    cur.execute(f"CREATE USER '{tag}_iso'@'%' IDENTIFIED BY 'iso-pw'")
    cur.execute(f"GRANT SELECT, INSERT, DELETE ON {iso}.consumed_event TO '{tag}_iso'@'%'")
    cur.execute(f"GRANT SELECT, INSERT ON app.notification_job TO '{tag}_iso'@'%'")
ic = pymysql.connect(host="127.0.0.1", port=PORT, user=f"{tag}_iso", password="iso-pw", database=iso)
icur = ic.cursor()
icur.execute("INSERT INTO consumed_event (consumer_name, event_id, consumed_at) VALUES ('iso', 'e', NOW())")
icur.execute("DELETE FROM consumed_event WHERE consumer_name = 'iso'")
ok(True, "a consumer user with its own schema claims and undoes claims there")
for sql, label in (("DELETE FROM app.consumed_event WHERE consumer_name = 'x'", "delete another consumer's history"),
                   ("INSERT INTO app.consumed_event (consumer_name, event_id, consumed_at) VALUES ('x', 'y', NOW())",
                    "claim for another consumer")):
    try:
        icur.execute(sql)
        ok(False, f"a consumer with its own schema must not {label}")
    except pymysql.err.MySQLError as e:
        ok(e.args[0] in (1142, 1143), f"a consumer with its own schema cannot {label} ({e.args[0]})")
ic.rollback()
ic.close()
query(f"DROP USER IF EXISTS '{tag}_iso'@'%'")
query(f"DROP DATABASE {iso}")
done()
