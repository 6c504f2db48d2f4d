/* The loop of an ordered consumer with tenants: ordered.c's in-hand set,
 * each delivery's tenant read as it arrives, each batch the ready slots of
 * one tenant run in that tenant's database (its held keys there too), a
 * down tenant's slots blocked in hand and sent round past the bounds
 * (order_tenants.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "consume/held.h"
#include "consume/order_tenants.h"
#include "consume/republish.h"
#include "consume/tenant_batch.h"
#include "consume/tenant_key.h"
#include "consume/tenant_pool.h"
#include "consume/worker.h"
#include "envelope/sidecar_headers.h"
#include "io/db_copies.h"
#include "lifecycle.h"
#include "log.h"

#define RECEIVE_POLL_MS 200
/* The most rows of one tenant's queue read back at a time. */
#define COPIES_LOAD_MAX 100000
/* A failed statement on mysql.url's database: not tried again before. */
#define COPIES_RETRY_MS 1000

static void drop_envelope(amqp_envelope_t *env)
{
    amqp_destroy_envelope(env);
}

static int tenant_down(void *ctx, const char *tenant)
{
    struct worker *w = ctx;
    int i = sc_tenant_session_of(w, tenant);
    return i >= 0 && sc_tenant_down(w, i, sc_now_ms());
}

/* The ring of slot s's tenant and queue, or NULL (out of memory). */
static struct sc_order_ring *ring_of(struct worker *w, const struct sc_order_slot *s)
{
    int i = sc_tenant_session_of(w, s->tenant);
    if (i < 0)
        return NULL;
    struct sc_tenant_session *t = &w->tenant->sessions[i];
    int cap = sc_worker_queues(w);
    if (!t->rings && !(t->rings = calloc((size_t)cap, sizeof *t->rings)))
        return NULL;
    struct sc_order_ring *r = sc_order_ring_of(t->rings, &t->n_rings, cap, s->env.consumer_tag);
    if (r && !r->queue[0]) {
        if (sc_worker_queue_of_tag(w, s->env.consumer_tag, r->queue, sizeof r->queue))
            snprintf(r->queue, sizeof r->queue, "%s", w->c->k->queue);
        snprintf(r->mark, sizeof r->mark, "%s", w->tenant->return_mark);
    }
    return r;
}

/* How long rank next may stay away before it is given up: 20 rounds of the
 * delay queue, a minute at least. */
static int64_t lost_ms(const struct sc_consumer_config *k)
{
    int64_t d = 20 * (int64_t)k->retry_delays_ms[0];
    return d > 60000 ? d : 60000;
}

/* A statement on the copies' rows failed: logged once until one works
 * again, the session closed, tried again after COPIES_RETRY_MS. Meanwhile
 * the rings are this process's memory only. */
static void copies_failed(struct worker *w, const char *what, const struct sc_db_err *e)
{
    struct sc_tenant_worker *t = w->tenant;
    struct sc_log_fields lf = {.consumer = w->c->k->name};
    if (!t->copies_warned)
        sc_log(SC_LOG_WARN, &lf, "%s the copies gone round in mysql.url's database failed (error "
               "%u: %s)%s; until it works, a restart while copies are out may run a tenant's "
               "later events first", what, e->code, e->msg,
               e->code == 1146 ? ": apply sql/schema/015_consumer_tenant_copy.sql" : "");
    t->copies_warned = 1;
    sc_db_close(&t->copies_db);
    t->copies_retry_ms = sc_now_ms() + COPIES_RETRY_MS;
}

static struct sc_db *copies_db(struct worker *w)
{
    struct sc_tenant_worker *t = w->tenant;
    if (t->copies_db.conn)
        return &t->copies_db;
    if (sc_now_ms() < t->copies_retry_ms)
        return NULL;
    struct sc_db_err e = {0};
    size_t rotation = sc_db_rotation();
    int rc = sc_db_connect(&t->copies_db, w->c->cfg, &e);
    sc_db_set_rotation(rotation);
    if (rc) {
        copies_failed(w, "connecting to", &e);
        return NULL;
    }
    return &t->copies_db;
}

