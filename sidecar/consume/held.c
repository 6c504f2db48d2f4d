/* Held keys (on_dead_letter hold) before an ordered batch runs: a delivery
 * whose key is held is dead-lettered unrun, "held behind <event_id>" (the
 * key's first held event not yet consumed), unless it is the key's current
 * replay's copy of that event. A copy of an older replay is held like any
 * other event: it keeps its place. While the key's replay is in flight a
 * held delivery waits in hand instead, and the replay's copies go past it
 * (order.h): nothing of the key is recorded or sent round meanwhile, so a
 * key that keeps receiving events is freed once the replay's copies are
 * applied. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consume/batch_core.h"
#include "consume/held.h"
#include "log.h"

int sc_held_mode(const struct sc_consumer_config *k)
{
    return k->ordering.present && k->ordering.on_dead_letter &&
           strcmp(k->ordering.on_dead_letter, "hold") == 0;
}

void sc_held_after_replayed(struct worker *w, struct delivery *d,
                            const struct sc_log_fields *lf)
{
    struct sc_db_err e = {0};
    long left = w->io->held_left(w, d->key, d->next_held, &e);
    d->replay_applied = 1;
    d->released = left == 0;
    if (left == 0)
        sc_log(SC_LOG_INFO, lf, "key '%.100s' released: its replay applied every held event of it",
               d->key);
    else if (left < 0)
        sc_log(SC_LOG_WARN, lf, "could not tell whether key '%.100s' is released (error %u: %s): "
               "its next event finds out", d->key, e.code, e.msg);
}

int sc_held_check(struct worker *w, struct delivery *dls, int n, struct sc_db_err *e)
{
    const char **keys = malloc((size_t)n * sizeof *keys);
    int *of = malloc((size_t)n * sizeof *of);
    struct sc_held_row *rows = malloc((size_t)n * sizeof *rows);
    int k = 0, rc = -1;
    if (!keys || !of || !rows) {
        *e = (struct sc_db_err){.cls = SC_DBERR_FAILURE};
        snprintf(e->msg, sizeof e->msg, "out of memory");
        goto out;
    }
    for (int j = 0; j < n; j++)
        if (dls[j].key && !dls[j].refused) {
            keys[k] = dls[j].key;
            of[k++] = j;
        }
    if (k && w->io->held_read(w, keys, k, rows, e))
        goto out;
    for (int i = 0; i < k; i++) {
        struct sc_held_row *h = &rows[i];
        struct delivery *d = &dls[of[i]];
        if (!h->found)
            continue;
        /* The current replay's copy of the key's first held event runs; its
         * copies come in order, so each is first when it arrives (one that
         * is not — the one before it lost — waits its turn, held). */
        if (h->replay_token[0] && d->replay_token && strcmp(d->replay_token, h->replay_token) == 0 &&
            strcmp(d->event_id, h->held_behind) == 0)
            continue;
        snprintf(d->held_why, sizeof d->held_why, "held behind %s", h->held_behind);
        d->refused = d->held_why;
        d->replay_in_flight = h->replay_token[0] != 0;
        snprintf(d->held_behind, sizeof d->held_behind, "%s", h->held_behind);
        snprintf(d->held_token, sizeof d->held_token, "%s", h->replay_token);
    }
    rc = 0;
out:
    free(keys);
    free(of);
    free(rows);
    return rc;
}

/* Whether d, held while its key's replay is in flight, waits for it. */
static int may_wait(const struct sc_order *o, int i, const struct delivery *d, int64_t now_ms)
{
    const struct sc_order_slot *s = &o->slots[i];
    return d->refused == d->held_why && d->replay_in_flight && sc_order_may_wait(o, i, now_ms) &&
           (!s->waited || now_ms - s->wait_since_ms < SC_REPLAY_WAIT_MS);
}

int sc_held_wait(const struct sc_consumer_config *k, struct sc_order *o, int *idx,
                 struct delivery *dls, int n, int64_t now_ms)
{
    int m = 0;
    for (int j = 0; j < n; j++) {
        struct sc_order_slot *s = &o->slots[idx[j]];
        if (!may_wait(o, idx[j], &dls[j], now_ms)) {
            s->wait_ms = 0;
            if (m != j) {
                /* refused may point into the delivery itself */
                int own = dls[j].refused == dls[j].held_why;
                dls[m] = dls[j];
                if (own)
                    dls[m].refused = dls[m].held_why;
                idx[m] = idx[j];
            }
            m++;
            continue;
        }
        /* What it waits for may be in hand already, waiting out of turn. */
        for (int i = 0; i < o->n; i++) {
            struct sc_order_slot *c = &o->slots[i];
            if (c != s && c->wait_ms > now_ms && strcmp(c->id, dls[j].held_behind) == 0 &&
                strcmp(c->replay_token, dls[j].held_token) == 0)
                c->wait_ms = now_ms;
        }
        if (!s->waited) {
            s->waited = 1;
            s->wait_since_ms = now_ms;
            struct sc_log_fields lf = {.consumer = k->name, .event_id = dls[j].event_id,
                                       .delivery_tag = dls[j].env.delivery_tag};
            sc_log(SC_LOG_INFO, &lf, "%s, whose replay is in flight: waits in hand for the "
                   "replayed events (not run, not acked)", dls[j].held_why);
        }
        s->wait_ms = now_ms + SC_REPLAY_POLL_MS;
    }
    return m;
}
