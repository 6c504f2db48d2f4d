/* A deterministic simulation of the relay (anchors: FoundationDB's
 * simulation testing, TigerBeetle's VOPR). One seed draws a configuration
 * (checked by the real sc_config_parse), 1-3 relays running the real relay
 * core, outbox rows (some breaking an envelope rule, some the broker client
 * refuses, some above relay.max_message_bytes, some the broker refuses:
 * it closes the channel because of message i), which faults this run has
 * and a time when they stop; the
 * simulated clock makes seconds of leases pass in microseconds. Invariants
 * are checked at every change of the database and after every step:
 *
 *  - PUBLISHED => a broker-acked copy was published by the marking relay
 *    while it held the lease, and only the lease holder marks (PUBLISHED or
 *    FAILED);
 *  - a valid row is never FAILED; a row that breaks a rule or is above
 *    relay.max_message_bytes is never offered to the broker; every message
 *    published is one the consumer accepts, with the row's id and payload
 *    byte for byte;
 *  - a message above SC_RELAY_LONE_BYTES goes out alone, with nothing else
 *    unconfirmed on its channel: when the broker closes the channel over
 *    it, no batch-mate is in doubt (RabbitMQ confirms nothing after a
 *    close, and a batch-mate sent again would be published twice);
 *  - the relay publishes only on an open channel, and opens it again only
 *    after the broker closed it;
 *  - a batch's lease outlasts the confirm waits up to its mark unless a lock
 *    wait held its relay;
 *  - the broker never drops a connection for missed heartbeats when every
 *    lock wait stays within lock_wait_timeout_s;
 *  - the core's counts agree with what the database told it, and no row
 *    made a transition its state machine does not have;
 *  - faults stop => every row ends PUBLISHED (valid) or FAILED (not), in
 *    bounded time: a row never holds back its batch-mates.
 *
 *   sim_relay                    100,000 schedules from seed 1 (TAP; 20,000 under
 *                                ASan; SC_SIM_SCHEDULES=K for another number)
 *   sim_relay --seed N --verbose one schedule, traced on stderr
 *   sim_relay --first N --schedules K
 *   sim_relay --no-ordering       every schedule with relay.ordering "none", as before
 *                                per_aggregate ordering was simulated
 *   sim_relay --no-large          no large message, no size bound: as before the broker's
 *                                refusals were simulated (both flags: seeds replay as in 0.3)
 *
 * With relay.ordering "per_aggregate" (half the schedules): no relay
 * publishes an event while an earlier one of its aggregate is not
 * PUBLISHED, and rows behind a FAILED row of their aggregate stay PENDING.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "log.h"
#include "sim_relay.h"

static char type_255[256], type_256[257];
/* Payloads of a size the limits are drawn around: a large one (above
 * SC_RELAY_LONE_BYTES, and above any drawn bound) and a middling one
 * (pipelined; above only the smallest broker limits). */
#define SIM_LARGE 135000
#define SIM_MIDDLING 3000
static char payload_large[SIM_LARGE + 1], payload_middling[SIM_MIDDLING + 1];
/* Bodies are at most this much larger than their payload. */
#define SIM_ENVELOPE_MAX 1000
_Static_assert(SIM_LARGE > SC_RELAY_LONE_BYTES && SIM_MIDDLING + SIM_ENVELOPE_MAX < SC_RELAY_LONE_BYTES,
               "large payloads go out alone, middling ones pipelined");

static const char *const valid_payloads[] = {
    "{}", "{\"orderId\":1001}", "{\"n\":123456789012345678901234567890,\"x\":1E400}",
    "[1,2,{\"a\":\"x\"}]", "\"text\"", "{\"a\":{\"a\":1},\"b\":[{\"a\":1},{\"a\":2}]}",
    "{\"price\":19.99,\"q\":\"it's \\\"x\\\" \\u00e9\"}", "null",
};
static const char *const dup_payloads[] = {
    "{\"a\":1,\"a\":2}", "{\"x\":[{\"k\":1,\"\\u006b\":2}]}",
};

static void make_id(struct sim_world *w, char *out, size_t len)
{
    uint64_t a = sim_rand(w), b = sim_rand(w);
    snprintf(out, len, "%08x-%04x-4%03x-8%03x-%012llx", (unsigned)(a >> 32), (unsigned)(a >> 16) & 0xffff,
             (unsigned)a & 0xfff, (unsigned)(b >> 52) & 0xfff, (unsigned long long)(b & 0xffffffffffffULL));
}

