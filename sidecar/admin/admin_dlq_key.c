/* `sidecar dlq replay CONSUMER --key K` and `sidecar dlq release CONSUMER
 * --key K`. The database says which events of a held key are held and in
 * which order (consumer_held_event); the DLQ only carries their bodies. A
 * replay reads the DLQ first, then, with the key's row locked, the held
 * events; it stamps a new replay token on the key and publishes one copy of
 * each, in order, with that token.
 * The consumer runs the current token's copy of the key's first held event
 * and holds anything else (an older replay's copy, an event arriving
 * meanwhile: it waits in hand while the replay goes on), so a replay cut
 * short, superseded or run twice never lets an event overtake another.
 * Without a copy of every held event it replays the ones before the first
 * missing one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uuid/uuid.h>

#include "admin/admin.h"
#include "admin/dlq_browse.h"
#include "consume/order.h"
#include "envelope/sidecar_headers.h"
#include "fault.h"
#include "io/amqp_conn.h"
#include "io/db_held.h"

/* One dead letter of the key, in the order a key's replay follows. */
struct keyed {
    struct dead *d;
    int64_t seq;  /* x-sidecar-hold-seq, 0 when absent */
    int pos;      /* its place in the DLQ */
    char id[37];
};

static int by_hold_seq(const void *x, const void *y)
{
    const struct keyed *a = x, *b = y;
    if (a->seq != b->seq)
        return a->seq < b->seq ? -1 : 1;
    return a->pos - b->pos;
}

static int holds_keys(const struct sc_consumer_config *k)
{
    return k->ordering.present && k->ordering.on_dead_letter &&
           strcmp(k->ordering.on_dead_letter, "hold") == 0;
}

/* The key's dead letters among ds[0..n), sorted. Returns how many. */
static int pick(const struct sc_consumer_config *k, const char *key, const char *tenant,
                struct dead *ds, int n, struct keyed *ks)
{
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (tenant) {
            /* A tenant's key is its own: another's same key is not it. */
            amqp_bytes_t t = sc_amqp_header_bytes(sc_dlq_headers(&ds[i].msg.properties),
                                                  SC_H_TENANT);
            if (t.len != strlen(tenant) || memcmp(t.bytes, tenant, t.len) != 0)
                continue;
        }
        amqp_envelope_t env;
        memset(&env, 0, sizeof env);
        env.message = ds[i].msg;
        char kk[SC_ORDER_KEY_MAX + 1], why[256];
        if (sc_order_key_id(k, &env, kk, sizeof kk, ks[m].id, why, sizeof why) != SC_ORDER_KEYED ||
            strcmp(kk, key) != 0)
            continue;
        ks[m].d = &ds[i];
        ks[m].pos = i;
        ks[m].seq = sc_amqp_header_int(sc_dlq_headers(&ds[i].msg.properties), SC_H_HOLD_SEQ, 0);
        m++;
    }
    qsort(ks, (size_t)m, sizeof *ks, by_hold_seq);
    return m;
}

static struct keyed *find(struct keyed *ks, int m, const char *id)
{
    for (int i = 0; i < m; i++)
        if (strcmp(ks[i].id, id) == 0)
            return &ks[i];
    return NULL;
}

/* What one replay publishes, in order; each with the other DLQ copies of
 * its event, acked off the DLQ with it. */
struct plan {
    struct keyed **copy;
    int n;
};

/* The held events evs[0..ne) matched to their DLQ copies, up to the first
 * that has none: replaying that run keeps order (the key stays held behind
 * the first missing one). Returns the index of the first missing, ne when
 * every one has a copy. */
static int match(struct keyed *ks, int m, const struct sc_held_event *evs, int ne,
                 struct plan *p)
{
    for (int i = 0; i < ne; i++) {
        struct keyed *c = find(ks, m, evs[i].event_id);
        if (!c)
            return i;
        p->copy[p->n++] = c;
    }
    return ne;
}

/* Acks off the DLQ every other copy of c's event (duplicates the consumer
 * would only recognise again). */
static void ack_twins(struct sc_amqp *a, struct keyed *ks, int m, const struct keyed *c)
{
    char err[256];
    for (int i = 0; i < m; i++)
        if (&ks[i] != c && ks[i].d->tag && strcmp(ks[i].id, c->id) == 0 &&
            sc_dlq_ack_confirmed(a, ks[i].d->tag, err, sizeof err) == 0)
            ks[i].d->tag = 0;
}

/* Republishes p's copies in order, each acked off the DLQ once confirmed.
 * token: the replay's (NULL for a key that is not held). Returns the exit
 * status. */
