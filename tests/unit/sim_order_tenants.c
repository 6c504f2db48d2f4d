/* Per-key order with tenants, simulated: the real in-hand set (order.c)
 * and the decisions of the ordered tenants' loop (order_tenants.c) driven
 * against a stand-in broker (one FIFO queue, one delay queue with a single
 * TTL, a prefetch) and one stand-in database per tenant, with a seeded
 * schedule of outages of one tenant's database and handler failures
 * (retries in place). The loop below takes the steps ordered_tenants.c
 * takes, in its order: block, send round what is due, gather (a delivery
 * behind its tenant's copies follows them), block, pick, one tenant's
 * batch, after.
 *
 * After every step: every (tenant, key)'s effects were applied in version
 * order, none twice; every up tenant's ready key heads were picked (a down
 * tenant never holds back another's same key). At the end, with every
 * database up: every event applied, none lost.
 *
 *   sim_order_tenants [--seeds N] [--seed S] [-v]   (SIM_TRACE=1: every take,
 *   round and apply) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consume/order.h"
#include "consume/order_tenants.h"
#include "consume/worker.h"
#include "tap.h"

#define TENANTS 3
#define KEYS 3
#define MAX_MSGS 4096
#define STEP_MS 50
#define PARTS 2 /* a key's partition: its index % PARTS */

static const char *const tenant_names[TENANTS] = {"acme", "globex", "initech"};
static const char *const key_names[KEYS] = {"order-1", "order-2", "order-3"};

static uint64_t rng;
static unsigned rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

struct msg {
    int tenant, key, version;
    int64_t copy; /* the rank its copy carries, -1: not a copy */
};

struct world {
    struct msg msgs[MAX_MSGS];          /* by id */
    int n_msgs;
    int queue[PARTS][MAX_MSGS], q_head[PARTS], q_tail[PARTS]; /* partitions, FIFO each */
    int delay[MAX_MSGS], d_head, d_tail; /* the delay queue, FIFO, one TTL */
    int64_t delay_due[MAX_MSGS];
    int64_t now;
    int db_up[TENANTS];                 /* the stand-in databases */
    int64_t retry_at[TENANTS];          /* the worker's view: down until then */
    unsigned failures[TENANTS];
    struct sc_order_ring rings[TENANTS][PARTS];
    int n_rings[TENANTS];
    int applied[TENANTS][KEYS];         /* last version applied */
    int produced[TENANTS][KEYS];
    int n_rounds;                       /* copies sent round */
    char why[256];                      /* first broken invariant */
};

static struct world W;
static int verbose;

enum { PREFETCH = 16, BATCH_MAX = 16, HOLD_MS = 400, DELAY_MS = 300, FAULTY = 1 };

/* The first broken invariant: what, of (t, k), with a and b. */
static void fail(const char *what, int t, int k, int a, int b)
{
    if (W.why[0])
        return;
    snprintf(W.why, sizeof W.why, "%s/%s: %s (%d, %d)", tenant_names[t], key_names[k], what, a, b);
}

static int down_cb(void *ctx, const char *tenant)
{
    (void)ctx;
    for (int t = 0; t < TENANTS; t++)
        if (strcmp(tenant, tenant_names[t]) == 0)
            return W.retry_at[t] > W.now;
    return 0;
}

static int tenant_of(const char *name)
{
    for (int t = 0; t < TENANTS; t++)
        if (strcmp(name, tenant_names[t]) == 0)
            return t;
    return -1;
}

static void drop(amqp_envelope_t *env)
{
    (void)env;
}

static amqp_bytes_t part_tag(int p)
{
    static char tags[PARTS][8];
    snprintf(tags[p], sizeof tags[p], "p%d", p);
    return amqp_cstring_bytes(tags[p]);
}

static struct sc_order_ring *ring(int t, int p)
{
    return sc_order_ring_of(W.rings[t], &W.n_rings[t], PARTS, part_tag(p));
}

/* The broker: a message's copy, with its rank, to the delay queue. */
static void go_round(int id, int64_t rank)
{
    struct msg *m = &W.msgs[id];
    if (getenv("SIM_TRACE"))
        printf("# t=%lld round %s/%s v%d (copy %lld) -> s%lld\n", (long long)W.now, tenant_names[m->tenant],
               key_names[m->key], m->version, (long long)m->copy, (long long)rank);
    int c = W.n_msgs++;
    W.msgs[c] = *m;
    W.msgs[c].copy = rank;
    W.delay[W.d_tail] = c;
    W.delay_due[W.d_tail++] = W.now + DELAY_MS;
    W.n_rounds++;
}