static void copies_worked(struct worker *w)
{
    struct sc_tenant_worker *t = w->tenant;
    if (t->copies_warned) {
        struct sc_log_fields lf = {.consumer = w->c->k->name};
        sc_log(SC_LOG_INFO, &lf, "the copies gone round are written in mysql.url's database again");
    }
    t->copies_warned = 0;
}

/* The row of a copy about to go round, before it is published; move: an
 * existing row of its event takes this rank. */
static void copies_put(struct worker *w, const char *tenant, const struct sc_order_ring *r,
                       const char *id, int64_t rank, int move)
{
    struct sc_db *db = copies_db(w);
    struct sc_db_err e = {0};
    if (!db)
        return;
    if (sc_db_copy_put(db, w->c->k->name, r->queue, tenant, id, rank, r->mark, move, &e))
        copies_failed(w, "writing", &e);
    else
        copies_worked(w);
}

/* 1 when a slot before i in hand is the same event as slot i (a repeat):
 * the event's row keeps the first one's rank. */
static int earlier_in_hand(const struct sc_order *o, int i)
{
    for (int j = 0; j < i; j++)
        if (strcmp(o->slots[j].id, o->slots[i].id) == 0 &&
            strcmp(o->slots[j].tenant, o->slots[i].tenant) == 0)
            return 1;
    return 0;
}

/* The rows of ring r's deliveries in hand (but not, the delivery being
 * classified), ranked from first on in the order they are in hand. */
static void copies_put_hand(struct worker *w, struct sc_order *o, struct sc_order_ring *r,
                            const struct sc_order_slot *not, int64_t first)
{
    for (int i = 0; i < o->n; i++) {
        struct sc_order_slot *h = &o->slots[i];
        if (h == not || !h->tenant[0] || ring_of(w, h) != r)
            continue;
        copies_put(w, h->tenant, r, h->id, first++, !earlier_in_hand(o, i));
        h->copy = 1;
    }
}

/* A copy of ring r goes round: the ring's deliveries in hand come before it,
 * and a crash would return them to the queue, so they get rows too, ranked
 * below next, once one of them has none. */
static void copies_hand(struct worker *w, struct sc_order *o, struct sc_order_ring *r,
                        const struct sc_order_slot *not)
{
    int k = 0, rowless = 0;
    for (int i = 0; i < o->n; i++) {
        const struct sc_order_slot *h = &o->slots[i];
        if (h != not && h->tenant[0] && ring_of(w, h) == r) {
            k++;
            rowless |= !h->copy;
        }
    }
    if (rowless)
        copies_put_hand(w, o, r, not, r->next - k);
}

/* Reads ring r's rows back once per consumed queue, before the tenant's
 * first delivery from it is taken or sent round. */
static void copies_load(struct worker *w, const char *tenant, struct sc_order_ring *r)
{
    int64_t now = sc_now_ms();
    if (r->loaded || now < r->load_after_ms)
        return;
    struct sc_db *db = copies_db(w);
    struct sc_db_err e = {0};
    struct sc_copy_row *rows = NULL;
    int n = 0;
    if (!db || sc_db_copy_load(db, w->c->k->name, r->queue, tenant, COPIES_LOAD_MAX, &rows, &n,
                               &e)) {
        if (db)
            copies_failed(w, "reading back", &e);
        r->load_after_ms = now + COPIES_RETRY_MS;
        return;
    }
    /* Numbered anew under a mark of this process's: the copies' headers
     * may carry ranks another process gave, or this one before the queue
     * was consumed again. Written back in one transaction, then taken. */
    char mark[sizeof r->mark];
    snprintf(mark, sizeof mark, "%s.%u", w->tenant->return_mark, ++w->tenant->copies_loads);
    sc_order_rows_renumber(rows, n, mark);
    if (n && sc_db_copy_renumber(db, w->c->k->name, r->queue, tenant, rows, n, &e)) {
        free(rows);
        copies_failed(w, "numbering anew", &e);
        r->load_after_ms = now + COPIES_RETRY_MS;
        return;
    }
    copies_worked(w);
    if (sc_order_ring_adopt(r, rows, n, mark, now) == 0) {
        r->loaded = 1;
        if (n) {
            struct sc_log_fields lf = {.consumer = w->c->k->name};
            sc_log(SC_LOG_INFO, &lf, "tenant %s: %d copies out of %s read back; "
                   "they are taken in their order, the tenant's new deliveries behind them",
                   tenant, n, r->queue);
        }
    }
    free(rows);
}

