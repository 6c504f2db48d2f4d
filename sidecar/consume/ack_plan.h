/* The acks of a round of a consumer with tenants, folded into one basic.ack
 * with `multiple` where that is safe.
 *
 * A consumer with tenants settles deliveries out of order (tenant by
 * tenant; a down tenant's deliveries wait in hand), so it acks each one
 * alone. The broker pays for every frame: about 65 us per ack on RabbitMQ
 * 3.10, a round of 2,600 costing the queue 0.17 s, where a consumer
 * without tenants sends one ack per batch. But a channel's delivery tags
 * are 1, 2, 3, ... with no gap, so once every tag up to T is known settled
 * (acked, nacked, or in this round's acks), one ack of T with `multiple`
 * settles all of them: it can cover nothing still in hand. A tag never
 * reported settled (a delivery waiting in hand, or one this tracking was
 * not told of) stops the fold there; what lies beyond is acked alone, as
 * before. Pure: no I/O, tested by tests/unit/test_ack_plan.c. */
#ifndef SC_CONSUME_ACK_PLAN_H
#define SC_CONSUME_ACK_PLAN_H

#include <stdint.h>

struct sc_ack_plan {
    uint64_t settled_upto; /* every tag up to it is settled */
    uint64_t *beyond;      /* settled tags past a gap, ascending */
    int n_beyond, cap;
    int lost;              /* a tag past a gap could not be kept: no more folding */
};

/* cap: tags past a gap kept at most (the worker's in-hand bound or more).
 * Returns 0, or -1 (out of memory). */
int sc_ack_plan_init(struct sc_ack_plan *p, int cap);
void sc_ack_plan_free(struct sc_ack_plan *p);

/* Tag was settled by its own ack or nack, sent already. */
void sc_ack_plan_settled(struct sc_ack_plan *p, uint64_t tag);

/* Plans the sending of a round's n acks (sorted here, ascending): returns
 * k, the count of acks[0..k) that one ack of acks[k - 1] with `multiple`
 * settles (0: none; 1: an ack of one tag either way); acks[k..n) are to be
 * sent alone. Counts them all as settled: the caller sends them, or ends
 * the channel. */
int sc_ack_plan_round(struct sc_ack_plan *p, uint64_t *acks, int n);

#endif