/* One row: valid, breaking one envelope rule, refused by the broker client
 * (valid by every rule: an error nobody foresaw), or large: above
 * relay.max_message_bytes or the broker's max_message_size when those are
 * drawn below it. */
static void make_row(struct sim_world *w, struct sim_row *x, double p_invalid, double p_poison,
                     double p_large)
{
    memset(x, 0, sizeof *x);
    make_id(w, x->id, sizeof x->id);
    x->atype = sim_chance(w, 0.5) ? "ORDER" : "urn:shop:order";
    x->aid = "1001";
    x->etype = sim_chance(w, 0.1) ? type_255 : sim_chance(w, 0.5) ? "ORDER_ACCEPTED" : "ORDER_SHIPPED";
    x->payload = valid_payloads[sim_range(w, 0, sizeof valid_payloads / sizeof *valid_payloads - 1)];
    x->version = sim_range(w, 1, 3);
    x->owner = x->marked_by = -1;
    if (sim_chance(w, p_invalid)) {
        x->kind = K_INVALID;
        switch (sim_range(w, 0, 6)) {
        case 0: snprintf(x->id, sizeof x->id, "not-a-uuid-%d", (int)sim_range(w, 0, 99999)); break;
        case 1: x->atype = "ORDER X"; break;
        case 2: x->aid = ""; break;
        case 3: x->etype = type_256; break;
        case 4: x->payload = dup_payloads[0]; break;
        case 5: x->payload = dup_payloads[1]; break;
        default: x->payload = "{\"a\":"; break;
        }
    } else if (sim_chance(w, p_poison)) {
        x->kind = K_POISON;
        x->payload = "{\"poison\":true}";
    } else if (sim_size_chance(w, p_large)) {
        x->payload = sim_size_chance(w, 0.3) ? payload_large : payload_middling;
        /* the body is within SIM_ENVELOPE_MAX above the payload, and the
         * bounds are drawn far from either size: the kind is exact */
        size_t len = strlen(x->payload);
        if (len + SIM_ENVELOPE_MAX > (size_t)w->max_message_bytes)
            x->kind = K_TOO_LARGE;
        else if (w->broker_max && len + SIM_ENVELOPE_MAX > (size_t)w->broker_max)
            x->kind = K_BROKER;
    }
}

/* Draws a configuration until the real config check accepts one. */
static int draw_config(struct sim_world *w)
{
    static const int heartbeats[] = {0, 1, 2, 3, 5};
    for (int tries = 0; tries < 1000; tries++) {
        int confirm = (int)sim_range(w, 30, 400);
        int lo = confirm + 1 > 100 ? confirm + 1 : 100, hi = 4 * confirm > lo ? 4 * confirm : lo;
        int lease = (int)sim_range(w, lo, hi), batch = (int)sim_range(w, 1, 8);
        int poll = (int)sim_range(w, 20, 500), hb = heartbeats[sim_range(w, 0, 4)];
        int lock_wait = (int)sim_range(w, 1, 6);
        /* none (the default), or a bound between the middling and the large payloads */
        char max_bytes[64] = "";
        if (!w->no_large && sim_size_chance(w, 0.5))
            snprintf(max_bytes, sizeof max_bytes, ",\"max_message_bytes\":%d",
                     (int)sim_size_range(w, 2 * SIM_MIDDLING + SIM_ENVELOPE_MAX, SIM_LARGE - 10000));
        char text[700], err[512];
        snprintf(text, sizeof text,
                 "{\"amqp\":{\"url\":\"amqp://g:g@sim:5672/%%2f\",\"heartbeat_s\":%d},"
                 "\"mysql\":{\"url\":\"mysql://u:p@sim:3306/app\",\"lock_wait_timeout_s\":%d},"
                 "\"http\":{\"listen\":\"off\"},\"relay\":{\"exchange\":\"sim\",\"batch\":%d,"
                 "\"lease_ms\":%d,\"confirm_timeout_ms\":%d,\"poll_ms\":%d,\"ordering\":\"%s\"%s}}",
                 hb, lock_wait, batch, lease, confirm, poll, w->per_aggregate ? "per_aggregate" : "none",
                 max_bytes);
        struct sc_config c;
        if (sc_config_parse(text, strlen(text), 0, &c, err, sizeof err)) {
            w->st.configs_refused++;
            continue;
        }
        w->batch = c.relay.batch;
        w->lease_ms = c.relay.lease_ms;
        w->confirm_ms = c.relay.confirm_timeout_ms;
        w->poll_ms = c.relay.poll_ms;
        w->heartbeat_ms = c.amqp_heartbeat_s * 1000;
        w->lock_wait_ms = c.mysql_lock_wait_timeout_s * 1000;
        w->max_message_bytes = c.relay.max_message_bytes;
        if (sc_relay_per_aggregate(&c.relay) != w->per_aggregate) {
            sc_config_free(&c);
            return -1;
        }
        sc_config_free(&c);
        return 0;
    }
    return -1;
}

