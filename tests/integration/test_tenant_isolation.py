"""One tenant's database locked, or refusing writes, while the other's takes
them: the consumer with tenants keeps applying tenant A's events while B's
wait in hand, spends none of B's attempts and dead-letters none; once B's
database takes writes again, each of B's events is applied exactly once.

- locked: another session holds LOCK TABLES ... WRITE on B's consumed_event
  (a metadata lock, as a long ALTER or a backup takes): B's claims wait at
  most mysql.lock_wait_timeout_s, then B counts as down with backoff;
- read-only: MariaDB has no per-database read-only, so B's database refuses
  its claims with the server's own read-only errors, raised by a trigger:
  1290 as a read_only server writes it, and 3989 as MySQL 8.0.22+ writes it
  for ALTER SCHEMA ... READ ONLY = 1."""
import json

import pymysql

from harness import *
from tenants_common import *

sfx = suffix()
A, B = "ia_" + sfx, "ib_" + sfx
make_tenant_db(A)
make_tenant_db(B)


def interleaved(n):
    ea = [str(uuid.uuid4()) for _ in range(n)]
    eb = [str(uuid.uuid4()) for _ in range(n)]
    return ea, eb, [x for pair in zip([(e, B) for e in eb], [(e, A) for e in ea]) for x in pair]


sc = Sidecar(consumer_extra={"prefetch": 64, "batch_max": 16, "db_outage_hold_ms": 120000,
                             "max_attempts": 2},
             extra={"tenants": {"key": "extension:tenant", "database_url": tenant_url(),
                                "max_connections": 4, "idle_close_ms": 60000}})
sc.config["mysql"]["lock_wait_timeout_s"] = 1
with open(sc.config_path, "w") as f:
    json.dump(sc.config, f)
ok(sc.start(), "consumer with tenants started")

# Sessions to both tenants open first, so the lock meets a session in use.
warm_a, warm_b, pairs = interleaved(2)
send_tenant_events(sc.exchange, pairs)
ok(wait_until(lambda: tenant_count(A, "notification_job", warm_a) == 2 and
              tenant_count(B, "notification_job", warm_b) == 2, timeout=30), "both tenants warm")

# --- locked -----------------------------------------------------------------
locker = pymysql.connect(unix_socket=os.environ["SC_TEST_MYSQL_SOCKET"], user="root",
                         database=PREFIX + B, autocommit=True)
lcur = locker.cursor()
lcur.execute("LOCK TABLES consumed_event WRITE")
ea, eb, pairs = interleaved(30)
send_tenant_events(sc.exchange, pairs)
ok(wait_until(lambda: tenant_count(A, "notification_job", ea) == 30, timeout=60),
   "locked: tenant A's 30 events applied while B's table is locked")
ok(wait_until(lambda: any(B in l.get("msg", "") and "cannot be used" in l.get("msg", "")
                          for l in sc.lines()), timeout=30),
   "locked: B said to be unusable (lock wait bounded by lock_wait_timeout_s)",
   detail="\n".join(l.get("msg", "") for l in sc.lines() if "lock" in l.get("msg", "")
                     or B in l.get("msg", ""))[-3000:])
# Locked for several of B's backoff steps: long past max_attempts (2, with
# 200 and 400 ms delays), were each lock wait an attempt.
down_b = lambda: sum(1 for l in sc.lines() if B in l.get("msg", "") and
                     "cannot be used" in l.get("msg", ""))
ok(wait_until(lambda: down_b() >= 4, timeout=60), f"locked: B tried and found locked {down_b()} times")
is_eq(queue_depth(sc.dlq), 0, "locked: nothing dead-lettered")
lcur.execute("UNLOCK TABLES")
locker.close()
is_eq(tenant_count(B, "consumed_event", eb), 0, "locked: none of B's claimed while locked")
ok(wait_until(lambda: tenant_count(B, "notification_job", eb) == 30, timeout=90),
   "locked: once unlocked, B's 30 events applied")
is_eq(tenant_count(B, "consumed_event", eb), 30, "locked: one claim per B event")
is_eq(tenant_count(A, "consumed_event", ea), 30, "locked: one claim per A event")
is_eq(queue_depth(sc.dlq), 0, "locked: still nothing dead-lettered")

# --- read-only (1290, then 3989) --------------------------------------------
for code, text in ((1290, "The MariaDB server is running with the --read-only option so it "
                          "cannot execute this statement"),
                   (3989, f"Schema '{PREFIX + B}' is in read only mode.")):
    tenant_query(B, "DROP TRIGGER IF EXISTS ro_stand_in")
    tenant_query(B, "CREATE TRIGGER ro_stand_in BEFORE INSERT ON consumed_event FOR EACH ROW "
                    f"SIGNAL SQLSTATE 'HY000' SET MYSQL_ERRNO = {code}, MESSAGE_TEXT = %s", (text,))
    ea, eb, pairs = interleaved(30)
    send_tenant_events(sc.exchange, pairs)
    ok(wait_until(lambda: tenant_count(A, "notification_job", ea) == 30, timeout=60),
       f"read-only {code}: tenant A's 30 events applied while B refuses writes")
    ok(wait_until(lambda: any(B in l.get("msg", "") and "cannot be used" in l.get("msg", "") and
                              l.get("error_code") == code for l in sc.lines()), timeout=30),
       f"read-only {code}: B said to be unusable, naming error {code}")
    is_eq(tenant_count(B, "consumed_event", eb), 0, f"read-only {code}: none of B's claimed")
    is_eq(queue_depth(sc.dlq), 0, f"read-only {code}: nothing dead-lettered")
    tenant_query(B, "DROP TRIGGER ro_stand_in")
    ok(wait_until(lambda: tenant_count(B, "notification_job", eb) == 30, timeout=90),
       f"read-only {code}: writable again, B's 30 events applied")
    is_eq(tenant_count(B, "consumed_event", eb), 30, f"read-only {code}: one claim per B event")
    is_eq(queue_depth(sc.dlq), 0, f"read-only {code}: still nothing dead-lettered")

ok(sc.get("/readyz")[0] == 200, "ready throughout (one tenant's trouble is not the process's)")
is_eq(sc.stop(), 0, "clean stop")
for t in (A, B):
    drop_tenant_db(t)
done()