static int publish_all(struct sc_amqp *a, const struct sc_consumer_config *k, const char *key,
                       const struct plan *p, struct keyed *ks, int m, const char *token,
                       int frees)
{
    char ex[300] = "", q[300], err[512];
    if (k->ordering.partitions > 1)
        sc_amqp_ordering_exchange_name(k, ex, sizeof ex);
    snprintf(q, sizeof q, "%s", k->ordering.partitions > 1 ? "" : k->queue);
    int replayed = 0, rc = 0;
    for (int i = 0; i < p->n; i++) {
        struct keyed *c = p->copy[i];
        enum sc_publish_result res;
        err[0] = 0;
        int ok = sc_dlq_publish_copy(a, c->d, ex[0] ? ex : NULL, q, 2, key, token, &res, err,
                                     sizeof err);
        if (ok != 1) {
            fprintf(stderr, "sidecar dlq: %s not replayed (%s%s%s): it and the %d after it stay in "
                    "%s; the key stays held: run this again\n", c->d->event_id,
                    sc_publish_result_name(res), err[0] ? ": " : "", err, p->n - i - 1,
                    k->dead_letter_queue);
            rc = 1;
            break;
        }
        if (sc_dlq_ack_confirmed(a, c->d->tag, err, sizeof err) == 0)
            c->d->tag = 0;
        else
            printf("replayed %s, but its DLQ copy may remain (%s): the consumer takes a second "
                   "copy for a duplicate\n", c->d->event_id, err);
        ack_twins(a, ks, m, c);
        replayed++;
        printf("replayed %s (key '%s', %d of %d) to %s '%s'\n", c->d->event_id, key, i + 1, p->n,
               ex[0] ? "exchange" : "queue", ex[0] ? ex : k->queue);
    }
    printf("replayed %d of %d %s of key '%s' in arrival order%s\n", replayed, p->n,
           token ? "held event(s)" : "dead letter(s)", key,
           frees && replayed == p->n ? "; the key is released once the last one is applied" : "");
    return rc;
}

/* Why a replay stops short of the key's held events: the first one the DLQ
 * showed no copy of. */
static void say_short(const struct sc_consumer_config *k, const char *key, int ne, int done,
                      const char *first, int64_t seq, int truncated)
{
    fprintf(stderr, "sidecar dlq: key '%s' holds %d event(s); the DLQ showed no copy of %s (number "
            "%lld), the %s of them%s: held unacked by another client (another `sidecar dlq` "
            "command?), %s, or on its way to %s. %s; the key stays held behind it. Run this again; "
            "if it is gone for good: sidecar dlq release %s --key %s\n", key, ne, first,
            (long long)seq, done ? "next" : "first", done ? " after the ones replayed" : "",
            truncated ? "past the first 100000 messages read (replay or release the keys "
                        "ahead of it first)" : "gone from the DLQ",
            k->dead_letter_queue, done ? "Only the ones before it are replayed" : "Nothing replayed",
            k->name, key);
}

/* What a replay has read of the DLQ: ds[0..n), the key's among them
 * ks[0..m) in order. */
struct view {
    struct sc_amqp *a;
    const struct sc_consumer_config *k;
    const char *key;
    const char *tenant;
    struct dead *ds;
    int n, held, truncated;
    struct keyed *ks;
    int m;
};

/* Reads on from where the view stopped (what reached the DLQ since).
 * Returns how many more, or -1 with the reason printed. */
static int read_on(struct view *v)
{
    char err[512];
    int held = 0;
    if (v->n >= DLQ_KEY_MAX)
        return 0;
    /* Other keys' messages read often on a quorum DLQ are put back fresh,
     * as every dlq command does; the key's own are about to be replayed. */
    int got = sc_dlq_browse(v->a, v->k, v->ds + v->n, DLQ_KEY_MAX - v->n,
                            strcmp(v->k->queue_type, "quorum") == 0, NULL, 0, 1, NULL, v->key,
                            &held, err, sizeof err);
    if (got < 0) {
        fprintf(stderr, "sidecar dlq: %s\n", err);
        return -1;
    }
    v->n += got;
    v->truncated |= v->n >= DLQ_KEY_MAX;
    v->m = pick(v->k, v->key, v->tenant, v->ds, v->n, v->ks);
    return got;
}

/* A held key: names a new replay for its held events that have DLQ copies,
 * up to the first that has none, and fills p. The key's row stays locked
 * from reading its held events to naming the replay, so no hold of the key
 * commits meanwhile: a held event not in the view is one whose dead letter
 * is on its way (its hold committed a moment before: read on, a few times)
 * or out of reach. Returns 2 to publish (*short_of set when it stops
 * short), 3 when the key is not held, or the exit status. */
