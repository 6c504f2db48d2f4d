#include "binlog_held.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned hash_of(const char *type, const char *id)
{
    unsigned h = 2166136261u; /* FNV-1a over type, a 0, id */
    for (const char *p = type; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    h = (h ^ 0u) * 16777619u;
    for (const char *p = id; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h;
}

static void free_agg(struct sc_binlog_held_agg *a)
{
    free(a->type);
    free(a->id);
    free(a);
}

void sc_binlog_held_clear(struct sc_binlog_held *h)
{
    for (size_t b = 0; b < h->n_buckets; b++) {
        struct sc_binlog_held_agg *a = h->bucket[b];
        while (a) {
            struct sc_binlog_held_agg *next = a->next;
            free_agg(a);
            a = next;
        }
        h->bucket[b] = NULL;
    }
    h->n = 0;
}

void sc_binlog_held_free(struct sc_binlog_held *h)
{
    sc_binlog_held_clear(h);
    free(h->bucket);
    memset(h, 0, sizeof *h);
}

struct sc_binlog_held_agg *sc_binlog_held_find(const struct sc_binlog_held *h, const char *type, const char *id)
{
    if (!h->n_buckets)
        return NULL;
    unsigned hv = hash_of(type, id);
    for (struct sc_binlog_held_agg *a = h->bucket[hv % h->n_buckets]; a; a = a->next)
        if (a->hash == hv && strcmp(a->type, type) == 0 && strcmp(a->id, id) == 0)
            return a;
    return NULL;
}

/* Doubles the buckets when the chains would average more than one entry. */
static int grow(struct sc_binlog_held *h)
{
    if (h->n < h->n_buckets)
        return 0;
    size_t nb = h->n_buckets ? h->n_buckets * 2 : 64;
    struct sc_binlog_held_agg **bucket = calloc(nb, sizeof *bucket);
    if (!bucket)
        return h->n_buckets ? 0 : -1; /* longer chains, still correct */
    for (size_t b = 0; b < h->n_buckets; b++)
        for (struct sc_binlog_held_agg *a = h->bucket[b], *next; a; a = next) {
            next = a->next;
            a->next = bucket[a->hash % nb];
            bucket[a->hash % nb] = a;
        }
    free(h->bucket);
    h->bucket = bucket;
    h->n_buckets = nb;
    return 0;
}

struct sc_binlog_held_agg *sc_binlog_held_add(struct sc_binlog_held *h, const char *type, const char *id,
                                              int failed)
{
    struct sc_binlog_held_agg *a = sc_binlog_held_find(h, type, id);
    if (a) {
        a->failed |= failed;
        return a;
    }
    if (grow(h))
        return NULL;
    a = calloc(1, sizeof *a);
    if (!a || !(a->type = strdup(type)) || !(a->id = strdup(id))) {
        if (a)
            free_agg(a);
        return NULL;
    }
    a->hash = hash_of(type, id);
    a->failed = failed;
    a->next = h->bucket[a->hash % h->n_buckets];
    h->bucket[a->hash % h->n_buckets] = a;
    h->n++;
    return a;
}

void sc_binlog_held_remove(struct sc_binlog_held *h, struct sc_binlog_held_agg *a)
{
    for (struct sc_binlog_held_agg **p = &h->bucket[a->hash % h->n_buckets]; *p; p = &(*p)->next)
        if (*p == a) {
            *p = a->next;
            free_agg(a);
            h->n--;
            return;
        }
}

void sc_binlog_held_failed_at(struct sc_binlog_held_agg *a, const char *time, long long version)
{
    if (!time || !time[0])
        return;
    int cmp = a->first_time[0] ? strcmp(time, a->first_time) : -1;
    if (cmp < 0 || (cmp == 0 && version < a->first_version)) {
        snprintf(a->first_time, sizeof a->first_time, "%s", time);
        a->first_version = version;
    }
}

int sc_binlog_held_after(const struct sc_binlog_held_agg *a, const char *time, long long version)
{
    if (!a->failed || !a->first_time[0] || !time || !time[0])
        return 1;
    int cmp = strcmp(time, a->first_time);
    return cmp > 0 || (cmp == 0 && version >= a->first_version);
}

size_t sc_binlog_held_list(const struct sc_binlog_held *h, struct sc_binlog_held_agg **out, size_t max)
{
    size_t k = 0;
    for (size_t b = 0; b < h->n_buckets && k < max; b++)
        for (struct sc_binlog_held_agg *a = h->bucket[b]; a && k < max; a = a->next)
            out[k++] = a;
    return k;
}
