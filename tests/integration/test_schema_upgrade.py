"""The schema lifecycle: a database at 0.1's schema (sql/schema/001, 002 and
the example tables, before 005 added the FAILED status) is refused by
`sidecar check` and by `sidecar consume` / `relay` at start, naming the
migration to apply (and one without 009's trace columns by the relay); applying the migrations brings it to this version with
its rows kept; applying them again changes nothing (each is idempotent)."""
import glob
import subprocess

from harness import *

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
name = "up_" + suffix().replace("-", "_")
with admin_db() as c, c.cursor() as cur:
    cur.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    cur.execute(f"GRANT ALL ON {name}.* TO 'sidecar'@'127.0.0.1'")


def apply(path):
    subprocess.run(["mariadb", "--no-defaults", "-S", os.environ["SC_TEST_MYSQL_SOCKET"], "-uroot", name],
                   stdin=open(path), check=True)


def rows():
    with admin_db() as c, c.cursor() as cur:
        cur.execute(f"SELECT (SELECT COUNT(*) FROM {name}.outbox_event), "
                    f"(SELECT COUNT(*) FROM {name}.consumed_event)")
        return cur.fetchone()


def dbq(sql):
    with admin_db() as c, c.cursor() as cur:
        return cur.execute(sql)


v01 = [f"{ROOT}/sql/schema/001_outbox_event.sql", f"{ROOT}/sql/schema/002_consumed_event.sql",
       f"{ROOT}/sql/examples/003_notification_job.sql", f"{ROOT}/sql/examples/004_orders.sql"]
for f in v01:
    apply(f)
dbq(f"INSERT INTO {name}.outbox_event (event_id, aggregate_type, aggregate_id, event_type, "
    "event_version, payload, status, created_at) VALUES "
    "('0190a000-0000-7000-8000-000000000001', 'ORDER', '1', 'ORDER_ACCEPTED', 1, '{}', "
    "'PUBLISHED', UTC_TIMESTAMP(6))")
dbq(f"INSERT INTO {name}.consumed_event (consumer_name, event_id, consumed_at) VALUES "
    "('c', '0190a000-0000-7000-8000-000000000001', UTC_TIMESTAMP(6))")
before = rows()

url = os.environ["SC_TEST_MYSQL_URL"].rsplit("/", 1)[0] + "/" + name
cfg = {"amqp": {"url": os.environ["SC_TEST_AMQP_URL"]}, "mysql": {"url": url},
       "http": {"listen": "127.0.0.1:0"},
       "consumers": [{"name": "up-" + suffix(), "handler": HANDLER}],
       "relay": {"exchange": "ex-up-" + suffix(), "worker_id": "up-relay"}}
rc, out = run_sidecar_cmd(["check"], cfg)
is_eq(rc, 2, "check refuses a database at 0.1's schema")
ok("apply sql/schema/005_outbox_failed.sql" in out and "FAILED" in out,
   "and names the migration that is missing", detail=out)
relay_only = dict(cfg)
relay_only.pop("consumers")
rc, out = run_sidecar_cmd(["relay"], relay_only, timeout=30)
is_eq(rc, 2, "the relay refuses to start on it (exit 2)")
ok("005_outbox_failed.sql" in out, "naming the migration", detail=out[-600:])

# A consumer whose table lacks the identity constraint is refused too.
dbq(f"ALTER TABLE {name}.consumed_event DROP INDEX uq_consumed_event_identity")
consumer_only = dict(cfg)
consumer_only.pop("relay")
rc, out = run_sidecar_cmd(["consume"], consumer_only, timeout=30)
is_eq(rc, 2, "consume refuses a consumed_event without uq_consumed_event_identity")
ok("uq_consumed_event_identity" in out and "002_consumed_event.sql" in out,
   "naming the constraint and the migration", detail=out[-600:])
dbq(f"ALTER TABLE {name}.consumed_event ADD CONSTRAINT uq_consumed_event_identity "
    "UNIQUE (consumer_name, event_id)")

# Every migration but the trace context's (the relay needs its columns) and the held keys'.
for f in sorted(glob.glob(f"{ROOT}/sql/schema/*.sql")):
    if not f.endswith(("009_outbox_trace.sql", "010_consumer_held_key.sql")):
        apply(f)