static void produce(void)
{
    int t = (int)rnd(TENANTS), k = (int)rnd(KEYS);
    if (W.n_msgs >= MAX_MSGS / 2)
        return;
    int id = W.n_msgs++;
    W.msgs[id] = (struct msg){.tenant = t, .key = k, .version = ++W.produced[t][k], .copy = -1};
    W.queue[k % PARTS][W.q_tail[k % PARTS]++] = id;
}

static void fill_slot(struct sc_order_slot *s, int id)
{
    const struct msg *m = &W.msgs[id];
    memset(s, 0, sizeof *s);
    s->env.delivery_tag = (uint64_t)id;
    s->env.consumer_tag = part_tag(m->key % PARTS);
    s->kind = SC_ORDER_KEYED;
    snprintf(s->key, sizeof s->key, "%s", key_names[m->key]);
    snprintf(s->id, sizeof s->id, "%d", id);
    s->replay_token[0] = 0;
    sc_order_set_tenant(s, tenant_names[m->tenant]);
}

static void mark_down(int t)
{
    W.failures[t]++;
    W.retry_at[t] = W.now + 100 * (int64_t)(W.failures[t] < 5 ? W.failures[t] : 5);
}

/* One round of the loop. Returns 0, or -1 when an invariant broke. */
static int step(struct sc_order *o, int *idx, struct delivery *dls, int faults)
{
    /* The schedule: the faulty tenant's database goes down and up. */
    if (faults && rnd(40) == 0)
        W.db_up[FAULTY] = !W.db_up[FAULTY];
    if (faults && rnd(3) == 0)
        produce();
    while (W.d_head < W.d_tail && W.delay_due[W.d_head] <= W.now) {
        int id = W.delay[W.d_head++], p = W.msgs[id].key % PARTS;
        W.queue[p][W.q_tail[p]++] = id;
    }

    sc_order_block(o, down_cb, NULL, W.now);
    int at;
    while ((at = sc_order_return_due(o, W.now, HOLD_MS, PREFETCH / 2)) >= 0) {
        char tn[SC_TENANT_MAX + 1];
        snprintf(tn, sizeof tn, "%s", o->slots[at].tenant);
        int t = tenant_of(tn);
        /* As ordered_tenants.c: each queue's slots of the tenant ranked
         * just before what is out of that queue, oldest first. */
        for (int p = 0; p < PARTS; p++) {
            int k = 0;
            for (int i = 0; i < o->n; i++)
                k += strcmp(o->slots[i].tenant, tn) == 0 &&
                     W.msgs[o->slots[i].env.delivery_tag].key % PARTS == p;
            int64_t rank = sc_order_ring_back(ring(t, p), k);
            for (int i = 0; i < o->n;) {
                const struct sc_order_slot *s = &o->slots[i];
                if (strcmp(s->tenant, tn) != 0 || W.msgs[s->env.delivery_tag].key % PARTS != p) {
                    i++;
                    continue;
                }
                go_round((int)s->env.delivery_tag, rank++);
                sc_order_remove(o, i);
            }
        }
    }
    for (int got = 0; got < BATCH_MAX; got++) {
        /* The partitions interleave as the broker pleases. */
        int p = (int)rnd(PARTS);
        if (W.q_head[p] == W.q_tail[p])
            p = 1 - p;
        if (W.q_head[p] == W.q_tail[p])
            break;
        struct sc_order_slot *s = sc_order_add(o);
        if (!s)
            break;
        int id = W.queue[p][W.q_head[p]++];
        struct msg *m = &W.msgs[id];
        int64_t rank = m->copy;
        int room = !down_cb(NULL, tenant_names[m->tenant]) || sc_order_blocked(o) < PREFETCH / 2;
        if (sc_order_ring_arrive(ring(m->tenant, p), &rank, room)) {
            o->n--;
            go_round(id, rank);
            continue;
        }
        fill_slot(s, id);
        if (getenv("SIM_TRACE"))
            printf("# t=%lld take %s/%s v%d (copy %lld) out %d expect %lld\n", (long long)W.now, tenant_names[m->tenant],
                   key_names[m->key], m->version, (long long)m->copy, (int)sc_order_ring_out(ring(m->tenant, p)), (long long)ring(m->tenant, p)->next);
    }
    sc_order_block(o, down_cb, NULL, W.now);
    int64_t next_due;
    int n = sc_order_pick(o, W.now, o->cap, idx, &next_due);

    /* Independence: every ready head of an up tenant's key is picked. */
    for (int i = 0; i < o->n; i++) {
        const struct sc_order_slot *s = &o->slots[i];
        int head = 1;
        for (int j = 0; j < i && head; j++)
            head = !(strcmp(o->slots[j].key, s->key) == 0 &&
                     strcmp(o->slots[j].tenant, s->tenant) == 0);
        if (!head || s->blocked || s->due_ms > W.now)
            continue;
        int picked = 0;
        for (int j = 0; j < n; j++)
            picked |= idx[j] == i;
        if (!picked) {
            const struct msg *m = &W.msgs[s->env.delivery_tag];
            fail("an up tenant's ready head (version, slot) not picked", m->tenant,
                 m->key, m->version, i);
            return -1;
        }
    }

    n = sc_order_one_tenant(o, idx, n < BATCH_MAX ? n : BATCH_MAX);
    if (n == 0)
        return 0;
    sc_order_batch(o, idx, n, dls);
    int t = tenant_of(o->slots[idx[0]].tenant);
    if (!W.db_up[t]) {
        /* Nothing of the batch committed: all in hand, the tenant down. */
        for (int j = 0; j < n; j++)
            dls[j].kept = 1, dls[j].spent = 0, dls[j].again_ms = 0;
        mark_down(t);
    } else {
        W.failures[t] = 0;
        W.retry_at[t] = 0;
        for (int j = 0; j < n; j++) {
            const struct msg *m = &W.msgs[dls[j].env.delivery_tag];
            if (faults && rnd(8) == 0) { /* the handler failed: a retry in place */
                dls[j].kept = 1, dls[j].spent = 1, dls[j].again_ms = 2 * STEP_MS;
                continue;
            }
            int *last = &W.applied[m->tenant][m->key];
            if (m->version != *last + 1) {
                fail("applied out of order (version, after)", m->tenant, m->key, m->version, *last);
                return -1;
            }
            *last = m->version;
            if (getenv("SIM_TRACE"))
                printf("# t=%lld applied %s/%s v%d (copy %lld)\n", (long long)W.now, tenant_names[m->tenant],
                       key_names[m->key], m->version, (long long)m->copy);
        }
    }
    sc_order_after(o, idx, dls, n, W.now, drop);
    return 0;
}