/* Which faults this run has, BUGGIFY-style: each on or off, at its rate. */
static void draw_faults(struct sim_world *w)
{
    struct sim_faults *f = &w->f;
    memset(f, 0, sizeof *f);
#define MAYBE(field, lo, hi) \
    if (sim_chance(w, 0.5)) f->field = (double)sim_range(w, lo, hi) / 1000.0
    MAYBE(db, 20, 250);
    f->db_commit = 0.5;
    MAYBE(db_connect, 100, 500);
    MAYBE(stall, 10, 100);
    MAYBE(amqp_connect, 100, 500);
    MAYBE(drop, 50, 400);
    MAYBE(late, 50, 600);
    MAYBE(nack, 20, 200);
    MAYBE(ret, 20, 200);
    MAYBE(multiple, 300, 900);
#undef MAYBE
    w->f_run = *f;
    w->fault_end = sim_range(w, 0, 15000);
}

static int setup(struct sim_world *w, uint64_t seed, int verbose)
{
    struct sim_stats keep = w->st;
    int no_ordering = w->no_ordering, no_large = w->no_large;
    memset(w, 0, sizeof *w);
    w->st = keep;
    w->seed = w->rng = seed;
    w->rng_order = seed ^ 0x6f7264657265640aULL;
    w->rng_size = seed ^ 0x73697a6573697a65ULL;
    w->verbose = verbose;
    w->no_ordering = no_ordering;
    w->no_large = no_large;
    w->per_aggregate = !no_ordering && sim_rand_order(w) % 2;
    w->st.ordered_schedules += (unsigned)w->per_aggregate;
    if (draw_config(w))
        return -1;
    draw_faults(w);
    double p_poison = sim_chance(w, 0.5) ? 0.06 : 0;
    /* The broker closes the channel because of message i: its
     * max_message_size none, below the large payloads, or below the
     * middling ones too (then the one it refuses went out pipelined). */
    double p_large = !w->no_large && sim_size_chance(w, 0.25) ? 0.08 : 0;
    switch (w->no_large ? 0 : sim_size_range(w, 0, 2)) {
    case 0: w->broker_max = 0; break;
    case 1: w->broker_max = (int)sim_size_range(w, 2 * SIM_MIDDLING + SIM_ENVELOPE_MAX, SIM_LARGE - 10000); break;
    default: w->broker_max = (int)sim_size_range(w, 2 * SIM_ENVELOPE_MAX, SIM_MIDDLING - 500); break;
    }
    w->n_rows = (int)sim_range(w, 1, 40);
    int64_t at[SIM_MAX_ROWS];
    for (int i = 0; i < w->n_rows; i++)
        at[i] = sim_chance(w, 0.7) ? 0 : sim_range(w, 0, w->fault_end + 2000);
    for (int i = 1; i < w->n_rows; i++) /* created_at order is insertion order */
        for (int j = i; j > 0 && at[j - 1] > at[j]; j--) {
            int64_t t = at[j];
            at[j] = at[j - 1];
            at[j - 1] = t;
        }
    for (int i = 0; i < w->n_rows; i++) {
        make_row(w, &w->rows[i], 0.12, p_poison, p_large);
        w->rows[i].insert_at = at[i];
        if (w->per_aggregate) { /* a few aggregates, so that events queue behind each other */
            static const char *const aggs[] = {"1001", "1002", "1003", "1004"};
            if (w->rows[i].aid[0])
                w->rows[i].aid = aggs[sim_rand_order(w) % 4];
        }
        /* Rows there from the start keep their drawn versions, so an
         * aggregate's version order differs from its created_at order (a
         * clock stepped back); a row inserted later has a version no lower
         * than any before it, as one writer's sequence has. */
        if (at[i] > 0)
            for (int j = 0; j < i; j++)
                if (w->rows[j].version > w->rows[i].version)
                    w->rows[i].version = w->rows[j].version;

    }
    w->unresolved = w->n_rows;
    w->n_relays = (int)sim_range(w, 1, SIM_MAX_RELAYS);
    for (int i = 0; i < w->n_relays; i++) {
        struct sim_relay *r = &w->relays[i];
        r->w = w;
        r->idx = i;
        snprintf(r->worker_id, sizeof r->worker_id, "sim-r%d", i);
        struct sc_relay_params p = {
            .worker_id = r->worker_id, .exchange = "sim", .batch = w->batch, .lease_ms = w->lease_ms,
            .confirm_timeout_ms = w->confirm_ms, .poll_ms = w->poll_ms, .heartbeat_ms = w->heartbeat_ms,
            .per_aggregate = w->per_aggregate, .max_message_bytes = w->max_message_bytes,
        };
        sc_relay_metrics_init(&r->m, r->worker_id);
        if (sc_relay_core_init(&r->core, &p, &sim_ops, r, &r->m))
            return -1;
        r->ready_at = sim_range(w, 0, 100);
        r->last_stall = INT64_MIN;
    }
    w->deadline = w->fault_end + 20LL * (w->lease_ms + w->confirm_ms) + 15000;
    sim_trace(w, "seed %llu: %d relays, %d rows, batch %d, lease %d ms, confirm %d ms, poll %d ms, "
              "heartbeat %d ms, lock wait %d ms, max message %d bytes, broker max %d; faults until "
              "%lld ms: db %.3f connect %.3f/%.3f stall %.3f drop %.3f late %.3f nack %.3f return %.3f",
              (unsigned long long)seed, w->n_relays, w->n_rows, w->batch, w->lease_ms, w->confirm_ms,
              w->poll_ms, w->heartbeat_ms, w->lock_wait_ms, w->max_message_bytes, w->broker_max,
              (long long)w->fault_end, w->f.db, w->f.db_connect, w->f.amqp_connect, w->f.stall,
              w->f.drop, w->f.late, w->f.nack, w->f.ret);
    return 0;
}

