"""Dead letters of deliveries that never reach their tenant's database name
the tenant in x-sidecar-tenant whenever it could be read, and only then:
without ordering, a malformed message whose body still names its tenant and
one too large for max_message_bytes whose binary mode header does; with
ordering, an event without its ordering key and a malformed message. A
delivery without a tenant, or with a name tenants.names refuses, carries
none. Before, none of them carried the header."""
import json

from harness import *
from tenants_common import *

sfx = suffix()
A = "da_" + sfx
make_tenant_db(A)
tenants = {"key": "extension:tenant", "database_url": tenant_url(), "max_connections": 2,
           "idle_close_ms": 60000}
plain = Sidecar(name="t-tdlt-" + sfx, consumer_extra={"max_message_bytes": 4096},
                extra={"tenants": tenants})
ordered = Sidecar(name="t-tdlo-" + sfx, consumer_extra={"ordering": {"key": "subject"}},
                  extra={"tenants": tenants})
ok(plain.start(), "a consumer with tenants started")
ok(ordered.start(), "an ordered consumer with tenants started")


def body(eid, tenant, drop=()):
    d = json.loads(event_body(eid, subject="s-" + sfx))
    if tenant is not None:
        d["tenant"] = tenant
    for k in drop:
        d.pop(k)
    return json.dumps(d)


def send(sc, cases):
    """cases: {label: (body, headers)}; returns {label: message_id}."""
    conn = amqp()
    ch = conn.channel()
    ch.confirm_delivery()
    ids = {}
    for label, (b, h) in cases.items():
        eid = str(uuid.uuid4())
        publish(ch, sc.exchange, "ORDER_ACCEPTED", b.replace("@ID@", eid), message_id=eid, headers=h)
        ids[label] = eid
    conn.close()
    return ids


def dead_letters(sc, n):
    got = {}
    wait_until(lambda: got.update({p.message_id: p.headers or {} for p, _ in drain(sc.dlq)})
               or len(got) >= n, timeout=30)
    return got


def text(h, name):
    v = h.get(name)
    return v.decode() if isinstance(v, bytes) else v


big = json.dumps({"specversion": "1.0", "id": "@ID@", "type": "ORDER_ACCEPTED", "source": "ORDER",
                  "tenant": A, "data": {"pad": "x" * 6000}})
cases = {"malformed, its body naming A": (body("@ID@", A, drop=("source",)), None),
         "too large, its binary mode header naming A": (big, {"cloudEvents:tenant": A}),
         "without a tenant": (body("@ID@", None), None),
         "a refused name": (body("@ID@", "Not-A-Name!"), None)}
ids = send(plain, cases)
got = dead_letters(plain, len(cases))
is_eq(len(got), 4, "without ordering: the 4 deliveries dead-lettered")
for label, want in (("malformed, its body naming A", A),
                    ("too large, its binary mode header naming A", A),
                    ("without a tenant", None), ("a refused name", None)):
    h = got.get(ids[label], {})
    is_eq(text(h, "x-sidecar-tenant"), want, f"without ordering, {label}: x-sidecar-tenant "
          f"(reason: {text(h, 'x-sidecar-reason')!s:.100})")

cases = {"without its ordering key": (body("@ID@", A, drop=("subject",)), None),
         "malformed, its body naming A": (body("@ID@", A, drop=("source",)), None),
         "without a tenant": (body("@ID@", None), None),
         "a refused name": (body("@ID@", "Not-A-Name!"), None)}
ids = send(ordered, cases)
got = dead_letters(ordered, len(cases))
is_eq(len(got), 4, "with ordering: the 4 deliveries dead-lettered")
for label, want in (("without its ordering key", A), ("malformed, its body naming A", A),
                    ("without a tenant", None), ("a refused name", None)):
    h = got.get(ids[label], {})
    is_eq(text(h, "x-sidecar-tenant"), want, f"with ordering, {label}: x-sidecar-tenant "
          f"(reason: {text(h, 'x-sidecar-reason')!s:.100})")
is_eq(tenant_query(A, "SELECT COUNT(*) FROM consumed_event")[0][0], 0, "nothing claimed in A's database")
is_eq(plain.stop(), 0, "the consumer stops cleanly")
is_eq(ordered.stop(), 0, "the ordered consumer stops cleanly")
drop_tenant_db(A)
done()
