/* Per-key order: the key of a delivery and the in-hand set that decides
 * which deliveries may run now (order.h). */
#include "consume/order.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consume/worker.h"
#include "io/amqp_conn.h"
#include "envelope/json_span.h"
#include "envelope/message.h"

uint64_t sc_order_hash(const char *key)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 0x100000001b3ULL;
    return h;
}

uint64_t sc_order_tenant_hash(const char *tenant, const char *key)
{
    if (!tenant || !tenant[0])
        return sc_order_hash(key);
    uint64_t h = sc_order_hash(tenant);
    h = (h ^ 0xff) * 0x100000001b3ULL; /* a byte no name holds: "a"+"bc" is not "ab"+"c" */
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 0x100000001b3ULL;
    return h;
}

void sc_order_set_tenant(struct sc_order_slot *s, const char *tenant)
{
    snprintf(s->tenant, sizeof s->tenant, "%s", tenant ? tenant : "");
    if (s->kind == SC_ORDER_KEYED)
        s->hash = sc_order_tenant_hash(s->tenant, s->key);
}

/* 1 when slots a and b are of one key: the same tenant's same key. */
static int same_key(const struct sc_order_slot *a, const struct sc_order_slot *b)
{
    return a->hash == b->hash && strcmp(a->key, b->key) == 0 && strcmp(a->tenant, b->tenant) == 0;
}

/* The key at pointer p into data_json: a string's text (its JSON escapes as
 * written) or a number's. Returns 0, or -1 with why. */
static int key_from_data(const char *data, size_t len, const char *p, char *key, size_t cap,
                         char *why, size_t why_len)
{
    const char *v, *kind;
    size_t n;
    int found = sc_json_pointer_scalar(data, len, p, &v, &n, &kind);
    if (found == 0) {
        snprintf(why, why_len, "no ordering key: data%.200s names nothing", p);
        return -1;
    }
    if (found < 0) {
        snprintf(why, why_len, "no ordering key: data%.200s names %s, not a string or a number",
                 p, kind);
        return -1;
    }
    if (n == 0 || n >= cap) {
        snprintf(why, why_len, "no ordering key: data%.200s is %s", p,
                 n ? "longer than 255 bytes" : "empty");
        return -1;
    }
    memcpy(key, v, n);
    key[n] = 0;
    return 0;
}

enum sc_order_kind sc_order_key(const struct sc_consumer_config *k, const amqp_envelope_t *env,
                                char *key, size_t key_cap, char *why, size_t why_len)
{
    char id[37];
    return sc_order_key_id(k, env, key, key_cap, id, why, why_len);
}

enum sc_order_kind sc_order_key_id(const struct sc_consumer_config *k, const amqp_envelope_t *env,
                                   char *key, size_t key_cap, char *id, char *why, size_t why_len)
{
    id[0] = 0;
    /* The envelope is read here once more than the batch reads it: the key
     * decides which batch the delivery may join, before any batch exists. */
    const struct sc_message m = {.props = &env->message.properties, .body = env->message.body,
                                 .exchange = env->exchange, .routing_key = env->routing_key};
    const struct sc_envelope_opts o = sc_envelope_opts_for(k);
    struct sc_message_events evs;
    char reason[512];
    enum sc_order_kind kind = SC_ORDER_OPEN;
    key[0] = why[0] = 0;
    if (k->max_message_bytes > 0 && env->message.body.len > (size_t)k->max_message_bytes)
        return SC_ORDER_OPEN; /* the batch dead-letters it unread */
    if (sc_message_open(&m, &o, &evs, reason, sizeof reason) == 0) {
        struct sc_parsed_event ev;
        if (evs.mode == SC_MODE_BATCH && evs.n == 0) {
            kind = SC_ORDER_OPEN; /* no event: nothing to keep in order, acked */
        } else if (evs.mode == SC_MODE_BATCH) {
            snprintf(why, why_len, "a batch-mode message: an ordered consumer takes one event per "
                     "message");
            kind = SC_ORDER_UNKEYED;
        } else if (sc_message_event(&m, &o, &evs, 0, &ev, reason, sizeof reason) == 0) {
            const char *kk = k->ordering.key;
            if (strcmp(kk, "subject") == 0) {
                const char *s = ev.ev.subject;
                size_t n = s ? strlen(s) : 0;
                if (n == 0 || n >= key_cap) {
                    snprintf(why, why_len, "no ordering key: %s", n ? "subject longer than 255 "
                             "bytes" : "the event has no subject");
                    kind = SC_ORDER_UNKEYED;
                } else {
                    memcpy(key, s, n + 1);
                    kind = SC_ORDER_KEYED;
                }
            } else {
                kind = key_from_data(ev.ev.data_json, ev.ev.data_json_len, kk + 4, key, key_cap,
                                     why, why_len)
                           ? SC_ORDER_UNKEYED
                           : SC_ORDER_KEYED;
            }
            if (kind == SC_ORDER_KEYED)
                snprintf(id, 37, "%s", ev.ev.id);
            sc_event_free(&ev);
        }
    }
    sc_message_events_free(&evs);
    return kind;
}

