"""x-delivery-count is trusted only where the broker sets it: on a quorum
queue's redelivery. A classic queue hands a publisher's x-delivery-count on
unchanged, and so does a quorum queue on a message's first delivery (RabbitMQ
3.10 to a consumer); read there it would dead-letter a good message without
running it ("delivered 1001 times ... more than max_attempts")."""
from harness import *


def published_with_count(sc, count):
    eid = str(uuid.uuid4())
    conn = amqp()
    ch = conn.channel()
    ch.confirm_delivery()
    publish(ch, sc.exchange, "ORDER_ACCEPTED", event_body(eid, subject="4242"), message_id=eid,
            headers={"x-delivery-count": count})
    conn.close()
    return eid


for queue_type in ("classic", "quorum"):
    sc = Sidecar(consumer_extra={"queue_type": queue_type, "max_attempts": 3})
    bound_queue(sc.exchange, queue=sc.queue, quorum=queue_type == "quorum")
    eid = published_with_count(sc, 1000)
    ok(sc.start(), f"{queue_type}: consumer started")
    ok(wait_until(lambda: sc.outcomes("applied") or sc.outcomes("dead_lettered"), timeout=30),
       f"{queue_type}: the message with a published x-delivery-count 1000 was settled")
    applied = [l for l in sc.outcomes("applied") if l.get("event_id") == eid]
    ok(applied and applied[0].get("attempt") == 1,
       f"{queue_type}: it was applied at attempt 1, the header not read as the broker's count",
       detail=[l.get("msg") for l in sc.outcomes("dead_lettered")])
    is_eq(count_in("notification_job", "event_id", [eid]), 1, f"{queue_type}: its effect is there")
    is_eq(queue_depth(sc.dlq), 0, f"{queue_type}: nothing dead-lettered")
    is_eq(sc.stop(), 0, f"{queue_type}: clean stop")
done()
