#!/usr/bin/env python3
"""A producer in Python (PyMySQL) that follows docs/producers.md: the order row
and its outbox_event row in one transaction, an honest outcome, and an
UNKNOWN commit reconciled by (tenant_id, request_id), never replayed blindly.

    PRODUCER_MYSQL_URL=mysql://user:pass@host:port/db \\
        order_producer.py [--count N] [--tenant T] [--prefix P] [--ids code|sql]

One JSON line per request on stdout:
    {"request_id", "event_id", "order_id", "outcome", "attempts", "reconciled", "discarded"}
outcome: committed | already_accepted | failed. Exit 0 when every request
ended accepted. --ids sql takes each event id from the database (the SQL
UUIDv7 expression of docs/producers.md) instead of making it here.
"""
import argparse
import json
import os
import secrets
import sys
import time
import urllib.parse

import pymysql

MAX_ATTEMPTS = 8
ER_DUP_ENTRY, ER_LOCK_WAIT_TIMEOUT, ER_LOCK_DEADLOCK = 1062, 1205, 1213

# source and type of the event (docs/producers.md, "The outbox row"):
# aggregate_type a URI-reference of at most 64 characters, event_type at most
# 128 (it is the routing key).
AGGREGATE_TYPE, EVENT_TYPE = "ORDER", "ORDER_ACCEPTED"

# docs/producers.md, "Event ids": a UUIDv7 made by the server, for producers
# whose language has none. Kept equal to the page's text by the tests.
UUIDV7_SQL = """SELECT LOWER(CONCAT(
  INSERT(LPAD(HEX(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(3)) DIV 1000), 12, '0'), 9, 0, '-'),
  '-7', SUBSTR(HEX(RANDOM_BYTES(2)), 2),
  '-', ELT(1 + (ORD(RANDOM_BYTES(1)) & 3), '8', '9', 'a', 'b'), SUBSTR(HEX(RANDOM_BYTES(2)), 2),
  '-', HEX(RANDOM_BYTES(6)))) AS event_id"""


def uuid7():
    """RFC 9562 UUIDv7: 48 bits of Unix time in ms, version 7, 74 random bits
    with the variant 10, lowercase."""
    b = bytearray(secrets.token_bytes(16))
    ms = time.time_ns() // 1_000_000
    b[0:6] = ms.to_bytes(6, "big")
    b[6] = 0x70 | (b[6] & 0x0F)
    b[8] = 0x80 | (b[8] & 0x3F)
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def connect(url):
    u = urllib.parse.urlsplit(url)
    if u.scheme != "mysql":
        sys.exit("order_producer.py: PRODUCER_MYSQL_URL must be mysql://user:pass@host:port/db")
    conn = pymysql.connect(host=u.hostname, port=u.port or 3306,
                           user=urllib.parse.unquote(u.username or ""),
                           password=urllib.parse.unquote(u.password or ""),
                           database=u.path.lstrip("/"), autocommit=False, charset="utf8mb4",
                           connect_timeout=5, read_timeout=10, write_timeout=10)
    with conn.cursor() as cur:  # (init_command would add a COMMIT to every connect)
        cur.execute("SET time_zone = '+00:00'")
    return conn


class Pool:
    """The smallest pool that shows the rule: a connection whose COMMIT
    outcome is unknown is closed, never handed out again."""

    def __init__(self, url):
        self.url, self.idle, self.discarded = url, [], 0

    def get(self):
        if self.idle:
            return self.idle.pop()
        for i in range(50):
            try:
                return connect(self.url)
            except pymysql.err.OperationalError:
                time.sleep(0.2)
        raise SystemExit("order_producer.py: the database does not answer")

    def put(self, conn):
        self.idle.append(conn)

    def discard(self, conn):
        self.discarded += 1
        try:
            conn.close()
        except Exception:  # already broken: closing it is all that is left
            pass


