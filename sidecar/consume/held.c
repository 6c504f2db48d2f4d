/* Held keys (on_dead_letter hold) before an ordered batch runs: a delivery
 * whose key is held is dead-lettered unrun, "held behind <event_id>"; a
 * replay in flight lets its own copies run and holds what else arrives; a
 * replay whose last event is consumed releases the key. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consume/batch_core.h"
#include "consume/held.h"

int sc_held_mode(const struct sc_consumer_config *k)
{
    return k->ordering.present && k->ordering.on_dead_letter &&
           strcmp(k->ordering.on_dead_letter, "hold") == 0;
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
        if (h->replay_until[0] && h->replay_done) {
            /* The replay ended (its last event consumed) and the release
             * did not happen then: now. */
            if (w->io->held_release(w, d->key, NULL, e))
                goto out;
            if (!h->held_in_replay[0])
                continue;
            snprintf(h->held_behind, sizeof h->held_behind, "%s", h->held_in_replay);
            h->replay_until[0] = 0;
        }
        if (h->replay_until[0] && d->replayed)
            continue; /* the replay's own copy runs */
        /* An event arriving during the replay: held, and the key stays held
         * behind it after the replay. */
        if (h->replay_until[0] && !h->held_in_replay[0] &&
            w->io->held_in_replay(w, d->key, d->event_id, e))
            goto out;
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