rc, out = run_sidecar_cmd(["relay"], relay_only, timeout=30)
ok(rc == 2 and "apply sql/schema/009_outbox_trace.sql" in out and "traceparent" in out,
   "without 009 the relay refuses to start, naming it and the columns", detail=out[-600:])
# An ordered consumer that holds keys needs consumer_held_key (010).
for f in sorted(glob.glob(f"{ROOT}/sql/schema/*.sql")):
    if not f.endswith(("010_consumer_held_key.sql", "011_consumer_held_event.sql")):
        apply(f)
held_cfg = dict(consumer_only)
held_cfg["consumers"] = [dict(cfg["consumers"][0], name="held-" + suffix(),
                              ordering={"key": "subject"})]
rc, out = run_sidecar_cmd(["consume"], held_cfg, timeout=30)
is_eq(rc, 2, "an ordered consumer holding keys refuses a database without consumer_held_key")
ok("consumer_held_key" in out and "010_consumer_held_key.sql" in out,
   "naming the table and the migration", detail=out[-600:])
rc, out = run_sidecar_cmd(["check"], cfg)
is_eq(rc, 0, "a consumer that does not hold keys does not need it")

for f in sorted(glob.glob(f"{ROOT}/sql/schema/*.sql")):
    if not f.endswith("011_consumer_held_event.sql"):
        apply(f)
rc, out = run_sidecar_cmd(["check"], held_cfg)
ok(rc == 2 and "consumer_held_event" in out and "011_consumer_held_event.sql" in out,
   "with 010 but not 011 the holding consumer is refused, naming 011", detail=out[-600:])
for f in sorted(glob.glob(f"{ROOT}/sql/schema/*.sql")):
    apply(f)
rc, out = run_sidecar_cmd(["check"], held_cfg)
is_eq(rc, 0, "with 010 and 011 applied the holding consumer's check passes")
rc, out = run_sidecar_cmd(["check"], cfg)
is_eq(rc, 0, "after the migrations, check passes")
is_eq(query(f"SELECT COUNT(*) FROM {name}.outbox_event WHERE traceparent IS NULL AND tracestate IS NULL")[0][0], 1,
      "the row from before has NULL trace context")
ok("schema has what the consumers and the relay need" in out, "and says the schema is complete",
   detail=out)
is_eq(rows(), before, "rows kept across the migration")
for f in sorted(glob.glob(f"{ROOT}/sql/schema/*.sql")):
    apply(f)
rc, out = run_sidecar_cmd(["check"], cfg)
is_eq(rc, 0, "migrations applied again: still complete")
is_eq(rows(), before, "and still the same rows")
# A database whose ix_outbox_event_order is 008's (no event_version): a
# per_aggregate relay is refused, naming 012; 012 redefines it, once.
ordered = json.loads(json.dumps(cfg))
ordered["relay"]["ordering"] = "per_aggregate"
ordered.pop("consumers")
dbq(f"ALTER TABLE {name}.outbox_event DROP INDEX ix_outbox_event_order, ADD INDEX ix_outbox_event_order"
    " (aggregate_type, aggregate_id, status, created_at, event_id)")
rc, out = run_sidecar_cmd(["check"], ordered)
is_eq(rc, 2, "check refuses a per_aggregate relay on 008's ix_outbox_event_order")
ok("012_outbox_order_version.sql" in out, "naming 012", detail=out[-600:])
rc, out = run_sidecar_cmd(["check"], cfg)
is_eq(rc, 0, "an unordered relay does not need it")
apply(f"{ROOT}/sql/schema/012_outbox_order_version.sql")
apply(f"{ROOT}/sql/schema/012_outbox_order_version.sql")
cols = query("SELECT GROUP_CONCAT(column_name ORDER BY seq_in_index) FROM information_schema.statistics"
             f" WHERE table_schema = '{name}' AND table_name = 'outbox_event'"
             " AND index_name = 'ix_outbox_event_order'")[0][0]
is_eq(cols, "aggregate_type,aggregate_id,status,event_version,created_at,event_id",
      "012, applied twice, redefined the index once")
rc, out = run_sidecar_cmd(["check"], ordered)
ok(rc == 0, "then the per_aggregate relay's check passes", detail=out[-600:])
is_eq(rows(), before, "rows kept across 012")
is_eq(dbq(f"UPDATE {name}.outbox_event SET status = 'FAILED'"), 1,
      "a row can be marked FAILED after the migration")
dbq(f"DROP DATABASE {name}")
done()