static const char *const status_names[] = {"PENDING", "PUBLISHING", "PUBLISHED", "FAILED"};
static const char *const kind_names[] = {"valid", "breaks a rule", "refused by the broker client",
                                         "above relay.max_message_bytes", "refused by the broker"};

static void after_step(struct sim_world *w, struct sim_relay *r)
{
    if (r->core.bad_transitions)
        sim_violation(w, "relay %d made a row transition its state machine does not have", r->idx);
    unsigned long long pub = atomic_load(&r->m.published), inv = atomic_load(&r->m.invalid),
                       lost = atomic_load(&r->m.lease_lost);
    if (pub != r->told_published || inv != r->told_failed || lost != r->told_lost)
        sim_violation(w, "relay %d counts published=%llu invalid=%llu lease_lost=%llu, the database "
                      "told it %llu/%llu/%llu", r->idx, pub, inv, lost, r->told_published,
                      r->told_failed, r->told_lost);
}

static void final_checks(struct sim_world *w)
{
    int wrong = 0, first = -1;
    for (int i = 0; i < w->n_rows; i++) {
        const struct sim_row *x = &w->rows[i];
        int held = 0; /* per_aggregate: behind a FAILED row of its aggregate, never claimed */
        for (int j = 0; j < w->n_rows && w->per_aggregate; j++)
            held |= j != i && sim_before(&w->rows[j], x) && w->rows[j].kind != K_VALID &&
                    strcmp(w->rows[j].atype, x->atype) == 0 && strcmp(w->rows[j].aid, x->aid) == 0;
        w->st.held += (unsigned)held;
        if (x->status != (held ? S_PENDING : x->kind == K_VALID ? S_PUBLISHED : S_FAILED)) {
            wrong++;
            first = first < 0 ? i : first;
        }
    }
    if (!wrong)
        return;
    const struct sim_row *x = &w->rows[first];
    sim_violation(w, "faults stopped at %lld ms, and at %lld ms %d of %d rows have not reached their "
                  "end (ordering %s); the first, %s (%s), is %s (lease owner %d, until %lld)",
                  (long long)w->fault_end, (long long)w->now, wrong, w->n_rows,
                  w->per_aggregate ? "per_aggregate" : "none", x->id,
                  kind_names[x->kind],
                  status_names[x->status], x->owner, (long long)x->lease_until);
}

