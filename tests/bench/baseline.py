#!/usr/bin/python3
"""The per-message baseline, written the most direct way: pika + MySQLdb,
one transaction per message (claim, effect, COMMIT), ack after COMMIT.

usage: baseline.py AMQP_URL MYSQL_HOST MYSQL_PORT QUEUE CONSUMER MAX_SECONDS"""
import json
import sys
import time

import MySQLdb
import pika

url, host, port, queue, consumer, max_s = sys.argv[1:7]
db = MySQLdb.connect(host=host, port=int(port), user="sidecar", passwd="sidecar", db="app")
db.autocommit(False)
cur = db.cursor()
conn = pika.BlockingConnection(pika.URLParameters(url))
ch = conn.channel()
ch.basic_qos(prefetch_count=100)
deadline = time.time() + float(max_s)
for method, props, body in ch.consume(queue, inactivity_timeout=2):
    if method is None or time.time() > deadline:
        break
    ev = json.loads(body)
    try:
        cur.execute("INSERT INTO consumed_event (consumer_name, event_id, consumed_at) VALUES (%s, %s, UTC_TIMESTAMP(6))",
                    (consumer, ev["id"]))
        cur.execute("INSERT INTO notification_job (event_id, order_id, source_version, status, created_at)"
                    " VALUES (%s, %s, %s, 'PENDING', UTC_TIMESTAMP(6))", (ev["id"], int(ev["subject"]), ev["eventversion"]))
        db.commit()
    except MySQLdb.IntegrityError:
        db.rollback()
    ch.basic_ack(method.delivery_tag)
conn.close()