void sc_order_classify(const struct sc_consumer_config *k, struct sc_order_slot *s)
{
    s->kind = sc_order_key_id(k, &s->env, s->key, sizeof s->key, s->id, s->why, sizeof s->why);
    s->hash = s->kind == SC_ORDER_KEYED ? sc_order_hash(s->key) : 0;
    const amqp_basic_properties_t *p = &s->env.message.properties;
    amqp_bytes_t t = sc_amqp_header_bytes((p->_flags & AMQP_BASIC_HEADERS_FLAG) ? &p->headers
                                                                                 : NULL,
                                          SC_H_REPLAY_TOKEN);
    /* A token of any other length is no replay's: matched against none. */
    snprintf(s->replay_token, sizeof s->replay_token, "%.*s",
             t.len == 36 ? 36 : 0, t.len == 36 ? (const char *)t.bytes : "");
}

int sc_order_init(struct sc_order *o, int cap)
{
    memset(o, 0, sizeof *o);
    o->cap = cap;
    o->seen_cap = 16;
    while (o->seen_cap < 2 * cap)
        o->seen_cap *= 2;
    o->slots = calloc((size_t)cap, sizeof *o->slots);
    o->seen = malloc((size_t)o->seen_cap * sizeof *o->seen);
    o->seen_mode = malloc((size_t)o->seen_cap);
    o->versions = calloc(SC_ORDER_VERSIONS, sizeof *o->versions);
    if (!o->slots || !o->seen || !o->seen_mode || !o->versions) {
        sc_order_free(o);
        return -1;
    }
    return 0;
}

void sc_order_free(struct sc_order *o)
{
    free(o->slots);
    free(o->seen);
    free(o->seen_mode);
    free(o->versions);
    memset(o, 0, sizeof *o);
}

struct sc_order_slot *sc_order_add(struct sc_order *o)
{
    if (o->n == o->cap)
        return NULL;
    struct sc_order_slot *s = &o->slots[o->n++];
    memset(s, 0, sizeof *s);
    return s;
}

void sc_order_remove(struct sc_order *o, int i)
{
    memmove(&o->slots[i], &o->slots[i + 1], sizeof *o->slots * (size_t)(o->n - i - 1));
    o->n--;
}

/* How far one pick got with a key. */
enum { KEY_NEW, KEY_WAITING, KEY_TAKEN };

/* The pick's mark for s's key: KEY_NEW the first time (recorded). */
static unsigned char *key_mode(struct sc_order *o, int i)
{
    const struct sc_order_slot *s = &o->slots[i];
    size_t mask = (size_t)o->seen_cap - 1;
    for (size_t at = (size_t)s->hash & mask;; at = (at + 1) & mask) {
        int j = o->seen[at];
        if (j < 0) {
            o->seen[at] = i;
            o->seen_mode[at] = KEY_NEW;
            return &o->seen_mode[at];
        }
        if (same_key(&o->slots[j], s))
            return &o->seen_mode[at];
    }
}

int sc_order_room(const struct sc_order *o, int i)
{
    amqp_bytes_t tag = o->slots[i].env.consumer_tag;
    int cap = o->queue_cap > 0 ? o->queue_cap : o->cap, from = 0;
    for (int j = 0; j < o->n; j++) {
        amqp_bytes_t t = o->slots[j].env.consumer_tag;
        from += t.len == tag.len && (t.len == 0 || memcmp(t.bytes, tag.bytes, t.len) == 0);
    }
    /* Not the last free place: the broker fills that one at once, and a
     * wait that gives up as soon as it is filled costs a held read more. */
    return from + 1 < cap && o->n + 1 < o->cap;
}

int sc_order_may_wait(const struct sc_order *o, int i, int64_t now_ms)
{
    if (sc_order_room(o, i))
        return 1;
    const struct sc_order_slot *s = &o->slots[i];
    for (int j = i + 1; j < o->n; j++) {
        const struct sc_order_slot *c = &o->slots[j];
        if (c->kind == SC_ORDER_KEYED && c->replay_token[0] && c->wait_ms <= now_ms &&
            same_key(c, s))
            return 1;
    }
    return 0;
}