/* Rows per_aggregate ordering never claims: behind a FAILED row of their
 * aggregate (they stay PENDING until someone repairs it). */
static int held_rows(const struct sim_world *w)
{
    int n = 0;
    for (int i = 0; i < w->n_rows && w->per_aggregate; i++) {
        int held = 0;
        for (int j = 0; j < w->n_rows; j++)
            held |= j != i && sim_before(&w->rows[j], &w->rows[i]) && w->rows[j].status == S_FAILED &&
                    strcmp(w->rows[j].atype, w->rows[i].atype) == 0 && strcmp(w->rows[j].aid, w->rows[i].aid) == 0;
        n += held && w->rows[i].status == S_PENDING;
    }
    return n;
}

/* Runs one schedule. Returns 0 when every invariant held. */
static int run(struct sim_world *w, uint64_t seed, int verbose)
{
    if (setup(w, seed, verbose)) {
        snprintf(w->violation, sizeof w->violation, "no configuration accepted (or out of memory)");
        return -1;
    }
    unsigned long long steps = 0;
    for (;;) {
        struct sim_relay *r = NULL;
        for (int i = 0; i < w->n_relays; i++) {
            struct sim_relay *c = &w->relays[i];
            if (!r || c->ready_at < r->ready_at || (c->ready_at == r->ready_at && sim_chance(w, 0.5)))
                r = c;
        }
        w->now = r->ready_at;
        if (!w->quiet && w->now >= w->fault_end) {
            w->quiet = 1;
            memset(&w->f_run, 0, sizeof w->f_run);
            w->f_run.multiple = w->f.multiple;
            sim_trace(w, "faults stop");
        }
        while (w->n_visible < w->n_rows && w->rows[w->n_visible].insert_at <= w->now)
            w->rows[w->n_visible++].visible = 1; /* insertion order is index order */
        if (w->quiet && w->unresolved == held_rows(w))
            break;
        if (w->now > w->deadline || ++steps > 2000000) {
            final_checks(w);
            break;
        }
        r->clock = w->now;
        r->stalled = 0;
        r->pending_stall = 0;
        enum sc_relay_phase ph = r->core.phase;
        int wait = sc_relay_step(&r->core);
        static const char *const phases[] = {"claim", "collect", "mark", "send", "wait"};
        if (ph != SC_RELAY_WAIT || wait == 0)
            sim_trace(w, "r%d %s -> %s, next in %d ms", r->idx, phases[ph], phases[r->core.phase], wait);
        r->ready_at = r->clock + wait + r->pending_stall;
        after_step(w, r);
        if (w->violation[0])
            break;
    }
    if (!w->violation[0])
        final_checks(w);
    w->st.schedules++;
    w->st.steps += steps;
    w->st.rows += (unsigned)w->n_rows;
    for (int i = 0; i < w->n_relays; i++) {
        struct sim_relay *r = &w->relays[i];
        w->st.published += atomic_load(&r->m.published);
        w->st.failed += atomic_load(&r->m.invalid);
        w->st.lease_lost += atomic_load(&r->m.lease_lost);
        w->st.nacked += atomic_load(&r->m.nacked);
        w->st.returned += atomic_load(&r->m.returned);
        w->st.unconfirmed += atomic_load(&r->m.unconfirmed);
        sc_relay_core_free(&r->core);
    }
    sim_world_release(w);
    return w->violation[0] ? -1 : 0;
}

static int n_tap;

