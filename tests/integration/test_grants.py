"""The roles of sql/grants/ hold only what they need: the integration tests
run as these users, and here each is refused what it must not do."""
import re

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
done()
