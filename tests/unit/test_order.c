/* Per-key order: the key of a delivery (subject, a data pointer, none) and
 * the scheduler's pick (one per key, oldest first, delays kept). */
#include <stdint.h>
#include <string.h>

#include "sidecar/config.h"
#include "sidecar/consume/order.h"
#include "sidecar/envelope/message.h"
#include "tap.h"

static struct sc_consumer_config k;

static enum sc_order_kind key_of(const char *body, const char *content_type, char *key,
                                 char *why)
{
    amqp_envelope_t env;
    memset(&env, 0, sizeof env);
    env.message.body = amqp_cstring_bytes(body);
    env.message.properties._flags = AMQP_BASIC_CONTENT_TYPE_FLAG;
    env.message.properties.content_type =
        amqp_cstring_bytes(content_type ? content_type : SC_CT_STRUCTURED);
    return sc_order_key(&k, &env, key, SC_ORDER_KEY_MAX + 1, why, 256);
}

#define EV(extra) "{\"specversion\":\"1.0\",\"id\":\"00000000-0000-4000-8000-000000000001\"," \
                  "\"type\":\"T\",\"source\":\"S\"" extra "}"

static void slot(struct sc_order *o, const char *key, int64_t due)
{
    struct sc_order_slot *s = sc_order_add(o);
    s->kind = key ? SC_ORDER_KEYED : SC_ORDER_UNKEYED;
    snprintf(s->key, sizeof s->key, "%s", key ? key : "");
    s->hash = key ? sc_order_hash(key) : 0;
    s->due_ms = due;
}

int main(void)
{
    char key[SC_ORDER_KEY_MAX + 1], why[256];
    k.envelope = "cloudevents";
    k.max_message_bytes = 1 << 20;
    k.ordering = (struct sc_ordering_config){.present = 1, .key = "subject", .partitions = 1};
    ok(key_of(EV(",\"subject\":\"order-7\""), NULL, key, why) == SC_ORDER_KEYED &&
           strcmp(key, "order-7") == 0, "subject: the key (%s)", key);
    ok(key_of(EV(""), NULL, key, why) == SC_ORDER_UNKEYED &&
           strstr(why, "no ordering key: the event has no subject"), "no subject: no key (%s)", why);
    ok(key_of("[" EV(",\"subject\":\"a\"") "]", SC_CT_BATCH, key, why) == SC_ORDER_UNKEYED &&
           strstr(why, "batch-mode message"), "a batch-mode message: no key (%s)", why);
    ok(key_of("{nope", NULL, key, why) == SC_ORDER_OPEN, "malformed: left to the batch");
    ok(key_of("[]", SC_CT_BATCH, key, why) == SC_ORDER_OPEN,
       "an empty batch: no event to keep in order, left to the batch (which acks it)");
    k.ordering.key = "data/order/id";
    ok(key_of(EV(",\"data\":{\"order\":{\"id\":\"A-1\"}}"), NULL, key, why) == SC_ORDER_KEYED &&
           strcmp(key, "A-1") == 0, "a data pointer naming a string (%s)", key);
    ok(key_of(EV(",\"data\":{\"order\":{\"id\":12.50}}"), NULL, key, why) == SC_ORDER_KEYED &&
           strcmp(key, "12.50") == 0, "a number as written (%s)", key);
    ok(key_of(EV(",\"data\":{\"order\":{\"id\":{}}}"), NULL, key, why) == SC_ORDER_UNKEYED &&
           strstr(why, "an object"), "an object: no key (%s)", why);
    ok(key_of(EV(",\"data\":{\"order\":{}}"), NULL, key, why) == SC_ORDER_UNKEYED &&
           strstr(why, "names nothing"), "nothing there: no key (%s)", why);

    struct sc_order o;
    int idx[8];
    int64_t due;
    ok(sc_order_init(&o, 8) == 0, "an in-hand set of 8");
    slot(&o, "a", 0);     /* 0: a's head */
    slot(&o, "b", 500);   /* 1: b's head, waiting its delay */
    slot(&o, "a", 0);     /* 2: behind a's head */
    slot(&o, NULL, 0);    /* 3: unkeyed: ordered with nothing */
    slot(&o, "b", 0);     /* 4: behind b's waiting head */
    slot(&o, "c", 0);     /* 5 */
    int n = sc_order_pick(&o, 100, 8, idx, &due);
    ok(n == 3 && idx[0] == 0 && idx[1] == 3 && idx[2] == 5 && due == 500,
       "one per key, oldest first; a waiting head holds its key back (picked %d, next due %lld)", n,
       (long long)due);
    ok(sc_order_pick(&o, 100, 1, idx, &due) == 1 && idx[0] == 0, "at most max");
    sc_order_remove(&o, 0);
    n = sc_order_pick(&o, 600, 8, idx, &due);
    ok(n == 4 && idx[0] == 0 && idx[1] == 1 && idx[2] == 2 && idx[3] == 4 && due == INT64_MAX,
       "a's next and b's head once due (picked %d)", n);
    for (int i = 0; i < 2; i++)
        slot(&o, "x", 0);
    ok(o.n == 7 && sc_order_add(&o) && !sc_order_add(&o), "the set holds cap deliveries, no more");
    int64_t last;
    uint64_t h = sc_order_hash("v");
    int r1 = sc_order_version(&o, h, 1, &last), r2 = sc_order_version(&o, h, 2, &last);
    int r4 = sc_order_version(&o, h, 4, &last);
    int64_t after4 = last;
    int r3 = sc_order_version(&o, h, 3, &last);
    ok(r1 == 0 && r2 == 0 && r4 == 1 && after4 == 2 && r3 == -1 && last == 4,
       "eventversion per key: 1, 2 in order, 4 a gap after 2, 3 a regression after 4");
    ok(sc_order_version(&o, sc_order_hash("w"), 7, &last) == 0,
       "a key not remembered is not checked");
    sc_order_free(&o);
    return done();
}