/* The rows of the copies resolved in the batch (applied, dead-lettered, a
 * duplicate: not kept in hand), before their acks go. A row left behind
 * (this database down) only matters to a process that reads it back: it
 * gives the rank up after lost_ms. */
static void copies_resolved(struct worker *w, struct sc_order *o, const int *idx, int n)
{
    const char *ids[SC_BATCH_LIMIT];
    struct sc_order_ring *r = NULL;
    const char *tenant = NULL;
    int m = 0;
    for (int j = 0; j <= n; j++) {
        struct sc_order_slot *s = j < n ? &o->slots[idx[j]] : NULL;
        struct sc_order_ring *sr = s && s->copy && !w->dls[j].kept ? ring_of(w, s) : NULL;
        if (s && !sr)
            continue;
        if (m && (!s || sr != r || m == SC_BATCH_LIMIT)) {
            struct sc_db *db = copies_db(w);
            struct sc_db_err e = {0};
            if (db && sc_db_copy_delete(db, w->c->k->name, r->queue, tenant, ids, m, &e))
                copies_failed(w, "deleting resolved", &e);
            m = 0;
        }
        if (!s)
            break;
        r = sr;
        tenant = s->tenant;
        ids[m++] = s->id;
        s->copy = 0;
    }
}

/* Sends slot s round through the delay queue with its rank, its attempts
 * as they are, and acks it once the copy is confirmed. Returns 0, or -1
 * (reset: the broker returns it). */
static int go_round(struct worker *w, struct sc_order *o, struct sc_order_slot *s,
                    struct sc_order_ring *r, int64_t rank, int write, const char *why)
{
    const struct sc_consumer_config *k = w->c->k;
    struct sc_log_fields lf = {.consumer = k->name, .delivery_tag = s->env.delivery_tag,
                               .event_id = s->id[0] ? s->id : NULL};
    int64_t attempt = sc_amqp_header_int(sc_delivery_headers(&s->env), SC_H_ATTEMPTS, 1);
    if (attempt < 1 || attempt > 1000000)
        attempt = 1;
    int delay = k->retry_delays_ms[0];
    char mark[128];
    if (write) {
        copies_hand(w, o, r, s);
        copies_put(w, s->tenant, r, s->id, rank, 0);
    }
    snprintf(mark, sizeof mark, "%s:%lld", r->mark, (long long)rank);
    if (sc_republish_round(&w->out, k, &s->env, (int)attempt - 1 + s->in_place, delay, why,
                           SC_H_TENANT_RETURN, mark, &lf) ||
        sc_amqp_ack(&w->in, s->env.delivery_tag, 0))
        return -1;
    atomic_fetch_add(&w->c->m.tenant_returned, 1);
    sc_log(SC_LOG_DEBUG, &lf, "tenant %s: %s; sent round through the %d ms delay queue, its "
           "turn kept", s->tenant, why, delay);
    return 0;
}

/* Every slot of slot at's tenant goes round, oldest first, ranked before
 * what is out of its queue. */