static int run(uint64_t seed)
{
    memset(&W, 0, sizeof W);
    rng = seed * 0x9e3779b97f4a7c15ULL + 1;
    for (int t = 0; t < TENANTS; t++)
        W.db_up[t] = 1;
    struct sc_order o;
    int idx[PREFETCH];
    struct delivery dls[PREFETCH];
    if (sc_order_init(&o, PREFETCH))
        return -1;
    o.queue_cap = PREFETCH;
    int steps = 200 + (int)rnd(400), rc = 0;
    for (int i = 0; i < steps && !rc; i++, W.now += STEP_MS)
        rc = step(&o, idx, dls, 1);
    /* The faults end: everything must come through. */
    W.db_up[FAULTY] = 1;
    for (int i = 0; i < 2000 && !rc; i++, W.now += STEP_MS) {
        if (o.n == 0 && W.q_head[0] == W.q_tail[0] && W.q_head[1] == W.q_tail[1] &&
            W.d_head == W.d_tail)
            break;
        rc = step(&o, idx, dls, 0);
    }
    for (int t = 0; t < TENANTS && !rc; t++)
        for (int k = 0; k < KEYS && !rc; k++)
            if (W.applied[t][k] != W.produced[t][k]) {
                fail("lost: applied of produced at the end", t, k, W.applied[t][k],
                     W.produced[t][k]);
                rc = -1;
            }
    if (verbose)
        printf("# seed %llu: %d messages, %d went round, %d in hand at the end\n",
               (unsigned long long)seed, W.n_msgs, W.n_rounds, o.n);
    sc_order_free(&o);
    return rc;
}

int main(int argc, char **argv)
{
    long seeds = 2000;
    long long only = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc)
            seeds = atol(argv[++i]);
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            only = atoll(argv[++i]);
        else if (strcmp(argv[i], "-v") == 0)
            verbose = 1;
    }
    long failed = 0, rounds = 0;
    long long first = -1;
    char first_why[256] = "";
    for (long s = only >= 0 ? only : 1; s <= (only >= 0 ? only : seeds); s++) {
        if (run((uint64_t)s)) {
            if (first < 0) {
                first = s;
                snprintf(first_why, sizeof first_why, "%s", W.why);
            }
            failed++;
        }
        rounds += W.n_rounds;
    }
    ok(failed == 0, "per (tenant, key) order over %ld seeds, %ld copies sent round: %ld failed%s",
       only >= 0 ? 1 : seeds, rounds, failed, failed ? "" : "");
    if (first >= 0)
        printf("# first failing seed %lld: %s\n#   replay: sim_order_tenants --seed %lld -v\n",
               first, first_why, first);
    ok(rounds > 0, "the schedule sends a down tenant's deliveries round (%ld copies)", rounds);
    printf("1..%d\n", tap_n);
    return tap_failed ? 1 : 0;
}
