/* Held keys (on_dead_letter hold) before an ordered batch runs: a delivery
 * whose key is held is dead-lettered unrun, "held behind <event_id>"; a
 * replay in flight lets its own copies run and holds what else arrives; a
 * replay whose last event is consumed releases the key. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consume/batch_core.h"
#include "consume/held.h"
#include "io/db_held.h"
#include "log.h"

int sc_held_mode(const struct sc_consumer_config *k)
{
    return k->ordering.present && k->ordering.on_dead_letter &&
           strcmp(k->ordering.on_dead_letter, "hold") == 0;
}

/* behind: room 37, or NULL. */
static int release(struct worker *w, const char *key, const char *replay_until, char *behind,
                   struct sc_db_err *e)
{
    char own[37];
    if (!behind)
        behind = own;
    int r = w->io->held_release(w, key, replay_until, behind, e);
    struct sc_log_fields lf = {.consumer = w->c->k->name, .event_id = replay_until};
    if (r == SC_HELD_RELEASED)
        sc_log(SC_LOG_INFO, &lf, "key '%.100s' released: its replay ended with this event applied",
               key);
    else if (r == SC_HELD_STAYS)
        sc_log(SC_LOG_INFO, &lf, "key '%.100s' replayed up to this event; it stays held behind %s, "
               "which arrived during the replay: replay the key again", key, behind);
    return r;
}

int sc_held_release(struct worker *w, const char *key, const char *replay_until,
                    struct sc_db_err *e)
{
    return release(w, key, replay_until, NULL, e);
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
            char behind[37];
            int r = release(w, d->key, h->replay_until, behind, e);
            if (r < 0)
                goto out;
            if (r == SC_HELD_RELEASED)
                continue;
            /* Held behind what came during the replay; or the row changed
             * under this read (held, as read: order before liveness). */
            if (r == SC_HELD_STAYS)
                snprintf(h->held_behind, sizeof h->held_behind, "%s", behind);
            h->replay_until[0] = 0;
        }
        if (h->replay_until[0] && d->replayed)
            continue; /* the replay's own copy runs */
        /* Anything else is held; its dead letter's hold notes it when a
         * replay is in flight, so the key stays held behind it after. */
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
