#!/usr/bin/python3
"""Publishes what a broken producer might: a message on the orders exchange
whose body claims to be a CloudEvent but has no id. The consumer must never
hand it to a handler nor ack it silently: it goes to the dead-letter queue
with its reason. Persistent, mandatory, under publisher confirms.

usage: publish_malformed.py AMQP_URL EXCHANGE ROUTING_KEY"""
import sys

import pika


def main():
    url, exchange, routing_key = sys.argv[1:4]
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.exchange_declare(exchange, "topic", durable=True)
    ch.confirm_delivery()
    ch.basic_publish(exchange, routing_key, b'{"specversion":"1.0","type":"ORDER_ACCEPTED","source":"ORDER"}',
                     pika.BasicProperties(content_type="application/cloudevents+json", delivery_mode=2),
                     mandatory=True)
    print(f"published one malformed message (no id) to {exchange} with key {routing_key}, confirmed")
    conn.close()


if __name__ == "__main__":
    main()