int sc_order_waits(const struct sc_order *o, int i, int64_t now_ms)
{
    return o->slots[i].wait_ms > now_ms && sc_order_may_wait(o, i, now_ms);
}

int sc_order_pick(struct sc_order *o, int64_t now_ms, int max, int *idx, int64_t *next_due_ms)
{
    int n = 0;
    *next_due_ms = INT64_MAX;
    for (int i = 0; i < o->seen_cap; i++)
        o->seen[i] = -1;
    for (int i = 0; i < o->n && n < max; i++) {
        struct sc_order_slot *s = &o->slots[i];
        /* Unkeyed and malformed deliveries are ordered with nothing: they
         * are dead-lettered unrun, whenever they come. */
        if (s->kind == SC_ORDER_KEYED) {
            unsigned char *mode = key_mode(o, i);
            int waits = sc_order_waits(o, i, now_ms);
            if (waits && s->wait_ms < *next_due_ms)
                *next_due_ms = s->wait_ms;
            if (*mode == KEY_TAKEN)
                continue;
            if (s->blocked) {
                *mode = KEY_TAKEN; /* its tenant is down: nothing later of the key either */
                continue;
            }
            /* Behind the key's waiting slots only a copy of its replay may
             * go (the held check runs it only when it is the first held
             * event's); any other slot of the key comes after them. */
            if (waits || (*mode == KEY_WAITING && !s->replay_token[0])) {
                *mode = KEY_WAITING;
                continue;
            }
            *mode = KEY_TAKEN;
        }
        if (s->blocked)
            continue;
        if (s->due_ms > now_ms) {
            if (s->due_ms < *next_due_ms)
                *next_due_ms = s->due_ms;
            continue;
        }
        idx[n++] = i;
    }
    return n;
}

void sc_order_batch(const struct sc_order *o, const int *idx, int n, struct delivery *dls)
{
    for (int j = 0; j < n; j++) {
        const struct sc_order_slot *s = &o->slots[idx[j]];
        memset(&dls[j], 0, sizeof dls[j]);
        dls[j].env = s->env;
        dls[j].received_us = s->received_us;
        dls[j].in_place = s->in_place;
        dls[j].refused = s->kind == SC_ORDER_UNKEYED ? s->why : NULL;
        dls[j].key = s->kind == SC_ORDER_KEYED ? s->key : NULL;
        dls[j].event_id = s->kind == SC_ORDER_KEYED ? s->id : NULL;
        dls[j].replay_token = s->replay_token;
        dls[j].tenant = s->tenant[0] ? s->tenant : s->named[0] ? s->named : NULL;
    }
}

/* The slots that wait (or waited) for the replay of d's key hear of d:
 * renewed when the replay applied d and the key is still held (the copy of
 * the key's next held event checked again now), all checked again now
 * otherwise. */
static void tell_waiting(struct sc_order *o, const struct delivery *d, int64_t now_ms)
{
    if (!d->key || d->kept)
        return;
    const char *tenant = d->tenant ? d->tenant : "";
    uint64_t hash = sc_order_tenant_hash(tenant, d->key);
    for (int i = 0; i < o->n; i++) {
        struct sc_order_slot *s = &o->slots[i];
        if (!s->waited || s->hash != hash || strcmp(s->key, d->key) != 0 ||
            strcmp(s->tenant, tenant) != 0)
            continue;
        if (d->replay_applied)
            s->wait_since_ms = now_ms;
        if (!d->replay_applied || d->released || strcmp(s->id, d->next_held) == 0)
            s->wait_ms = now_ms;
    }
}

void sc_order_after(struct sc_order *o, const int *idx, const struct delivery *dls, int n,
                    int64_t now_ms, void (*drop)(amqp_envelope_t *env))
{
    for (int j = 0; j < n; j++)
        tell_waiting(o, &dls[j], now_ms);
    /* Last first: a removal moves only the slots after it. */
    for (int j = n - 1; j >= 0; j--) {
        struct sc_order_slot *s = &o->slots[idx[j]];
        if (dls[j].kept) {
            s->in_place += dls[j].spent;
            s->due_ms = now_ms + dls[j].again_ms;
            continue;
        }
        drop(&s->env);
        sc_order_remove(o, idx[j]);
    }
}

int sc_order_version(struct sc_order *o, uint64_t hash, int64_t version, int64_t *last)
{
    hash |= 1; /* never 0, the empty mark */
    struct sc_order_version *v = &o->versions[hash % SC_ORDER_VERSIONS];
    int known = v->hash == hash, rc = 0;
    *last = known ? v->version : 0;
    if (known && version != v->version + 1)
        rc = version > v->version ? 1 : -1;
    v->hash = hash;
    v->version = version;
    return rc;
}
