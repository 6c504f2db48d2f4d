"""The database is out of reach from one consumer only (a gate proxy cuts and
refuses its connections): the worker keeps its deliveries while it tries to
make the session again, but not for ever: after db_outage_hold_ms (here
8 s) it returns them, and a
consumer that reaches the database applies them. Then the gate opens and the
first consumer is ready again. Exact effects by event id."""
import time

from harness import *

N = 20
CUT = 3
gate = GateProxy(int(os.environ["SC_TEST_MYSQL_PORT"]))
HOLD_S = 8
c1 = Sidecar(mysql_url=gate.url(), consumer_extra={"prefetch": 64, "batch_max": 1, "workers": 1,
                                                   "db_outage_hold_ms": HOLD_S * 1000})
c2 = Sidecar(name=c1.name, exchange=c1.exchange, consumer_extra={"prefetch": 64, "workers": 1})
bound_queue(c1.exchange, queue=c1.queue)
events = new_events(N, start=4300)
ids = [e for e, _ in events]
publish_events(c1.exchange, events)  # all waiting: c1 takes them all in hand
ok(c1.start(env={"SIDECAR_FAULT": f"consumer.after_insert:{CUT}", "SIDECAR_FAULT_PAUSE_MS": "2000"}),
   "consumer 1 started through the gate")
ok(wait_until(lambda: any("fault point reached" in l.get("msg", "") for l in c1.lines()), timeout=30),
   f"consumer 1 paused inside the transaction of delivery {CUT}")
gate.down()
t_cut = time.time()
ok(c2.start(), "consumer 2 started (it reaches the database)")
applied = lambda: count_in("notification_job", "event_id", ids)
time.sleep(HOLD_S / 2)
early = applied()
ok(early <= CUT, f"{HOLD_S / 2:.0f} s after the cut consumer 1 still holds the rest ({early} of {N} applied)")
ok(wait_until(lambda: applied() == N, timeout=60), "every event applied")
held_for = time.time() - t_cut
ok(HOLD_S <= held_for <= HOLD_S + 15, f"the deliveries in hand came back after the hold ({held_for:.1f} s after the cut)")
ok(any("returning the deliveries in hand" in l.get("msg", "") for l in c1.lines()),
   "consumer 1 said it returned them", detail=[l.get("msg") for l in c1.lines()][-5:])
ok(gate.refused > 0, f"its reconnects were refused meanwhile ({gate.refused})")
wait_until(lambda: len(c2.outcomes("applied")) >= N - early, timeout=10)
ok(len(c2.outcomes("applied")) >= N - early, f"consumer 2 applied them ({len(c2.outcomes('applied'))})")
is_eq(count_in("notification_job", "event_id", ids), N, "one effect per event")
is_eq(count_in("consumed_event", "event_id", ids, f"AND consumer_name = '{c1.name}'"), N, "one claim per event")
ok(c1.alive(), "consumer 1 never exited")
gate.up()
ok(wait_until(lambda: c1.get("/readyz")[0] == 200, timeout=40), "with the gate open consumer 1 is ready again")
more = new_events(10, start=4400)
publish_events(c1.exchange, more)
ok(wait_until(lambda: count_in("notification_job", "event_id", [e for e, _ in more]) == 10, timeout=30),
   "and new events flow")
is_eq(queue_depth(c1.dlq), 0, "nothing dead-lettered")
is_eq(c1.stop(), 0, "consumer 1: clean stop")
is_eq(c2.stop(), 0, "consumer 2: clean stop")
done()