static int tenant_round(struct worker *w, struct sc_order *o, int at, int64_t now)
{
    char tenant[SC_TENANT_MAX + 1];
    snprintf(tenant, sizeof tenant, "%s", o->slots[at].tenant);
    int expired = now - o->slots[at].blocked_since_ms >= w->c->k->db_outage_hold_ms;
    const char *why = expired ? "its database could not be used for db_outage_hold_ms"
                              : "its database cannot be used and its deliveries in hand fill "
                                "half the prefetch";
    struct sc_log_fields lf = {.consumer = w->c->k->name};
    int sent = 0;
    for (int i = 0; i < o->n; i++) {
        const struct sc_order_slot *s = &o->slots[i];
        if (strcmp(s->tenant, tenant) != 0)
            continue;
        /* Its queue's slots of the tenant, ranked in the order they are in
         * hand: the first of them found here. */
        struct sc_order_ring *r = ring_of(w, s);
        if (!r)
            return -1;
        int k = 0;
        for (int j = i; j < o->n; j++)
            k += strcmp(o->slots[j].tenant, tenant) == 0 && ring_of(w, &o->slots[j]) == r;
        int64_t rank = sc_order_ring_back(r, k);
        r->next_since_ms = now;
        /* every row first: a crash between two publishes returns the rest,
         * which must keep their place */
        copies_put_hand(w, o, r, NULL, rank);
        for (int j = i; j < o->n;) {
            struct sc_order_slot *c = &o->slots[j];
            if (strcmp(c->tenant, tenant) != 0 || ring_of(w, c) != r) {
                j++;
                continue;
            }
            if (go_round(w, o, c, r, rank++, 0, why))
                return -1;
            amqp_destroy_envelope(&c->env);
            sc_order_remove(o, j);
            sent++;
        }
        i--; /* slot i went: the next one is in its place */
    }
    sc_log(SC_LOG_INFO, &lf, "tenant %s: %s; its %d deliveries in hand sent round through the "
           "%d ms delay queue, their turns kept", tenant, why, sent, w->c->k->retry_delays_ms[0]);
    return 0;
}

/* The rank of ring mark's copy env is ("<mark>:<rank>"), or -1. */
static int64_t copy_rank(const char *mark, const amqp_envelope_t *env)
{
    amqp_bytes_t m = sc_amqp_header_bytes(sc_delivery_headers(env), SC_H_TENANT_RETURN);
    size_t n = strlen(mark);
    if (m.len <= n + 1 || m.len > n + 19 || memcmp(m.bytes, mark, n) != 0 ||
        ((const char *)m.bytes)[n] != ':')
        return -1;
    int64_t v = 0;
    for (size_t j = n + 1; j < m.len; j++) {
        char c = ((const char *)m.bytes)[j];
        if (c < '0' || c > '9')
            return -1;
        v = v * 10 + (c - '0');
    }
    return v;
}

struct gather_room {
    struct sc_order *o;
    int block_cap;
};

/* Reads fresh slot s's tenant (s already classified). Returns 1 when it
 * went round at once (not its turn), 0 when it stays, -1 (reset). */
