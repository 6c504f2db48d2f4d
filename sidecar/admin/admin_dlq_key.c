/* `sidecar dlq replay CONSUMER --key K` and `sidecar dlq release CONSUMER
 * --key K`: a held key's dead letters back on the consumer's stream in the
 * order they arrived, and the key released only once nothing of it can be
 * overtaken. Every dead letter of a held key carries its number in the
 * key's arrival order (x-sidecar-hold-seq), given out by consumer_held_key
 * before it is published: a browse that did not reach the row's highest
 * number missed some (held unacked by another client, past the browse's
 * limit, on its way to the DLQ), and then nothing is replayed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/dlq_browse.h"
#include "consume/order.h"
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

/* The key's dead letters among ds[0..n), sorted; *top gets the highest
 * number among them. Returns how many. */
static int pick(const struct sc_consumer_config *k, const char *key, struct dead *ds, int n,
                struct keyed *ks, int64_t *top)
{
    int m = 0;
    *top = 0;
    for (int i = 0; i < n; i++) {
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
        if (ks[m].seq > *top)
            *top = ks[m].seq;
        m++;
    }
    qsort(ks, (size_t)m, sizeof *ks, by_hold_seq);
    return m;
}

/* Marks the replay (when the key is held) and reads the DLQ. Returns 1 to
 * go on with *state set, or the exit status (0, 1) to stop with. */
static int open_replay(struct sc_db *db, const struct sc_consumer_config *k, const char *key,
                       enum sc_replay_open *state)
{
    struct sc_held_state st;
    struct sc_db_err e = {0};
    *state = sc_db_held_open_replay(db, k->name, key, &st, &e);
    if (*state == SC_REPLAY_OPEN_ERROR) {
        fprintf(stderr, "sidecar dlq: marking the replay of key '%s' failed: error %u: %s\n", key,
                e.code, e.msg);
        return 1;
    }
    if (*state == SC_REPLAY_IN_FLIGHT) {
        fprintf(stderr, "sidecar dlq: a replay of key '%s' is in flight: the key is released (or "
                "stays held behind what came meanwhile) once its last event %s is applied; run "
                "this again after that. If its copies are gone for good: sidecar dlq release %s "
                "--key %s\n", key, st.replay_until, k->name, key);
        return 1;
    }
    return 2;
}

/* Names the replay's last copy, or says why nothing is replayed. Returns 1
 * to publish, or the exit status to stop with. */
static int close_replay(struct sc_db *db, const struct sc_consumer_config *k, const char *key,
                        int64_t top, int m, const char *last_id, int truncated)
{
    struct sc_held_state st;
    struct sc_db_err e = {0};
    enum sc_replay_close c = sc_db_held_close_replay(db, k->name, key, top, m ? last_id : NULL,
                                                     &st, &e);
    switch (c) {
    case SC_REPLAY_NAMED:
        return 2;
    case SC_REPLAY_CLOSE_ERROR:
        fprintf(stderr, "sidecar dlq: marking the replay of key '%s' failed: error %u: %s; "
                "nothing replayed\n", key, e.code, e.msg);
        return 1;
    case SC_REPLAY_TAKEN:
        fprintf(stderr, "sidecar dlq: the replay of key '%s' was taken over meanwhile (another "
                "`dlq replay --key` began, or a replayed event failed again and holds the key): "
                "nothing replayed; run this again\n", key);
        return 1;
    case SC_REPLAY_INCOMPLETE:
        break;
    }
    fprintf(stderr, "sidecar dlq: the key '%s' has given out %lld hold number(s) but the DLQ "
            "showed %d of its dead letters, the highest numbered %lld: the others are held "
            "unacked by another client (another `sidecar dlq` command?), %s, or on their way to "
            "%s. Nothing replayed; the key stays held behind %s. Run this again; if they are gone "
            "for good: sidecar dlq release %s --key %s\n", key, (long long)st.hold_seq, m,
            (long long)top,
            truncated ? "past the first 10000 messages read" : "gone from the DLQ",
            k->dead_letter_queue, st.held_behind[0] ? st.held_behind : "its first dead letter",
            k->name, key);
    return 1;
}

/* Republishes ks[0..m) in order, each acked off the DLQ once confirmed.
 * Returns the exit status. */
