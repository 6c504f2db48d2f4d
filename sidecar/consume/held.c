/* Held keys (on_dead_letter hold) before an ordered batch runs: a delivery
 * whose key is held is dead-lettered unrun, "held behind <event_id>" (the
 * key's first held event not yet consumed), unless it is the key's current
 * replay's copy of that event. A copy of an older replay is held like any
 * other event: it keeps its place. */
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

void sc_held_after_replayed(struct worker *w, const struct delivery *d,
                            const struct sc_log_fields *lf)
{
    struct sc_db_err e = {0};
    long left = w->io->held_left(w, d->key, &e);
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
    }
    rc = 0;
out:
    free(keys);
    free(of);
    free(rows);
    return rc;
}