static int classify(struct worker *w, struct sc_order *o, struct sc_order_slot *s, int room)
{
    const struct sc_consumer_config *k = w->c->k;
    char name[SC_TENANT_MAX + 1], why[256];
    enum sc_tenant_kind kind = sc_tenant_read(&w->c->cfg->tenants, &w->tenant->names, k,
                                              &s->env, name, why, sizeof why);
    int i = kind == SC_TENANT_FOUND ? sc_tenant_session_of(w, name) : -1;
    if (kind == SC_TENANT_FOUND && i < 0)
        snprintf(why, sizeof why, "out of memory for tenant %s", name);
    if (kind != SC_TENANT_REFUSED && (i < 0 || s->kind != SC_ORDER_KEYED))
        snprintf(s->named, sizeof s->named, "%s", name); /* its dead letter's ("" unless read) */
    if (i < 0) {
        if (kind != SC_TENANT_OPEN) { /* dead-lettered unrun with the reason, no database */
            s->kind = SC_ORDER_UNKEYED;
            snprintf(s->why, sizeof s->why, "%s", why);
            s->hash = 0;
        }
        return 0;
    }
    if (s->kind != SC_ORDER_KEYED)
        return 0; /* dead-lettered unrun, ordered with nothing: no database needed */
    sc_order_set_tenant(s, name);
    struct sc_order_ring *r = ring_of(w, s);
    if (!r)
        return -1;
    copies_load(w, name, r);
    /* A down tenant takes room in hand up to the bound, the rest goes round. */
    int64_t now = sc_now_ms();
    int down = sc_tenant_down(w, i, now);
    int64_t rank = copy_rank(r->mark, &s->env);
    int copy = rank >= 0 || sc_order_ring_recovered(r, s->id, &rank);
    int64_t gone = down ? -1 : sc_order_ring_lost(r, now, lost_ms(k));
    if (gone >= 0) {
        struct sc_log_fields lf = {.consumer = k->name};
        sc_log(SC_LOG_WARN, &lf, "tenant %s: the copy ranked %lld in %s has not come back for "
               "%lld ms; going on without it (its event may run after later ones of its key)",
               name, (long long)gone, r->queue, (long long)lost_ms(k));
        struct sc_db *db = copies_db(w);
        struct sc_db_err e = {0};
        if (db && sc_db_copy_delete_rank(db, k->name, r->queue, name, gone, &e))
            copies_failed(w, "deleting a lost copy from", &e);
    }
    int64_t next = r->next, nothing_out = r->next > r->max;
    int taken = !sc_order_ring_arrive(r, &rank, !down || room);
    if (r->next != next || (nothing_out && r->next <= r->max))
        r->next_since_ms = now;
    if (taken) {
        s->copy = copy;
        return 0;
    }
    return go_round(w, o, s, r, rank, !copy,
                    "not its turn: its tenant's earlier deliveries went round") ? -1 : 1;
}

/* sc_order_gather's take: the delivery's tenant read, with room in hand
 * for a down tenant's while fewer than *block_cap wait. */
static int take(struct worker *w, struct sc_order_slot *s, void *arg)
{
    const struct gather_room *g = arg;
    return classify(w, g->o, s, sc_order_blocked(g->o) < g->block_cap);
}

/* Runs the picked slots idx[0..n) of one tenant (or none) as one batch in
 * its database. Returns the loop's next step; a batch its database could
 * not take stays in hand, its tenant down. */
static enum next run_tenant(struct worker *w, struct sc_order *o, int *idx, int *n_io)
{
    const struct sc_consumer_config *k = w->c->k;
    struct sc_log_fields lf = {.consumer = k->name};
    int n = *n_io;
    const char *tenant = o->slots[idx[0]].tenant;
    sc_order_batch(o, idx, n, w->dls);
    if (!tenant[0]) {
        /* Refused, malformed or too large: dead-lettered, no database. */
        memset(&w->db, 0, sizeof w->db);
        w->db_urls = NULL;
        return sc_batch_process(w, w->dls, n);
    }
    int i = sc_tenant_session_of(w, tenant);
    struct sc_db_err e = {0};
    int opened = i < 0 ? -1 : sc_tenant_enter(w, i, &e);
    enum next next = NEXT_DB_HOLD;
    if (opened >= 0) {
        if (sc_held_mode(k) && sc_held_check(w, w->dls, n, &e)) {
            sc_log(SC_LOG_WARN, &lf, "tenant %s: reading the held keys failed (error %u: %s)",
                   tenant, e.code, e.msg);
            w->hold_cause = e;
        } else if (sc_held_mode(k) && (n = sc_held_wait(k, o, idx, w->dls, n, sc_now_ms())) == 0) {
            next = NEXT_CONTINUE; /* all of them wait in hand for their keys' replays */
        } else {
            next = sc_tenant_batch(w, w->dls, n, opened);
            if (next != NEXT_DB_HOLD)
                sc_order_check_versions(w, o, idx, n);
        }
        sc_tenant_batch_leave(w, i, next);
        if (next != NEXT_DB_HOLD)
            copies_resolved(w, o, idx, n);
    }
    *n_io = n;
    if (next == NEXT_DB_HOLD)
        for (int j = 0; j < n; j++) {
            /* Nothing of it is settled: in hand, not an attempt. */
            w->dls[j].kept = 1;
            w->dls[j].spent = 0;
            w->dls[j].again_ms = 0;
        }
    return next == NEXT_RESET ? NEXT_RESET : NEXT_CONTINUE;
}

