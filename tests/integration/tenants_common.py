"""Tenant databases on the test server for the tenants tests: each one made
with sql/schema and the sample handler's table, the consumer's grants as
sql/grants/consumer.sql gives them on `app`, and the consumer's URL with
{tenant} in the database name (stand-in hosts: tenant_hosts.py)."""
import json
import os
import re
import uuid

import pymysql

from harness import amqp, event_body, publish

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
PREFIX = "tn_"


def _root(db=None):
    return pymysql.connect(unix_socket=os.environ["SC_TEST_MYSQL_SOCKET"], user="root",
                           database=db, autocommit=True)


def _statements(path):
    text = "\n".join(l for l in open(path).read().splitlines() if not l.strip().startswith("--"))
    return [s for s in text.split(";") if s.strip()]


def _grants():
    """consumer.sql's GRANT statements (the user exists already), and the
    sample handler's table's."""
    out = []
    for path in (os.path.join(ROOT, "sql", "grants", "consumer.sql"),
                 os.path.join(ROOT, "sql", "examples", "grants", "consumer.sql")):
        out += [s for s in _statements(path) if s.strip().upper().startswith("GRANT")
                and ("notification_job" in s or "consumed_event" in s or "consumer_held" in s)]
    return out


def make_tenant_db(tenant, schema=True):
    db = PREFIX + tenant
    with _root() as c, c.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
        cur.execute(f"CREATE DATABASE `{db}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    if not schema:
        return db
    files = sorted(os.path.join(ROOT, "sql", "schema", f) for f in os.listdir(os.path.join(ROOT, "sql", "schema")))
    files.append(os.path.join(ROOT, "sql", "examples", "003_notification_job.sql"))
    with _root(db) as c, c.cursor() as cur:
        for f in files:
            for s in _statements(f):
                cur.execute(s)
    grant(tenant)
    return db


def grant(tenant):
    db = PREFIX + tenant
    with _root() as c, c.cursor() as cur:
        for g in _grants():
            cur.execute(re.sub(r"\bON app\.", f"ON `{db}`.", g))


def revoke(tenant):
    """Takes the consumer's every privilege on the tenant's database: its
    sessions are refused at connect (1044), as for a database out of reach."""
    db = PREFIX + tenant
    with _root() as c, c.cursor() as cur:
        cur.execute("SELECT table_name FROM information_schema.table_privileges "
                    "WHERE grantee = \"'sidecar_consumer'@'%%'\" AND table_schema = %s", (db,))
        for (t,) in set(cur.fetchall()):
            cur.execute(f"REVOKE ALL PRIVILEGES ON `{db}`.`{t}` FROM 'sidecar_consumer'@'%'")
        cur.execute("SELECT id FROM information_schema.processlist WHERE user = 'sidecar_consumer' "
                    "AND db = %s", (db,))
        for (i,) in cur.fetchall():
            try:
                cur.execute(f"KILL {i}")
            except pymysql.err.MySQLError:
                pass


def drop_tenant_db(tenant):
    with _root() as c, c.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{PREFIX + tenant}`")


def tenant_query(tenant, sql, args=None):
    with _root(PREFIX + tenant) as c, c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def tenant_count(tenant, table, ids):
    if not ids:
        return 0
    marks = ",".join(["%s"] * len(ids))
    return tenant_query(tenant, f"SELECT COUNT(*) FROM {table} WHERE event_id IN ({marks})", list(ids))[0][0]


def tenant_url():
    """The consumer's URL with {tenant} in the database name."""
    return re.sub(r"/app$", "/" + PREFIX + "{tenant}", os.environ["SC_TEST_MYSQL_CONSUMER_URL"])


def grant_relay(tenant):
    """sql/grants/relay.sql's grants on the tenant's database (the user
    exists already)."""
    db = PREFIX + tenant
    path = os.path.join(ROOT, "sql", "grants", "relay.sql")
    with _root() as c, c.cursor() as cur:
        for g in _statements(path):
            if g.strip().upper().startswith("GRANT"):
                cur.execute(re.sub(r"\bON app\.", f"ON `{db}`.", g))


def relay_tenant_url():
    """The relay's URL with {tenant} in the database name."""
    return re.sub(r"/app$", "/" + PREFIX + "{tenant}", os.environ["SC_TEST_MYSQL_RELAY_URL"])


def insert_tenant_outbox(tenant, n, base=1000, one_aggregate=False):
    """Inserts n PENDING outbox rows into the tenant's database, aggregate
    ids (integer order ids, as the sample handler wants) base, base + 1,
    ... (or all base, one_aggregate), event_version 1, 2, ..., created_at
    strictly increasing in insertion order; returns their event ids."""
    import json
    import uuid
    ids = [str(uuid.uuid4()) for _ in range(n)]
    rows = [(eid, str(base if one_aggregate else base + i), 1 + i, json.dumps({"orderId": base + i}), i)
            for i, eid in enumerate(ids)]
    with _root(PREFIX + tenant) as c, c.cursor() as cur:
        cur.execute("SELECT UTC_TIMESTAMP(6)")
        for k in range(0, n, 1000):
            cur.executemany(
                "INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type,"
                " event_version, payload, status, created_at) VALUES"
                " (%s, 'ORDER', %s, 'ORDER_ACCEPTED', %s, %s, 'PENDING',"
                " UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND)", rows[k:k + 1000])
    return ids


def tenant_body(eid, tenant, etype="ORDER_ACCEPTED", subject="1001"):
    """The harness's CloudEvent with the extension attribute `tenant` (none
    when tenant is None)."""
    d = json.loads(event_body(eid, etype=etype, subject=subject))
    if tenant is not None:
        d["tenant"] = tenant
    return json.dumps(d)


def send_tenant_events(exchange, events):
    """Publishes each (event_id, tenant) or (event_id, tenant, type) with
    confirms, routed by its type (default ORDER_ACCEPTED)."""
    conn = amqp()
    ch = conn.channel()
    ch.confirm_delivery()
    for e in events:
        eid, tenant, etype = (e + ("ORDER_ACCEPTED",))[:3]
        publish(ch, exchange, etype, tenant_body(eid, tenant, etype), message_id=eid)
    conn.close()


SEEN = ("CREATE TABLE t_order_seen (seq BIGINT AUTO_INCREMENT PRIMARY KEY, event_id CHAR(36) "
        "NOT NULL, subject VARCHAR(100) NOT NULL, version BIGINT NOT NULL, at DATETIME(6) NOT "
        "NULL DEFAULT CURRENT_TIMESTAMP(6))")


def grant_seen(tenant):
    """The test handler's ORDERED events write t_order_seen."""
    tenant_query(tenant, f"GRANT INSERT ON `{PREFIX + tenant}`.t_order_seen TO 'sidecar_consumer'@'%'")


def make_seen_db(tenant):
    """A tenant database with the test handler's t_order_seen (apply order)."""
    make_tenant_db(tenant)
    tenant_query(tenant, SEEN)
    grant_seen(tenant)


def seen_versions(tenant, key):
    """The eventversions of key's ORDERED events, in the order they were applied."""
    return [r[0] for r in tenant_query(tenant, "SELECT version FROM t_order_seen WHERE subject = %s "
                                               "ORDER BY seq", (key,))]


def send_ordered(exchange, events):
    """Publishes each (tenant, key, version, type) with confirms, in order,
    x-ordering-key set. Returns {event_id: (tenant, key, version)}."""
    conn = amqp()
    ch = conn.channel()
    ch.confirm_delivery()
    ids = {}
    for tenant, k, v, t in events:
        eid = str(uuid.uuid4())
        d = json.loads(event_body(eid, etype=t, subject=k, version=v))
        d["tenant"] = tenant
        publish(ch, exchange, t, json.dumps(d), message_id=eid, headers={"x-ordering-key": k})
        ids[eid] = (tenant, k, v)
    conn.close()
    return ids
