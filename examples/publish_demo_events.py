#!/usr/bin/python3
"""Publishes a few demo CloudEvents to the orders exchange, the way any
producer (or the relay) does: structured JSON, persistent, message_id = id,
under publisher confirms. The first event is published twice on purpose.

usage: publish_demo_events.py AMQP_URL EXCHANGE"""
import json
import sys
import uuid
from datetime import datetime, timezone

import pika


def event(order_id, etype="ORDER_ACCEPTED"):
    eid = str(uuid.uuid4())
    return eid, json.dumps({
        "specversion": "1.0", "id": eid, "type": etype, "source": "ORDER",
        "subject": str(order_id),
        "time": datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z"),
        "eventversion": 1, "datacontenttype": "application/json",
        "data": {"orderId": order_id, "tenantId": "demo"},
    })


def main():
    url, exchange = sys.argv[1], sys.argv[2]
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.exchange_declare(exchange, "topic", durable=True)
    ch.confirm_delivery()
    events = [event(1001), event(1002), event(1003)]
    batch = events + [events[0]]  # the repeat: same id, same body
    for eid, body in batch:
        props = pika.BasicProperties(content_type="application/cloudevents+json", delivery_mode=2,
                                     message_id=eid, type="ORDER_ACCEPTED")
        ch.basic_publish(exchange, "ORDER_ACCEPTED", body, props, mandatory=True)
        print(f"published {eid} {json.loads(body)['type']} order {json.loads(body)['subject']}")
    # One malformed message: it must land in the dead-letter queue with a reason.
    ch.basic_publish(exchange, "ORDER_ACCEPTED", b'{"specversion":"1.0","type":"ORDER_ACCEPTED"}',
                     pika.BasicProperties(delivery_mode=2), mandatory=True)
    print("published one malformed message (no id)")
    conn.close()


if __name__ == "__main__":
    main()
