"""Shared pieces of the envelope-mode tests: a table where the test handler's
KEEP types record exactly what they were handed, and a publisher that sets
any property and header, as an outside publisher would."""
import uuid

from harness import *

# uuid5 under this namespace is how the sidecar names a plain message whose
# message_id is not a UUID (docs/contract.md); Python's uuid5 is the oracle.
PLAIN_NAMESPACE = uuid.UUID("e14e4d96-96cb-4472-bb74-4bfd5af7215d")


def plain_id(message_id):
    return str(uuid.uuid5(PLAIN_NAMESPACE, message_id))


def seen_table():
    query("CREATE TABLE IF NOT EXISTS t_event_seen (n BIGINT AUTO_INCREMENT PRIMARY KEY,"
          " event_id CHAR(36) NOT NULL, type VARCHAR(255), source VARCHAR(255), subject VARCHAR(255),"
          " time VARCHAR(64), eventversion BIGINT NULL, data LONGBLOB NULL, data_bytes LONGBLOB NULL,"
          " datacontenttype VARCHAR(255) NULL, original_id VARCHAR(255) NULL, KEY (event_id))")
    # A table from before the appended fields (kept servers) gets their columns.
    for col in ("data_bytes LONGBLOB NULL", "datacontenttype VARCHAR(255) NULL", "original_id VARCHAR(255) NULL"):
        query(f"ALTER TABLE t_event_seen ADD COLUMN IF NOT EXISTS {col}")
    query("GRANT INSERT ON app.t_event_seen TO 'sidecar_consumer'@'%'")


def seen(eid):
    """Every row the handler wrote for eid: dicts of the attributes, data_json and data_bytes (bytes)."""
    rows = query("SELECT event_id, type, source, subject, time, eventversion, data, data_bytes, datacontenttype,"
                 " original_id FROM t_event_seen WHERE event_id = %s ORDER BY n", (eid,))
    keys = ("id", "type", "source", "subject", "time", "eventversion", "data", "data_bytes", "datacontenttype",
            "original_id")
    return [dict(zip(keys, r)) for r in rows]


def ce_id(source, eid):
    """The id a CloudEvent whose id is not a UUID is consumed under (docs/contract.md)."""
    return str(uuid.uuid5(PLAIN_NAMESPACE, source + "\x00" + eid))


class Publisher:
    """One confirmed channel; publish() sets exactly what it is given."""

    def __init__(self):
        self.conn = amqp()
        self.ch = self.conn.channel()
        self.ch.confirm_delivery()

    def publish(self, exchange, routing_key, body, content_type=None, message_id=None, type_=None,
                headers=None, timestamp=None):
        props = pika.BasicProperties(content_type=content_type, delivery_mode=2, message_id=message_id,
                                     type=type_, headers=headers, timestamp=timestamp)
        self.ch.basic_publish(exchange, routing_key, body.encode() if isinstance(body, str) else body, props)

    def close(self):
        self.conn.close()


def header(props, key):
    v = (props.headers or {}).get(key)
    return v.decode() if isinstance(v, bytes) else v


def outcome_ids(sc, outcome):
    return [l.get("event_id") for l in sc.outcomes(outcome)]