static void tap(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tap(int cond, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%sok %d - ", cond ? "" : "not ", ++n_tap);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
}

int main(int argc, char **argv)
{
    /* Under AddressSanitizer a schedule costs about 5 times as much: the
     * sanitizer pass runs a fifth of them. SC_SIM_SCHEDULES overrides. */
#if defined(__SANITIZE_ADDRESS__)
    unsigned long long first = 1, count = 20000;
#else
    unsigned long long first = 1, count = 100000;
#endif
    if (getenv("SC_SIM_SCHEDULES"))
        count = strtoull(getenv("SC_SIM_SCHEDULES"), NULL, 10);
    int verbose = 0, single = 0, no_ordering = 0, no_large = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            first = strtoull(argv[++i], NULL, 10);
            count = 1;
            single = 1;
        } else if (strcmp(argv[i], "--first") == 0 && i + 1 < argc) {
            first = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--schedules") == 0 && i + 1 < argc) {
            count = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--verbose") == 0) {
            verbose = 1;
        } else if (strcmp(argv[i], "--no-ordering") == 0) {
            no_ordering = 1;
        } else if (strcmp(argv[i], "--no-large") == 0) {
            no_large = 1;
        } else {
            fprintf(stderr, "usage: %s [--seed N [--verbose]] [--first N] [--schedules K] [--no-ordering] "
                    "[--no-large]\n", argv[0]);
            return 2;
        }
    }
    memset(type_255, 'T', 255);
    memset(type_256, 'T', 256);
    /* {"blob":"xxx…"}: valid JSON of exactly the length named */
    char *const payloads[] = {payload_large, payload_middling};
    const size_t lens[] = {SIM_LARGE, SIM_MIDDLING};
    for (int k = 0; k < 2; k++) {
        memset(payloads[k], 'x', lens[k]);
        memcpy(payloads[k], "{\"blob\":\"", 9);
        memcpy(payloads[k] + lens[k] - 2, "\"}", 2);
        payloads[k][lens[k]] = 0;
    }
    sc_log_min_level = verbose ? SC_LOG_DEBUG : SC_LOG_ERROR + 1;
    static struct sim_world w;
    w.no_ordering = no_ordering;
    w.no_large = no_large;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int failures = 0;
    for (unsigned long long s = first; s < first + count && failures < 5; s++) {
        if (run(&w, s, verbose) == 0)
            continue;
        failures++;
        tap(0, "seed %llu: %s", s, w.violation);
        printf("# replay: %s --seed %llu --verbose\n", argv[0], s);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    const struct sim_stats *st = &w.st;
    if (!failures)
        tap(1, "%llu schedules (seeds %llu..%llu): every invariant held after every step", st->schedules,
            first, first + count - 1);
    printf("# %.1f s, %.0f schedules/s, %llu steps, %llu rows: %llu published, %llu failed; "
           "%llu configurations refused by the config check\n", secs, (double)st->schedules / secs,
           st->steps, st->rows, st->published, st->failed, st->configs_refused);
    printf("# faults: %llu database errors (%llu commits of unknown outcome that did commit), %llu lock "
           "waits, %llu connection drops, %llu refused publishes, %llu late confirms, %llu multiple acks; "
           "seen: %llu lease_lost, %llu nacked, %llu returned, %llu unconfirmed, %llu expired leases "
           "reclaimed\n", st->db_faults, st->unknown_commits, st->stalls, st->drops, st->refused, st->late,
           st->multiple, st->lease_lost, st->nacked, st->returned, st->unconfirmed, st->reclaimed);
    if (!single && count >= 1000) {
        /* A simulation that stopped exercising a fault proves nothing about it. */
        tap(st->lease_lost > 0 && st->reclaimed > 0, "leases were lost and reclaimed");
        tap(st->unknown_commits > 0 && st->db_faults > 0, "statements failed, commits of unknown outcome");
        tap(st->nacked > 0 && st->returned > 0 && st->unconfirmed > 0 && st->late > 0 && st->multiple > 0,
            "confirms nacked, returned, late, missing and multiple");
        tap(st->drops > 0 && st->stalls > 0, "connections dropped, statements waited for locks");
        tap(st->refused > 0 && st->failed > 0, "rows refused by the broker client and rows marked FAILED");
        if (!no_large)
            tap(st->broker_refusals > 0 && st->in_doubt > 0 && st->reopens > 0 && st->too_large > 0,
                "the broker closed the channel because of a message %llu times (%llu with others in "
                "doubt), channels opened again %llu times; %llu rows above relay.max_message_bytes "
                "FAILED unsent", st->broker_refusals, st->in_doubt, st->reopens, st->too_large);
        if (!no_ordering)
            tap(st->ordered_schedules > 0 && st->ordered_publishes > 0 && st->held > 0,
                "per_aggregate ordering: %llu schedules, %llu publishes checked against their "
                "aggregate's order, %llu rows held behind a FAILED row", st->ordered_schedules,
                st->ordered_publishes, st->held);
    }
    printf("1..%d\n", n_tap);
    return failures ? 1 : 0;
}
