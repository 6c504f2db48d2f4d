"""The tenants nemesis' databases (tests/nemesis/tenants.py): names, root
access over the socket, and the sidecar users' grants on a tenant's
database."""

import os

import pymysql

TENANTS = ("t1", "t2", "t3")
DB = "nem_{}"
HURT_ALL = os.environ.get("NEMESIS_TENANTS_HURT") == "all"
SIDECAR_USERS = ("sidecar_consumer", "sidecar_relay")
CONSUMER_TABLES = ("consumed_event", "consumer_held_key", "consumer_held_event", "nemesis_effect",
                   "nemesis_ordered_effect")
TABLES = ("outbox_event",) + CONSUMER_TABLES

def root(db=None, timeout=30):
    return pymysql.connect(unix_socket=os.environ["SC_TEST_MYSQL_SOCKET"], user="root", database=db,
                           autocommit=True, connect_timeout=5, read_timeout=timeout, write_timeout=timeout)


def sql(stmt, args=None, db=None):
    with root(db) as c, c.cursor() as cur:
        cur.execute(stmt, args)
        return cur.fetchall()


def statements(path):
    text = "\n".join(l for l in open(path).read().splitlines() if not l.strip().startswith("--"))
    return [s for s in text.split(";") if s.strip()]


def grants(t):
    db = DB.format(t)
    return [f"GRANT SELECT, INSERT, DELETE ON `{db}`.consumed_event TO 'sidecar_consumer'@'%'",
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON `{db}`.consumer_held_key TO 'sidecar_consumer'@'%'",
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON `{db}`.consumer_held_event TO 'sidecar_consumer'@'%'",
            f"GRANT SELECT, INSERT ON `{db}`.nemesis_effect TO 'sidecar_consumer'@'%'",
            f"GRANT SELECT, INSERT ON `{db}`.nemesis_ordered_effect TO 'sidecar_consumer'@'%'",
            f"GRANT SELECT ON `{db}`.outbox_event TO 'sidecar_relay'@'%'",
            f"GRANT UPDATE (status, lease_owner, lease_until, publish_attempts, published_at)"
            f" ON `{db}`.outbox_event TO 'sidecar_relay'@'%'"]