def accept(conn, tenant, request_id, event_id):
    """Writes the order and its outbox row in one transaction. Returns
    (outcome, order_id, error_code): COMMITTED, ROLLED_BACK (a statement
    failed and the ROLLBACK answered) or UNKNOWN (COMMIT or ROLLBACK raised)."""
    try:
        with conn.cursor() as cur:
            conn.begin()
            cur.execute("INSERT INTO orders (tenant_id, request_id, acceptance_event_id, version, status,"
                        " created_at) VALUES (%s, %s, %s, 1, 'ACCEPTED', UTC_TIMESTAMP(6))",
                        (tenant, request_id, event_id))
            order_id = cur.lastrowid
            payload = json.dumps({"orderId": order_id, "status": "ACCEPTED", "version": 1})
            cur.execute("INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type,"
                        " event_version, payload, status, created_at)"
                        " VALUES (%s, %s, %s, %s, 1, %s, 'PENDING', UTC_TIMESTAMP(6))",
                        (event_id, AGGREGATE_TYPE, str(order_id), EVENT_TYPE, payload))
    except pymysql.err.Error as e:
        code = e.args[0] if e.args and isinstance(e.args[0], int) else 0
        try:
            conn.rollback()
        except pymysql.err.Error:
            return "UNKNOWN", None, code
        return "ROLLED_BACK", None, code
    try:
        conn.commit()
    except pymysql.err.Error:
        return "UNKNOWN", None, 0
    return "COMMITTED", order_id, 0


def reconcile(conn, tenant, request_id):
    """(order_id, acceptance_event_id) of the request, or None. A locking read
    on the primary: it sees the latest committed row and waits for a first
    attempt that is still running."""
    with conn.cursor() as cur:
        conn.begin()
        cur.execute("SELECT id, acceptance_event_id FROM orders WHERE tenant_id = %s AND request_id = %s"
                    " FOR UPDATE", (tenant, request_id))
        row = cur.fetchone()
    conn.commit()
    return row


def reconcile_until_answered(pool, tenant, request_id):
    for i in range(20):
        conn = pool.get()
        try:
            row = reconcile(conn, tenant, request_id)
        except pymysql.err.Error:
            pool.discard(conn)
            time.sleep(0.2 * (i + 1))
            continue
        pool.put(conn)
        return True, row
    return False, None


def new_event_id(pool, ids):
    if ids == "code":
        return uuid7()
    for i in range(20):
        conn = pool.get()
        try:
            with conn.cursor() as cur:
                cur.execute(UUIDV7_SQL)
                eid = cur.fetchone()[0]
            conn.rollback()  # a read: nothing to commit
        except pymysql.err.Error:
            pool.discard(conn)
            time.sleep(0.2 * (i + 1))
            continue
        pool.put(conn)
        return eid
    raise SystemExit("order_producer.py: the database does not answer")


def submit(pool, tenant, request_id, event_id):
    res = {"request_id": request_id, "event_id": event_id, "order_id": None, "outcome": "failed",
           "attempts": 0, "reconciled": 0, "discarded": 0}
    while res["attempts"] < MAX_ATTEMPTS:
        res["attempts"] += 1
        conn = pool.get()
        outcome, order_id, code = accept(conn, tenant, request_id, event_id)
        if outcome == "COMMITTED":
            pool.put(conn)
            res.update(order_id=order_id, outcome="committed")
            return res
        if outcome == "ROLLED_BACK":
            pool.put(conn)
            if code in (ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT):
                time.sleep(0.05 * res["attempts"])
                continue
            if code != ER_DUP_ENTRY:
                return res  # permanent: retrying the same input cannot help
            # 1062 (uq_orders_tenant_request, or a racing attempt): reconcile.
        else:
            pool.discard(conn)
            res["discarded"] += 1
        answered, row = reconcile_until_answered(pool, tenant, request_id)
        res["reconciled"] += 1
        if not answered:
            return res
        if row:
            res["order_id"], stored = row[0], row[1]
            res["outcome"] = "committed" if stored == event_id else "already_accepted"
            res["event_id"] = stored
            return res
        # Not committed: try again with the same event id.
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=1)
    ap.add_argument("--tenant", default="demo")
    ap.add_argument("--prefix", default="req")
    ap.add_argument("--ids", choices=["code", "sql"], default="code")
    a = ap.parse_args()
    url = os.environ.get("PRODUCER_MYSQL_URL")
    if not url:
        sys.exit("order_producer.py: set PRODUCER_MYSQL_URL=mysql://user:pass@host:port/db")
    pool = Pool(url)
    all_ok = True
    for i in range(1, a.count + 1):
        request_id = f"{a.prefix}-{i}"
        # One event id per request, made before the first attempt and kept
        # for every retry of this request.
        event_id = new_event_id(pool, a.ids)
        res = submit(pool, a.tenant, request_id, event_id)
        all_ok &= res["outcome"] != "failed"
        print(json.dumps(res), flush=True)
    sys.exit(0 if all_ok else 1)


if __name__ == "__main__":
    main()
