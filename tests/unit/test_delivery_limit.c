/* Reading an existing quorum queue's x-delivery-limit from the broker's 406
 * refusal, and the limit a consumed queue needs: the texts are RabbitMQ
 * 3.10's, as measured. */
#include <string.h>

#include "io/amqp_conn.h"
#include "tests/unit/tap.h"

#define PRE                                                                                  \
    "PRECONDITION_FAILED - inequivalent arg 'x-delivery-limit' for queue 'orders' in vhost '/': "

static void reads(const char *text, int want_has, long long want_limit, const char *label)
{
    long long limit = -999;
    int has = sc_amqp_existing_delivery_limit(text, &limit);
    ok(has == want_has && (has != 1 || limit == want_limit), "%s: has %d, limit %lld", label, has,
       limit);
}

int main(void)
{
    reads(PRE "received the value '2147483647' of type 'signedint' but current is none", 0, 0,
          "an earlier version's queue: none");
    reads(PRE "received '2147483647' but current is '50'", 1, 50, "a limit of its own");
    reads(PRE "received none but current is the value '50' of type 'signedint'", 1, 50,
          "declared without: the value and its type");
    reads(PRE "received '2147483647' but current is '-1'", 1, -1, "RabbitMQ 4's -1");
    reads("PRECONDITION_FAILED - inequivalent arg 'x-single-active-consumer' for queue 'orders' in "
          "vhost '/': received the value 'true' of type 'bool' but current is none", -1, 0,
          "another argument: not a limit");
    reads("PRECONDITION_FAILED - inequivalent arg 'x-delivery-limit' for queue 'but current is '7'"
          "xxxxxxxx...", -1, 0, "cut at 255 bytes: the name's text is not read as the limit");
    reads(PRE "received '2147483647' but current is '5", -1, 0, "no closing quote");
    reads(PRE "received '2147483647' but current is 'x'", -1, 0, "not a number");
    reads("", -1, 0, "empty");

    ok(sc_amqp_delivery_limit_enough(0, 0, 10),
       "none (20 on RabbitMQ 4) is enough for max_attempts 10");
    ok(!sc_amqp_delivery_limit_enough(0, 0, 11), "but not for 11: 11 + %d > 20",
       SC_DELIVERY_LIMIT_MARGIN);
    ok(sc_amqp_delivery_limit_enough(1, 35, 25), "35 is enough for max_attempts 25");
    ok(!sc_amqp_delivery_limit_enough(1, 34, 25), "34 is not");
    ok(sc_amqp_delivery_limit_enough(1, 2147483647, 1000),
       "the sidecar's own limit is enough for 1000");
    ok(!sc_amqp_delivery_limit_enough(1, -1, 1),
       "-1 is not taken (RabbitMQ 3.x drops at the first return)");
    ok(!sc_amqp_delivery_limit_enough(-1, 0, 1), "an unknown limit is not taken");
    return done();
}
