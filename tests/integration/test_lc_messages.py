"""Duplicates are recognised whatever language the server speaks: with the
server's lc_messages set to German, error 1062's text is German and names no
`for key '...'`; the sidecar pins its session to English messages at
connect (issue 10.11)."""
import uuid

from harness import *

before = query("SELECT @@GLOBAL.lc_messages")[0][0]
query("SET GLOBAL lc_messages = 'de_DE'")
try:
    with admin_db() as c, c.cursor() as cur:
        cur.execute("CREATE TEMPORARY TABLE t_dup (id INT PRIMARY KEY)")
        cur.execute("INSERT INTO t_dup VALUES (1)")
        try:
            cur.execute("INSERT INTO t_dup VALUES (1)")
            msg = ""
        except pymysql.err.IntegrityError as e:
            msg = str(e)
    ok("for key" not in msg and msg, "a new session of this server writes 1062 in German", detail=msg)

    sc = Sidecar()
    ok(sc.start(), "sidecar started")
    e = str(uuid.uuid4())
    publish_events(sc.exchange, [(e, "61")])
    ok(wait_until(lambda: len(sc.outcomes("applied")) == 1, timeout=20), "applied once")
    publish_events(sc.exchange, [(e, "61")])
    ok(wait_until(lambda: len(sc.outcomes("duplicate")) == 1, timeout=20),
       "the repeat was recognised as a duplicate")
    is_eq(len(sc.outcomes("retried")) + len(sc.outcomes("dead_lettered")), 0,
          "never taken for a failure")
    is_eq(count_in("notification_job", "event_id", [e]), 1, "one effect")
    is_eq(sc.stop(), 0, "clean stop")
finally:
    query(f"SET GLOBAL lc_messages = '{before}'")
done()