static int name_replay(struct sc_db *db, struct view *v, struct plan *p, char *token,
                       int *short_of)
{
    struct sc_held_event *evs = NULL;
    struct sc_db_err e = {0};
    int ne = 0;
    *short_of = 0;
    if (sc_db_held_lock_events(db, v->k->name, v->key, &evs, &ne, &e)) {
        fprintf(stderr, "sidecar dlq: reading the held events of key '%s' failed: error %u: %s\n",
                v->key, e.code, e.msg);
        return 1;
    }
    if (ne == 0) {
        sc_db_rollback(db, &e);
        return 3;
    }
    int upto = match(v->ks, v->m, evs, ne, p);
    for (int pass = 0; upto < ne && pass < 5; pass++) {
        if (pass) {
            struct timespec ts = {0, 40 * 1000000L}; /* a dead letter's publish and confirm */
            nanosleep(&ts, NULL);
        }
        if (read_on(v) < 0) {
            sc_db_rollback(db, &e);
            free(evs);
            return 1;
        }
        p->n = 0;
        upto = match(v->ks, v->m, evs, ne, p);
    }
    if (upto < ne) {
        say_short(v->k, v->key, ne, upto, evs[upto].event_id, evs[upto].seq, v->truncated);
        *short_of = 1;
    }
    free(evs);
    if (upto == 0) {
        sc_db_rollback(db, &e);
        return 1;
    }
    uuid_t u;
    uuid_generate(u);
    uuid_unparse_lower(u, token);
    if (sc_db_held_name_replay(db, v->k->name, v->key, token, &e)) {
        fprintf(stderr, "sidecar dlq: naming the replay of key '%s' failed: error %u: %s; nothing "
                "replayed\n", v->key, e.code, e.msg);
        return 1;
    }
    return 2;
}

int sc_dlq_replay_key(struct sc_amqp *a, const struct sc_config *cfg,
                      const struct sc_consumer_config *k, const char *key, const char *tenant)
{
    char err[512], token[37];
    struct sc_db db = {0};
    struct sc_db_err e = {0};
    int rc = 1, use_db = holds_keys(k);
    if (!k->ordering.present) {
        fprintf(stderr, "sidecar dlq replay --key: consumer '%s' has no ordering\n", k->name);
        return 2;
    }
    if (use_db && sc_admin_connect(&db, cfg, tenant, &e)) {
        fprintf(stderr, "sidecar dlq: database%s%s: %s\n", tenant ? " of tenant " : "",
                tenant ? tenant : "", e.msg);
        return 1;
    }
    struct view v = {.a = a, .k = k, .key = key, .tenant = tenant, .ds = calloc(DLQ_KEY_MAX, sizeof *v.ds),
                     .ks = calloc(DLQ_KEY_MAX, sizeof *v.ks)};
    struct plan p = {.copy = calloc(DLQ_KEY_MAX, sizeof *p.copy)};
    if (!v.ds || !v.ks || !p.copy) {
        fprintf(stderr, "sidecar dlq: out of memory\n");
        goto out;
    }
    if (sc_amqp_confirm_select(a, err, sizeof err)) {
        fprintf(stderr, "sidecar dlq: %s\n", err);
        goto out;
    }
    if (read_on(&v) < 0)
        goto out;
    SC_FAULT("dlq.key_browsed");
    int short_of = 0;
    int go = use_db ? name_replay(&db, &v, &p, token, &short_of) : 3;
    if (go == 3) {
        /* Not held: every dead letter of the key, as they are. */
        for (int i = 0; i < v.m; i++)
            p.copy[p.n++] = &v.ks[i];
        if (v.m == 0) {
            fprintf(stderr, "sidecar dlq: no dead letter of key '%s' in %s%s\n", key,
                    k->dead_letter_queue, use_db ? " (and the key is not held)" : "");
            goto out;
        }
        rc = publish_all(a, k, key, &p, v.ks, v.m, NULL, 0);
        goto out;
    }
    if (go != 2) {
        rc = go;
        goto out;
    }
    SC_FAULT("dlq.key_named");
    rc = publish_all(a, k, key, &p, v.ks, v.m, token, !short_of);
    if (short_of)
        rc = 1;
out:
    if (v.ds) {
        sc_dlq_give_back(a, k, v.ds, v.n);
        sc_dlq_free(v.ds, v.n);
    }
    free(v.ds);
    free(v.ks);
    free(p.copy);
    if (use_db)
        sc_db_close(&db);
    return rc;
}

int sc_dlq_release_key(const struct sc_config *cfg, const struct sc_consumer_config *k,
                       const char *key, const char *tenant)
{
    if (!holds_keys(k)) {
        fprintf(stderr, "sidecar dlq release --key: consumer '%s' does not hold keys (it needs "
                "\"ordering\" with \"on_dead_letter\": \"hold\")\n", k->name);
        return 2;
    }
    struct sc_db db = {0};
    struct sc_db_err e = {0};
    if (sc_admin_connect(&db, cfg, tenant, &e)) {
        fprintf(stderr, "sidecar dlq: database%s%s: %s\n", tenant ? " of tenant " : "",
                tenant ? tenant : "", e.msg);
        return 1;
    }
    long r = sc_db_held_release(&db, k->name, key, &e);
    sc_db_close(&db);
    if (r < 0) {
        fprintf(stderr, "sidecar dlq: releasing key '%s' failed: error %u: %s\n", key, e.code,
                e.msg);
        return 1;
    }
    if (r == 0) {
        printf("key '%s' of consumer '%s' is not held: nothing to release\n", key, k->name);
        return 0;
    }
    printf("released key '%s' of consumer '%s' (%ld held event(s) given up); their dead letters "
           "stay in %s: later events of the key run now, and a replay of those dead letters runs "
           "them after them\n", key, k->name, r, k->dead_letter_queue);
    return 0;
}