long sc_consume_ordered_tenants(struct worker *w)
{
    const struct sc_consumer_config *k = w->c->k;
    struct sc_log_fields lf = {.consumer = k->name};
    struct sc_order o;
    int *idx = malloc((size_t)k->batch_max * sizeof *idx);
    if (!idx || sc_order_init(&o, k->prefetch * sc_worker_queues(w))) {
        free(idx);
        sc_log(SC_LOG_ERROR, &lf, "out of memory");
        return 0;
    }
    o.queue_cap = k->prefetch;
    if (!w->tenant->return_mark[0])
        snprintf(w->tenant->return_mark, sizeof w->tenant->return_mark, "%ld-%d-%lld",
                 (long)getpid(), w->index, (long long)sc_now_us());
    /* Another process may have consumed the queues since: every ring reads
     * its rows back before its tenant's next delivery. */
    for (int i = 0; i < w->tenant->n_sessions; i++)
        for (int j = 0; j < w->tenant->sessions[i].n_rings; j++)
            w->tenant->sessions[i].rings[j].loaded = 0;
    /* Blocked slots take room in the prefetch: half of it at most, the
     * other tenants have the rest. */
    int block_cap = k->prefetch / 2;
    long handled = 0;
    int64_t last_service_ms = sc_now_ms(), next_due = INT64_MAX;
    while (!sc_stop_requested()) {
        int64_t now = sc_now_ms();
        if (sc_worker_service_publisher(w, &last_service_ms))
            break;
        sc_tenant_sweep(w, now);
        sc_tenant_gauges(w, 0, &o);
        sc_order_block(&o, tenant_down, w, now);
        int n = sc_order_pick(&o, now, k->batch_max, idx, &next_due);
        int64_t retry = sc_tenant_next_retry_ms(w);
        if (retry < next_due)
            next_due = retry;
        int64_t wait = n ? 0 : next_due == INT64_MAX ? RECEIVE_POLL_MS : next_due - now;
        if (wait > RECEIVE_POLL_MS)
            wait = RECEIVE_POLL_MS;
        if (wait < 0)
            wait = 0;
        if (sc_order_gather(w, &o, (int)wait, take, &(struct gather_room){&o, block_cap}))
            break;
        now = sc_now_ms();
        sc_order_block(&o, tenant_down, w, now);
        int at, failed = 0;
        while (!failed && (at = sc_order_return_due(&o, now, k->db_outage_hold_ms, block_cap)) >= 0)
            failed = tenant_round(w, &o, at, now);
        if (failed)
            break;
        n = sc_order_one_tenant(&o, idx, sc_order_pick(&o, now, k->batch_max, idx, &next_due));
        if (n == 0) {
            if (sc_worker_check_queues(w, 0))
                break;
            continue;
        }
        sc_worker_keep_alive(w);
        enum next next = run_tenant(w, &o, idx, &n);
        sc_batch_release(w);
        handled += n;
        if (sc_tenant_ack_flush(w)) {
            sc_log(SC_LOG_WARN, &lf, "acks could not be sent; the broker will redeliver");
            next = NEXT_RESET;
        }
        if (next == NEXT_RESET)
            break; /* closing the channel returns everything in hand */
        sc_order_after(&o, idx, w->dls, n, sc_now_ms(), drop_envelope);
    }
    memset(&w->db, 0, sizeof w->db); /* every session is the pool's */
    (void)sc_tenant_ack_flush(w);
    for (int i = 0; i < o.n; i++)
        amqp_destroy_envelope(&o.slots[i].env);
    o.n = 0; /* what was in hand the broker returns with the channel */
    sc_tenant_gauges(w, 0, &o);
    sc_order_free(&o);
    free(idx);
    if (sc_stop_requested())
        sc_tenant_worker_free(w);
    return handled;
}