static int publish_all(struct sc_amqp *a, const struct sc_consumer_config *k, const char *key,
                       struct keyed *ks, int m, int closes)
{
    char ex[300] = "", q[300], err[512];
    if (k->ordering.partitions > 1)
        sc_amqp_ordering_exchange_name(k, ex, sizeof ex);
    snprintf(q, sizeof q, "%s", k->ordering.partitions > 1 ? "" : k->queue);
    int replayed = 0, rc = 0;
    for (int i = 0; i < m; i++) {
        enum sc_publish_result res;
        err[0] = 0;
        int c = sc_dlq_publish_copy(a, ks[i].d, ex[0] ? ex : NULL, q, 2, key, &res, err,
                                    sizeof err);
        if (c != 1) {
            fprintf(stderr, "sidecar dlq: %s not replayed (%s%s%s): it and the %d after it stay in "
                    "%s; the key stays held: replay it again\n", ks[i].d->event_id,
                    sc_publish_result_name(res), err[0] ? ": " : "", err, m - i - 1,
                    k->dead_letter_queue);
            rc = 1;
            break;
        }
        if (sc_dlq_ack_confirmed(a, ks[i].d->tag, err, sizeof err) == 0)
            ks[i].d->tag = 0;
        else
            printf("replayed %s, but its DLQ copy may remain (%s): the consumer takes a second "
                   "copy for a duplicate\n", ks[i].d->event_id, err);
        replayed++;
        printf("replayed %s (key '%s', %d of %d) to %s '%s'\n", ks[i].d->event_id, key, i + 1, m,
               ex[0] ? "exchange" : "queue", ex[0] ? ex : k->queue);
    }
    printf("replayed %d of %d dead letter(s) of key '%s' in arrival order%s\n", replayed, m, key,
           closes ? "; the key is released once the last one is applied" : "");
    return rc;
}

int sc_dlq_replay_key(struct sc_amqp *a, const struct sc_config *cfg,
                      const struct sc_consumer_config *k, const char *key)
{
    char err[512];
    struct sc_db db = {0};
    struct sc_db_err e = {0};
    enum sc_replay_open state = SC_REPLAY_NOT_HELD;
    int held = 0, n = 0, rc = 1, use_db = holds_keys(k);
    if (!k->ordering.present) {
        fprintf(stderr, "sidecar dlq replay --key: consumer '%s' has no ordering\n", k->name);
        return 2;
    }
    if (use_db) {
        if (sc_db_connect(&db, cfg, &e)) {
            fprintf(stderr, "sidecar dlq: database: %s\n", e.msg);
            return 1;
        }
        int go = open_replay(&db, k, key, &state);
        if (go != 2) {
            sc_db_close(&db);
            return go;
        }
        SC_FAULT("dlq.key_marked");
    }
    struct dead *ds = calloc(DLQ_MAX, sizeof *ds);
    struct keyed *ks = calloc(DLQ_MAX, sizeof *ks);
    if (!ds || !ks) {
        fprintf(stderr, "sidecar dlq: out of memory\n");
        goto out;
    }
    if (sc_amqp_confirm_select(a, err, sizeof err) ||
        (n = sc_dlq_browse(a, k, ds, DLQ_MAX, 0, NULL, 1, 1, NULL, &held, err, sizeof err)) < 0) {
        fprintf(stderr, "sidecar dlq: %s\n", err);
        n = 0;
        goto out;
    }
    int64_t top;
    int m = pick(k, key, ds, n, ks, &top);
    int closes = state == SC_REPLAY_OPENED;
    if (closes) {
        int go = close_replay(&db, k, key, top, m, m ? ks[m - 1].id : NULL, held >= DLQ_MAX);
        if (go != 2) {
            rc = go;
            goto out;
        }
        SC_FAULT("dlq.key_named");
    } else if (m == 0) {
        fprintf(stderr, "sidecar dlq: no dead letter of key '%s' in %s%s\n", key,
                k->dead_letter_queue, use_db ? " (and the key is not held)" : "");
        goto out;
    }
    rc = publish_all(a, k, key, ks, m, closes);
out:
    if (ds) {
        sc_dlq_give_back(a, k, ds, n);
        sc_dlq_free(ds, n);
    }
    free(ds);
    free(ks);
    if (use_db)
        sc_db_close(&db);
    return rc;
}

int sc_dlq_release_key(const struct sc_config *cfg, const struct sc_consumer_config *k,
                       const char *key)
{
    if (!holds_keys(k)) {
        fprintf(stderr, "sidecar dlq release --key: consumer '%s' does not hold keys (it needs "
                "\"ordering\" with \"on_dead_letter\": \"hold\")\n", k->name);
        return 2;
    }
    struct sc_db db = {0};
    struct sc_db_err e = {0};
    struct sc_held_state st;
    if (sc_db_connect(&db, cfg, &e)) {
        fprintf(stderr, "sidecar dlq: database: %s\n", e.msg);
        return 1;
    }
    int r = sc_db_held_release_now(&db, k->name, key, &st, &e);
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
    printf("released key '%s' of consumer '%s' (it was held behind %s); its dead letters stay in "
           "%s: later events of the key run now, and a replay of those dead letters runs them "
           "after them\n", key, k->name, st.held_behind, k->dead_letter_queue);
    return 0;
}
