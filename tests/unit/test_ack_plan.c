/* The folding of a round's acks (consume/ack_plan.c), against a model of a
 * channel: tags 1, 2, 3, ... delivered in rounds; each delivery in hand is,
 * per round, acked at the round's end, settled alone at once (an ack or a
 * nack), or kept in hand for a later round (a down tenant's). The model
 * applies basic.ack as the broker does (`multiple`: every outstanding tag
 * up to it) and checks, seed after seed, that an ack never names a tag that
 * is not outstanding (the broker would close the channel) and never covers
 * one still in hand (a delivery acked unprocessed: lost), and that every
 * delivery ends settled. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "consume/ack_plan.h"
#include "tap.h"

enum fate { F_NONE, F_HAND, F_DEFER, F_DONE };

struct chan {
    enum fate *st;   /* by tag */
    int n;           /* tags delivered: 1..n */
    int frames, errors, lost_deliveries;
};

static uint64_t rng;
static unsigned next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng >> 11);
}

static void broker_ack(struct chan *c, uint64_t tag, int multiple)
{
    c->frames++;
    if (tag == 0 || (int)tag > c->n || c->st[tag] == F_DONE || c->st[tag] == F_NONE) {
        c->errors++;
        return;
    }
    uint64_t lo = multiple ? 1 : tag;
    for (uint64_t t = lo; t <= tag; t++) {
        if (c->st[t] == F_DONE)
            continue;
        if (c->st[t] == F_HAND)
            c->lost_deliveries++;
        c->st[t] = F_DONE;
    }
}

/* One seeded run; returns 1 when every check held. */
static int run(unsigned seed, int rounds, int cap, int keep_max, int *frames_out, int *acks_out)
{
    rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)seed * 0xbf58476d1ce4e5b9ull);
    struct chan c = {.st = calloc((size_t)rounds * 64 + 2, sizeof(enum fate))};
    struct sc_ack_plan p;
    uint64_t *acks = calloc((size_t)rounds * 64 + 2, sizeof *acks);
    if (!c.st || !acks || sc_ack_plan_init(&p, cap)) {
        free(c.st);
        free(acks);
        return 0;
    }
    int keep_pct = keep_max ? (int)(next_rand() % (unsigned)keep_max) : 0;
    int alone_pct = keep_max ? (int)(next_rand() % 20) : 0, total_acks = 0;
    for (int r = 0; r <= rounds; r++) {
        int last = r == rounds; /* the last round settles everything */
        int fresh = last ? 0 : (int)(next_rand() % 64);
        for (int i = 0; i < fresh; i++)
            c.st[++c.n] = F_HAND;
        int n = 0;
        for (int t = 1; t <= c.n; t++) {
            if (c.st[t] != F_HAND)
                continue;
            unsigned x = next_rand() % 100;
            if (!last && x < (unsigned)keep_pct)
                continue; /* stays in hand */
            if (x < (unsigned)(keep_pct + alone_pct)) {
                c.st[t] = F_DEFER; /* settled alone, now */
                broker_ack(&c, (uint64_t)t, 0);
                sc_ack_plan_settled(&p, (uint64_t)t);
            } else {
                c.st[t] = F_DEFER;
                acks[n++] = (uint64_t)t;
            }
        }
        /* the round's acks, in the order the tenants' groups ran */
        for (int i = n - 1; i > 0; i--) {
            int j = (int)(next_rand() % (unsigned)(i + 1));
            uint64_t x = acks[i];
            acks[i] = acks[j];
            acks[j] = x;
        }
        total_acks += n;
        int k = sc_ack_plan_round(&p, acks, n);
        if (k > 0)
            broker_ack(&c, acks[k - 1], k > 1);
        for (int i = k; i < n; i++)
            broker_ack(&c, acks[i], 0);
    }
    int left = 0;
    for (int t = 1; t <= c.n; t++)
        left += c.st[t] != F_DONE;
    int good = c.errors == 0 && c.lost_deliveries == 0 && left == 0;
    if (!good)
        printf("# seed %u: %d acks of a tag not outstanding, %d deliveries acked while in "
               "hand, %d never settled\n", seed, c.errors, c.lost_deliveries, left);
    *frames_out += c.frames;
    *acks_out += total_acks;
    sc_ack_plan_free(&p);
    free(c.st);
    free(acks);
    return good;
}

int main(int argc, char **argv)
{
    int seeds = argc > 1 ? atoi(argv[1]) : 20000;

    /* By hand: the round after a gap. */
    struct sc_ack_plan p;
    ok(sc_ack_plan_init(&p, 8) == 0, "a plan is made");
    uint64_t r1[] = {3, 1, 2, 5};
    is_int(sc_ack_plan_round(&p, r1, 4), 3, "tags 1-3 fold into one ack of 3; 4 is in hand");
    is_int(r1[2], 3, "the round's acks are sorted: the fold names its last");
    is_int(r1[3], 5, "5, past the gap, is acked alone");
    sc_ack_plan_settled(&p, 4);
    is_int((long long)p.settled_upto, 5, "4 settled alone closes the gap over 5");
    uint64_t r2[] = {7, 6};
    is_int(sc_ack_plan_round(&p, r2, 2), 2, "6-7 fold");
    uint64_t r3[] = {9};
    is_int(sc_ack_plan_round(&p, r3, 1), 0, "8 in hand: 9 alone");
    sc_ack_plan_free(&p);

    /* A full list past a gap stops folding for good, never wrongly. */
    ok(sc_ack_plan_init(&p, 2) == 0, "a plan with room for 2 past a gap");
    uint64_t r4[] = {2, 3, 4};
    is_int(sc_ack_plan_round(&p, r4, 3), 0, "1 in hand: nothing folds");
    ok(p.lost, "the third tag past the gap did not fit: folding stops");
    sc_ack_plan_settled(&p, 1);
    uint64_t r5[] = {5, 6};
    is_int(sc_ack_plan_round(&p, r5, 2), 0, "and stays stopped (4 is not known settled)");
    sc_ack_plan_free(&p);

    int bad = 0, frames = 0, total = 0;
    for (int s = 1; s <= seeds; s++)
        bad += !run((unsigned)s, 40, 4096, 40, &frames, &total);
    is_int(bad, 0, "%d seeded channels (40 rounds each, up to 40 %% of deliveries kept in hand "
           "a round, 20 %% settled alone): no ack of a tag not outstanding, none covering a "
           "delivery in hand, every delivery settled", seeds);
    printf("# with deliveries kept in hand: %d acks sent in %d frames\n", total, frames);
    int bad_small = 0;
    for (int s = 1; s <= seeds / 10; s++)
        bad_small += !run((unsigned)s, 40, 3, 40, &frames, &total);
    is_int(bad_small, 0, "%d seeded channels with room for 3 tags past a gap: the same holds",
           seeds / 10);
    int bad_healthy = 0, hf = 0, ht = 0;
    for (int s = 1; s <= 100; s++)
        bad_healthy += !run((unsigned)s, 40, 4096, 0, &hf, &ht);
    is_int(bad_healthy, 0, "100 channels with every tenant up: every check holds");
    ok(hf <= 100 * 41, "with every tenant up, one frame per round at most (%d frames for %d acks "
       "over 4,100 rounds)", hf, ht);
    return done();
}
