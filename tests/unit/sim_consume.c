/* A deterministic simulation of the consumer core. The real batch code
 * (sidecar/consume/batch*.c) runs against stand-ins of its seam
 * (batch_io.h): a database that keeps transactions, savepoints, autocommit
 * and the server's status flag as the client sees it; a handler that may
 * apply, refuse, swallow an error, clear it, COMMIT, ROLLBACK or turn
 * autocommit on; a broker with tags, acks, nacks, confirms that fail
 * before or after the copy exists, and quorum delivery counts. A seeded
 * schedule decides every fault; invariants are checked after every batch and
 * at the end of the schedule, when the faults have stopped and the queue
 * has drained.
 *
 *   sim_consume [--seeds N] [--first S]    N schedules from seed S (TAP)
 *   sim_consume --seed S --verbose         one schedule, every step told
 *   --no-batches                           no batch-mode messages (the schedules as
 *                                          they were before batch mode)
 *   --no-ordered                           no ordered consumers (the schedules as
 *                                          they were before per-key order)
 *   --break-order                          the per-key scheduler lets a key's later
 *                                          events run beside its head (must fail)
 *   --no-replays                           held keys are never replayed (the schedules
 *                                          as they were before replays)
 *   --stale-token                          the held keys' stand-in keeps a freed key's
 *                                          replay token (must fail)
 *
 * Ordered schedules (consumers[].ordering) drive the per-key scheduler
 * (consume/order.c) in front of the same batch code: deliveries are held in
 * hand, a batch takes at most one per key, retries run in place after their
 * delay on a simulated clock, and per key nothing may commit while an
 * earlier event of the key is unresolved. With held keys an operator
 * replays them now and then, and in half of those schedules one key keeps
 * receiving events: its later ones are published once a replay freed it,
 * and one of them is refused once, so the key is held again. Deliveries of
 * a key whose replay is in flight wait in hand for it (the real held.c
 * decides, the real order.c lets the replay's copies past them) or go
 * behind it; none may wait for, or go round behind, a replay that is not
 * in flight (named, the key not free since).
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "consume/batch_core.h"
#include "consume/held.h"
#include "consume/order.h"
#include "consume/republish.h"
#include "log.h"
#include "tap.h"

#define MAX_EVENTS 12
#define MAX_MSGS 64      /* messages alive at once: originals, copies, redeliveries */
#define MAX_DELIVERIES 4096
#define MAX_OPS 256
#define MAX_SP 16
#define BATCH_MAX 6
#define MAX_MEMBERS 4    /* events in one batch-mode message */
#define ITEMS_CAP (BATCH_MAX - 1 + MAX_MEMBERS) /* the core's rule: a batch message ends a batch */

/* ---- the schedule ------------------------------------------------------- */

static uint64_t rng;
static int verbose;
static int no_batches; /* --no-batches: the schedules as they were before batch mode */
static int no_ordered; /* --no-ordered: the schedules as they were before per-key order */
static int break_order; /* --break-order: the scheduler ignores keys (the simulation must catch it) */
static int no_replays; /* --no-replays: held keys are never replayed (the schedules as they were) */
static int stale_token; /* --stale-token: a freed key keeps its replay token (must be caught) */

static uint64_t next_u64(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int pick(int n) { return (int)(next_u64() % (uint64_t)n); }
static int chance(int percent) { return pick(100) < percent; }

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    if (!verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    printf("# ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

/* ---- the world ------------------------------------------------------------ */

enum op_kind { OP_CLAIM, OP_UNCLAIM, OP_EFFECT };
struct op { enum op_kind kind; int ev; };
struct sp { char name[32]; int at; };

/* A message: one event, or (batch mode) n_mem members, each an event. */
struct msg {
    int ev;          /* event index, or -1 when malformed (n_mem == 0) */
    int n_mem;       /* a batch-mode message: its members' events in mem (-1: malformed) */
    int mem[MAX_MEMBERS];
    int attempt;     /* x-sidecar-attempts */
    int dcount;      /* x-delivery-count (quorum) */
    int redelivered;
    int token;       /* x-sidecar-replay-token: the replay it is a copy of (0: none) */
    int round;       /* x-sidecar-replay-round */
};

/* The events of a message (a single event is member 0). */
static int msg_events(const struct msg *m, int *evs)
{
    if (m->n_mem == 0) {
        evs[0] = m->ev;
        return 1;
    }
    for (int i = 0; i < m->n_mem && i < MAX_MEMBERS; i++)
        evs[i] = m->mem[i];
    return m->n_mem;
}

static int msg_has(const struct msg *m, int ev)
{
    int evs[MAX_MEMBERS], n = msg_events(m, evs);
    for (int i = 0; i < n; i++)
        if (evs[i] == ev)
            return 1;
    return 0;
}

enum dstate { DS_UNACKED, DS_ACKED, DS_NACKED, DS_CLOSED };
/* What the broker handed out: one delivery. */
struct sent {
    struct msg m;
    uint64_t tag;
    int channel;
    enum dstate st;
    int copied[MAX_MEMBERS]; /* a retry or DLQ copy of that member (0: the event) confirmed */
};

struct world {
    /* what this schedule may do */
    int faults;          /* faults allowed now */
    int fault_pct;       /* chance of a fault at each point */
    int quorum;
    int has_batch;
    int max_attempts;
    int n_events;
    int always_retry;    /* directed cases: the handler asks to retry */
    int poison;          /* an event whose handler always leaves the session out of
                            sync (a CALL whose results it never reads), or -1 */
    /* database: committed state */
    int claims[MAX_EVENTS];
    int effects[MAX_EVENTS];
    /* database: the session */
    struct op ops[MAX_OPS];
    int n_ops;
    struct sp sps[MAX_SP];
    int n_sps;
    int in_txn;          /* the server's transaction */
    int status_in_trans; /* what the client last saw in an OK packet */
    int autocommit;
    int dead;            /* 2006 on every call until a new session */
    int out_of_sync;     /* 2014 on every call until a new session */
    int read_only;       /* 1290 on every write until a new session */
    struct sc_db_err last;
    int outage;          /* a session-ending fault happened in this session */
    int tainted;         /* a handler ended the transaction in this session */
    int commit_lost;     /* this session's COMMIT lost its connection or its node's writes */
    int violated;        /* a handler broke the contract in this session */
    /* broker */
    struct msg queue[MAX_MSGS];
    int n_queue;
    struct msg delayed[MAX_MSGS]; /* retry copies waiting out their delay */
    int n_delayed;
    int dlq[MAX_EVENTS + 1];      /* DLQ copies per event (index n_events: malformed) */
    struct sent dl[MAX_DELIVERIES];
    int n_dl;
    int channel;
    uint64_t next_tag;
    int n_malformed_sent;
    /* Events of a batch whose handler broke the contract: what such a
     * handler committed cannot be told, so their effect may be missing or
     * doubled (they are dead-lettered for a person to look at); every other
     * event keeps every guarantee. */
    int involved[MAX_EVENTS];
    int batch_evs[ITEMS_CAP], n_batch_evs;
    int batches;         /* this schedule sends batch-mode messages */
    /* per-key order */
    int ordered;         /* the consumer is ordered (skip on dead letter) */
    int key[MAX_EVENTS]; /* the event's key, -1: published without one */
    int rank[MAX_EVENTS]; /* arrival order within its key: its first place in the queue */
    int64_t now_ms;      /* the simulated clock the in-place retries wait on */
    int hold;            /* on_dead_letter hold: the held keys' stand-in below */
    int held_seq[MAX_EVENTS];  /* consumer_held_event: the event's number, 0: no row */
    int key_token[MAX_EVENTS]; /* consumer_held_key.replay_token per key, 0: none */
    int64_t hold_seq;
    int next_token, n_replays; /* the operator's `dlq replay --key` runs */
    int live[MAX_EVENTS];      /* per key the replay the operator has in flight: named, and
                                  the key not free since (0: none) */
    /* A key that keeps receiving events: its first event and its first late
     * one are refused once by the handler (faults or not), and its late ones
     * are published once a replay has freed it, so that it is held again. */
    int late_key;              /* -1: none */
    int late_evs[MAX_EVENTS], n_late, late_sent;
    int reject_first[MAX_EVENTS], rejected[MAX_EVENTS];
    int freed[MAX_EVENTS];     /* per key: a replay freed it */
    uint64_t replay_rng;
    /* the verdict */
    char failure[512];
};

static struct world W;

/* Over every schedule of the run: how much batch mode was driven. */
static struct {
    unsigned long long batch_deliveries, member_copies, batch_acked_mixed, batch_returned;
    unsigned long long ordered_schedules, in_place_retries, waited_behind;
    unsigned long long replays, replay_copies, sent_behind, freed_by_replay, held_again;
    unsigned long long waited_for_replay;
} stats;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    if (W.failure[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(W.failure, sizeof W.failure, fmt, ap);
    va_end(ap);
    say("INVARIANT BROKEN: %s", W.failure);
}

static char ids[MAX_EVENTS][37];

static int event_of(const char *id)
{
    for (int i = 0; i < W.n_events; i++)
        if (strcmp(ids[i], id) == 0)
            return i;
    fail("unknown event id %s", id);
    return 0;
}

/* ---- the stand-in database -------------------------------------------------- */

static int visible_claim(int ev)
{
    int v = W.claims[ev];
    for (int i = 0; i < W.n_ops; i++)
        if (W.ops[i].ev == ev && W.ops[i].kind != OP_EFFECT)
            v = W.ops[i].kind == OP_CLAIM;
    return v;
}

/* Per key, commit order is arrival order: an effect commits only when
 * every earlier event of its key is resolved (applied or dead-lettered).
 * An event of a batch whose handler broke the contract has no guarantee
 * left (its claim may be committed without its effect): it counts as
 * resolved, as it does for the effect checks. */
static void check_order(int ev)
{
    if (!W.ordered || W.key[ev] < 0)
        return;
    /* Hold: once an event of a key is dead-lettered, no later one of it
     * takes effect until it has (a replay applied it). */
    for (int e = 0; e < W.n_events && W.hold; e++)
        if (e != ev && W.key[e] == W.key[ev] && W.rank[e] < W.rank[ev] &&
            (W.dlq[e] || W.held_seq[e]) && W.effects[e] == 0 && !W.involved[e] &&
            !W.involved[ev])
            fail("event %d of key %d committed while event %d of its key is held", ev, W.key[ev],
                 e);
    for (int e = 0; e < W.n_events; e++)
        if (e != ev && W.key[e] == W.key[ev] && W.rank[e] < W.rank[ev] && !W.effects[e] &&
            !W.dlq[e] && !W.involved[e])
            fail("event %d of key %d committed while event %d, earlier of its key, is unresolved",
                 ev, W.key[ev], e);
}

static int held_first(int k);
static void publish_late(void);

static void apply_ops(void)
{
    for (int i = 0; i < W.n_ops; i++) {
        struct op *o = &W.ops[i];
        if (o->kind == OP_CLAIM) {
            W.claims[o->ev] = 1;
        } else if (o->kind == OP_UNCLAIM) {
            W.claims[o->ev] = 0;
        } else {
            check_order(o->ev);
            W.effects[o->ev]++;
            /* Its last held event applied: the key is free, its replay over. */
            int k = W.key[o->ev];
            if (W.hold && k >= 0 && W.live[k] && held_first(k) < 0) {
                W.live[k] = 0;
                W.freed[k] = 1;
                stats.freed_by_replay++;
                if (k == W.late_key)
                    publish_late();
            }
        }
    }
    W.n_ops = 0;
}

static void txn_end(int commit)
{
    if (commit)
        apply_ops();
    W.n_ops = 0;
    W.n_sps = 0;
    W.in_txn = 0;
}

static int set_err(struct sc_db_err *e, unsigned code, const char *msg)
{
    struct sc_db_err x = {.code = code};
    snprintf(x.sqlstate, sizeof x.sqlstate, "%s", code == 2006 || code == 2013 ? "HY000" : "40001");
    snprintf(x.msg, sizeof x.msg, "%s", msg);
    x.cls = sc_db_classify(code, msg);
    W.last = x;
    if (e)
        *e = x;
    return -1;
}

static void ok_statement(void)
{
    memset(&W.last, 0, sizeof W.last);
    if (!W.autocommit)
        W.in_txn = 1;
    W.status_in_trans = W.in_txn && !W.autocommit;
}

/* A statement's fate before it runs: a fault, or the session's state.
 * Returns 0 to run it, -1 with e filled. */
static int statement_fault(int writes, struct sc_db_err *e)
{
    if (W.dead)
        return set_err(e, 2006, "MySQL server has gone away");
    if (W.out_of_sync)
        return set_err(e, 2014, "Commands out of sync; you can't run this command now");
    if (writes && W.read_only)
        return set_err(e, 1290, "The MariaDB server is running with the --read-only option so it "
                                "cannot execute this statement");
    if (!W.faults || !chance(W.fault_pct))
        return 0;
    /* A statement that writes nothing (a savepoint, a count) can only lose
     * its session. */
    switch (writes ? pick(7) : 2 * pick(2)) {
    case 0:
        say("  fault: connection lost");
        txn_end(0);
        W.dead = W.outage = 1;
        return set_err(e, 2013, "Lost connection to server during query");
    case 1:
        say("  fault: deadlock (the server rolls the transaction back)");
        txn_end(0);
        return set_err(e, 1213, "Deadlock found when trying to get lock; try restarting transaction");
    case 2:
        say("  fault: commands out of sync (a session that cannot go on)");
        W.out_of_sync = W.outage = 1;
        return set_err(e, 2014, "Commands out of sync; you can't run this command now");
    case 3:
        say("  fault: lock wait timeout with innodb_rollback_on_timeout");
        txn_end(0);
        return set_err(e, 1205, "Lock wait timeout exceeded; try restarting transaction");
    case 4:
        say("  fault: lock wait timeout (the statement only)");
        return set_err(e, 1205, "Lock wait timeout exceeded; try restarting transaction");
    case 5:
        say("  fault: the node turned read-only");
        W.read_only = W.outage = 1;
        return set_err(e, 1290, "The MariaDB server is running with the --read-only option so it "
                                "cannot execute this statement");
    default:
        say("  fault: foreign key failure");
        return set_err(e, 1452, "Cannot add or update a child row: a foreign key constraint fails");
    }
}

static void push_op(enum op_kind k, int ev)
{
    if (W.n_ops == MAX_OPS) {
        fail("transaction too long");
        return;
    }
    W.ops[W.n_ops++] = (struct op){k, ev};
    if (W.autocommit)
        txn_end(1); /* each statement commits on its own */
}

static int find_sp(const char *name)
{
    for (int i = 0; i < W.n_sps; i++)
        if (strcmp(W.sps[i].name, name) == 0)
            return i;
    return -1;
}

static int db_exec(struct worker *w, const char *sql, struct sc_db_err *e)
{
    (void)w;
    char verb[32], name[32];
    if (statement_fault(0, e))
        return -1;
    if (sscanf(sql, "SAVEPOINT %31s", name) == 1) {
        strcpy(verb, "SAVEPOINT");
    } else if (sscanf(sql, "ROLLBACK TO SAVEPOINT %31s", name) == 1) {
        strcpy(verb, "ROLLBACK TO");
    } else if (sscanf(sql, "RELEASE SAVEPOINT %31s", name) == 1) {
        strcpy(verb, "RELEASE");
    } else {
        fail("unexpected statement %s", sql);
        return -1;
    }
    if (W.autocommit && strcmp(verb, "SAVEPOINT") != 0)
        return set_err(e, 1305, "SAVEPOINT does not exist");
    int at = find_sp(name);
    if (strcmp(verb, "SAVEPOINT") == 0) {
        if (!W.autocommit) {
            if (at >= 0) {
                memmove(&W.sps[at], &W.sps[at + 1], sizeof W.sps[0] * (size_t)(W.n_sps - at - 1));
                W.n_sps--;
            }
            if (W.n_sps == MAX_SP) {
                fail("too many savepoints");
                return -1;
            }
            snprintf(W.sps[W.n_sps].name, sizeof W.sps[0].name, "%s", name);
            W.sps[W.n_sps++].at = W.n_ops;
        }
    } else if (at < 0) {
        return set_err(e, 1305, "SAVEPOINT does not exist");
    } else if (strcmp(verb, "ROLLBACK TO") == 0) {
        W.n_ops = W.sps[at].at;
        W.n_sps = at + 1;
    } else {
        W.n_sps = at;
    }
    ok_statement();
    return 0;
}

static int db_claim(struct worker *w, const char *id, struct sc_db_err *e)
{
    (void)w;
    int ev = event_of(id);
    if (statement_fault(1, e))
        return -1;
    if (visible_claim(ev))
        return set_err(e, 1062, "Duplicate entry 'c-x' for key 'uq_consumed_event_identity'");
    push_op(OP_CLAIM, ev);
    ok_statement();
    return 0;
}

static int db_claim_many(struct worker *w, const char *const *list, int n, struct sc_db_err *e)
{
    (void)w;
    if (statement_fault(1, e))
        return -1;
    int evs[SC_BATCH_LIMIT];
    for (int i = 0; i < n; i++) {
        evs[i] = event_of(list[i]);
        int twice = 0;
        for (int j = 0; j < i; j++)
            twice |= evs[j] == evs[i];
        if (twice || visible_claim(evs[i]))
            return set_err(e, 1062, "Duplicate entry 'c-x' for key 'uq_consumed_event_identity'");
    }
    int was = W.autocommit;
    W.autocommit = 0; /* one statement: one commit at most */
    for (int i = 0; i < n; i++)
        push_op(OP_CLAIM, evs[i]);
    W.autocommit = was;
    if (was)
        txn_end(1);
    ok_statement();
    return 0;
}

static int db_unclaim_many(struct worker *w, const char *const *list, int n, struct sc_db_err *e)
{
    (void)w;
    if (statement_fault(1, e))
        return -1;
    int was = W.autocommit;
    W.autocommit = 0;
    for (int i = 0; i < n; i++) {
        int ev = event_of(list[i]);
        if (visible_claim(ev))
            push_op(OP_UNCLAIM, ev);
    }
    W.autocommit = was;
    if (was)
        txn_end(1);
    ok_statement();
    return 0;
}

static int db_count(struct worker *w, const char *const *list, int n, long *found,
                    struct sc_db_err *e)
{
    (void)w;
    *found = 0;
    if (statement_fault(0, e))
        return -1;
    for (int i = 0; i < n; i++)
        *found += visible_claim(event_of(list[i]));
    ok_statement();
    return 0;
}

/* COMMIT's faults: lost before it applied, lost after it applied (both an
 * unknown outcome for the client), or a certification failure. */
static int db_commit(struct worker *w, struct sc_db_err *e)
{
    (void)w;
    if (W.dead)
        return set_err(e, 2006, "MySQL server has gone away");
    if (W.out_of_sync)
        return set_err(e, 2014, "Commands out of sync; you can't run this command now");
    if (W.read_only && W.n_ops) {
        txn_end(0); /* a node that turned read-only (Galera: left the primary) */
        W.commit_lost = 1;
        return set_err(e, 1290, "The MariaDB server is running with the --read-only option so it "
                                "cannot execute this statement");
    }
    if (W.faults && chance(W.fault_pct)) {
        switch (pick(3)) {
        case 0:
            say("  fault: COMMIT lost before it applied");
            txn_end(0);
            break;
        case 1:
            say("  fault: COMMIT applied, its answer lost");
            txn_end(1);
            break;
        default:
            say("  fault: COMMIT fails certification (rolled back)");
            txn_end(0);
            return set_err(e, 1213, "Deadlock found when trying to get lock; try restarting "
                                    "transaction");
        }
        W.dead = W.outage = W.commit_lost = 1;
        return set_err(e, 2013, "Lost connection to server during query");
    }
    txn_end(1);
    ok_statement();
    W.status_in_trans = 0;
    return 0;
}

static int db_rollback(struct worker *w, struct sc_db_err *e)
{
    (void)w;
    if (W.dead)
        return set_err(e, 2006, "MySQL server has gone away");
    if (W.out_of_sync)
        return set_err(e, 2014, "Commands out of sync; you can't run this command now");
    txn_end(0);
    memset(&W.last, 0, sizeof W.last);
    W.status_in_trans = 0;
    return 0;
}

static int db_in_transaction(struct worker *w)
{
    (void)w;
    return W.status_in_trans && !W.autocommit;
}

static void db_last_error(struct worker *w, struct sc_db_err *e)
{
    (void)w;
    *e = W.last;
}

/* A new session: what the old one had open is rolled back. */
static void new_session(const char *why)
{
    say("  new database session (%s)", why);
    txn_end(0);
    W.dead = W.out_of_sync = W.read_only = W.outage = W.tainted = W.commit_lost = W.violated = 0;
    W.autocommit = 0;
    W.status_in_trans = 0;
    memset(&W.last, 0, sizeof W.last);
}

static int db_replace_session(struct worker *w)
{
    (void)w;
    if (W.faults && chance(W.fault_pct)) {
        say("  the replacement session could not be made");
        return -1;
    }
    new_session("replaced after a contract violation");
    return 0;
}

/* consumer_held_key: committed at once, like the real statements. */
static int key_index(const char *key)
{
    return key[0] == 'k' ? atoi(key + 1) : -1;
}

static void token_text(int t, char *out)
{
    if (t)
        snprintf(out, 37, "00000000-0000-4000-8000-%012d", t);
    else
        out[0] = 0;
}

static int token_of(const char *s)
{
    return s && strlen(s) == 36 ? atoi(s + 24) : 0;
}

/* The key's first held event not consumed (committed effect), or -1. */
static int held_first(int k)
{
    int best = -1;
    for (int e = 0; e < W.n_events; e++)
        if (W.key[e] == k && W.held_seq[e] && W.effects[e] == 0 &&
            (best < 0 || W.held_seq[e] < W.held_seq[best]))
            best = e;
    return best;
}

static int db_held_read(struct worker *w, const char *const *keys, int n, struct sc_held_row *rows,
                        struct sc_db_err *e)
{
    (void)w;
    if (statement_fault(0, e))
        return -1;
    memset(rows, 0, sizeof *rows * (size_t)n);
    for (int i = 0; i < n; i++) {
        int k = key_index(keys[i]);
        int first = k >= 0 && k < MAX_EVENTS ? held_first(k) : -1;
        if (first < 0)
            continue;
        rows[i].found = 1;
        snprintf(rows[i].held_behind, sizeof rows[i].held_behind, "%s", ids[first]);
        token_text(W.key_token[k], rows[i].replay_token);
    }
    ok_statement();
    txn_end(0); /* ended with its ROLLBACK / COMMIT */
    W.status_in_trans = 0;
    return 0;
}

static int db_held_hold(struct worker *w, const char *key, const char *event_id, const char *token,
                        int64_t *seq, char *current, struct sc_db_err *e)
{
    (void)w;
    if (W.n_ops)
        fail("a hold recorded inside a batch's transaction (its work not committed yet)");
    if (statement_fault(1, e))
        return -1;
    int k = key_index(key), ev = event_of(event_id);
    if (k >= 0 && k < MAX_EVENTS && token_of(token) && token_of(token) == W.key_token[k])
        W.key_token[k] = 0; /* a copy of the current replay failed again: the replay ends */
    if (k >= 0 && k < MAX_EVENTS && held_first(k) < 0 && W.freed[k]) {
        stats.held_again++;
        W.freed[k] = 0;
    }
    if (!stale_token && k >= 0 && k < MAX_EVENTS && held_first(k) < 0)
        W.key_token[k] = 0; /* nothing held: no replay in flight (one left by a crash) */
    if (!W.held_seq[ev])
        W.held_seq[ev] = (int)++W.hold_seq;
    *seq = W.held_seq[ev];
    token_text(k >= 0 && k < MAX_EVENTS ? W.key_token[k] : 0, current);
    ok_statement();
    txn_end(0); /* ended with its ROLLBACK / COMMIT */
    W.status_in_trans = 0;
    return 0;
}

static long db_held_left(struct worker *w, const char *key, char *first, struct sc_db_err *e)
{
    (void)w;
    if (statement_fault(1, e))
        return -1;
    int k = key_index(key);
    ok_statement();
    txn_end(0); /* ended with its COMMIT */
    W.status_in_trans = 0;
    int next = k >= 0 && k < MAX_EVENTS ? held_first(k) : -1, left = next >= 0;
    snprintf(first, 37, "%s", left ? ids[next] : "");
    if (!left && !stale_token && k >= 0 && k < MAX_EVENTS)
        W.key_token[k] = 0; /* freed: its replay token cleared in the same transaction */
    return left;
}

/* ---- the stand-in handler --------------------------------------------------- */

/* The handler's effect: one row, no unique key, so a second effect shows. */
static int effect(int ev)
{
    struct sc_db_err e;
    if (statement_fault(1, &e))
        return -1;
    push_op(OP_EFFECT, ev);
    ok_statement();
    return 0;
}

static void other_statement(void)
{
    struct sc_db_err e;
    if (statement_fault(0, &e) == 0)
        ok_statement();
}

/* The handler's own COMMIT or ROLLBACK: an OK packet, no transaction. */
static int handler_ends(int commit)
{
    if (W.dead || W.out_of_sync)
        return -1;
    txn_end(commit);
    W.status_in_trans = 0;
    memset(&W.last, 0, sizeof W.last);
    return 0;
}

/* A violation. One that rolls back is contained for every event; one that
 * commits can leave claims committed without their effects where the
 * sidecar cannot see which (claims of a whole batch go in first), and a
 * second fault (the claims cannot be taken back, the DLQ copy is not
 * confirmed) can then cost those events their guarantee: they are marked
 * involved and exempt from the effect checks. */
static void violate(int ev, int in_batch_call)
{
    int kind = pick(5);
    int contained = !in_batch_call && (kind == 2 || kind == 3);
    W.violated = 1;
    switch (kind) {
    case 0:
        say("  handler: effect, COMMIT");
        if (effect(ev) == 0)
            handler_ends(1);
        break;
    case 1:
        say("  handler: effect, COMMIT, then another statement");
        if (effect(ev) == 0 && handler_ends(1) == 0)
            other_statement();
        break;
    case 2:
        say("  handler: ROLLBACK");
        handler_ends(0);
        break;
    case 3:
        say("  handler: ROLLBACK, then its effect again");
        if (handler_ends(0) == 0)
            effect(ev);
        break;
    default:
        /* The one violation that leaves the session changed: every later
         * statement would commit on its own. */
        say("  handler: autocommit on, effect");
        if (!W.dead && !W.out_of_sync) {
            W.autocommit = 1;
            txn_end(1);
            W.tainted = 1;
            effect(ev);
        }
        break;
    }
    for (int i = 0; i < W.n_batch_evs && !contained; i++)
        if (W.batch_evs[i] >= 0)
            W.involved[W.batch_evs[i]] = 1;
}

static sc_handler_status run_handler(int ev, char *reason, size_t len)
{
    if (W.reject_first[ev] && !W.rejected[ev]) {
        W.rejected[ev] = 1;
        say("  handler: REJECT (event %d, the first time it runs)", ev);
        snprintf(reason, len, "not this time");
        return SC_HANDLER_REJECT;
    }
    if (W.always_retry) {
        snprintf(reason, len, "not now");
        return SC_HANDLER_RETRY;
    }
    if (ev == W.poison && !W.dead) {
        say("  handler: the poison event leaves the session out of sync");
        W.out_of_sync = W.outage = 1;
        set_err(NULL, 2014, "Commands out of sync; you can't run this command now");
        snprintf(reason, len, "statement failed: %s", W.last.msg);
        return SC_HANDLER_RETRY;
    }
    if (!W.faults || !chance(W.fault_pct * 2)) {
        if (effect(ev) == 0)
            return SC_HANDLER_OK;
        snprintf(reason, len, "effect failed: %s", W.last.msg);
        return SC_HANDLER_RETRY; /* the error stays readable */
    }
    switch (pick(6)) {
    case 0:
        say("  handler: RETRY");
        snprintf(reason, len, "not now");
        return SC_HANDLER_RETRY;
    case 1:
        say("  handler: REJECT");
        snprintf(reason, len, "no");
        return SC_HANDLER_REJECT;
    case 2:
        say("  handler: effect fails, the error is cleared (statement closed), RETRY");
        if (effect(ev) == 0)
            return SC_HANDLER_OK;
        memset(&W.last, 0, sizeof W.last);
        snprintf(reason, len, "statement failed");
        return SC_HANDLER_RETRY;
    case 3:
        /* Swallowing an error that left the transaction as it was is the
         * handler's own business (an optional statement); the sidecar
         * promises to see through one that rolled the transaction back. */
        say("  handler: effect fails, the error is swallowed, OK");
        if (effect(ev) == 0 || !W.in_txn || W.dead || W.read_only)
            return SC_HANDLER_OK;
        snprintf(reason, len, "effect failed: %s", W.last.msg);
        return SC_HANDLER_RETRY;
    case 4:
        violate(ev, 0);
        return SC_HANDLER_OK;
    default:
        say("  handler: effect, then REJECT (its part is undone)");
        effect(ev);
        snprintf(reason, len, "changed its mind");
        return SC_HANDLER_REJECT;
    }
}

static sc_handler_status h_handle(struct worker *w, const struct sc_event *ev, char *reason,
                                  size_t len)
{
    (void)w;
    return run_handler(event_of(ev->id), reason, len);
}

static int h_has_batch(struct worker *w)
{
    (void)w;
    return W.has_batch;
}

/* handle_batch: every OK event's effect is done, every refused one has none,
 * or it returns non-zero; or it breaks the contract. */
static int h_handle_batch(struct worker *w, const struct sc_event *const *evs, size_t n,
                          sc_handler_status *st, char *reasons, size_t len)
{
    (void)w;
    for (size_t i = 0; i < n; i++)
        if (event_of(evs[i]->id) == W.poison && !W.dead) {
            say("  handle_batch: the poison event leaves the session out of sync");
            W.out_of_sync = W.outage = 1;
            set_err(NULL, 2014, "Commands out of sync; you can't run this command now");
            return -1;
        }
    if (W.faults && chance(W.fault_pct)) {
        say("  handle_batch: breaks the contract");
        violate(event_of(evs[0]->id), 1);
        for (size_t i = 0; i < n; i++)
            st[i] = SC_HANDLER_OK;
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        int ev = event_of(evs[i]->id);
        if (W.faults && chance(W.fault_pct)) {
            st[i] = chance(50) ? SC_HANDLER_RETRY : SC_HANDLER_REJECT;
            snprintf(reasons + i * len, len, "refused");
            continue;
        }
        if (effect(ev)) {
            if (chance(30))
                memset(&W.last, 0, sizeof W.last);
            return -1;
        }
        st[i] = SC_HANDLER_OK;
    }
    return 0;
}

/* ---- the stand-in broker ---------------------------------------------------- */

static struct sent *delivery_of(uint64_t tag)
{
    for (int i = W.n_dl - 1; i >= 0; i--)
        if (W.dl[i].tag == tag && W.dl[i].channel == W.channel)
            return &W.dl[i];
    fail("unknown delivery tag %llu", (unsigned long long)tag);
    return &W.dl[0];
}

static void requeue(struct msg m)
{
    if (W.n_queue == MAX_MSGS) {
        fail("queue overflow");
        return;
    }
    m.redelivered = 1;
    if (W.quorum)
        m.dcount++;
    memmove(&W.queue[1], &W.queue[0], sizeof W.queue[0] * (size_t)W.n_queue);
    W.queue[0] = m;
    W.n_queue++;
}

static struct delivery dls[BATCH_MAX];
static char bodies[BATCH_MAX][1024];
static size_t member_spans[BATCH_MAX][MAX_MEMBERS][2];

/* A copy under confirms: the broker may lose it, or keep it and lose only
 * the confirm. A batch member's copy is that member alone: its own event,
 * its own body. */
static int publish(struct worker *w, const struct item *it, int to_dlq)
{
    (void)w;
    struct sent *d = delivery_of(it->dl->env.delivery_tag);
    int ev = d->m.ev, slot = (int)(it->dl - dls);
    if (it->member >= 0) {
        if (d->m.n_mem == 0 || it->member >= d->m.n_mem)
            fail("a member copy of a delivery that is no batch (member %d)", it->member);
        ev = d->m.mem[it->member];
        const size_t *span = member_spans[slot][it->member];
        if (it->body_off != span[0] || it->body_len != span[1] - span[0])
            fail("the copy of member %d does not carry that member's body (%zu+%zu, expected "
                 "%zu+%zu)", it->member, it->body_off, it->body_len, span[0], span[1] - span[0]);
    } else if (d->m.n_mem) {
        ev = -1; /* the whole batch message: it is malformed as a whole */
    }
    int keep = 1, confirmed = 1;
    if (W.faults && chance(W.fault_pct)) {
        confirmed = 0;
        keep = chance(50);
        say("  fault: %s copy %s, not confirmed", to_dlq ? "DLQ" : "retry",
            keep ? "stored" : "lost");
    }
    if (keep) {
        if (to_dlq == 2 && ev >= 0 && W.key[ev] >= 0 &&
            token_of(it->dl->behind_replay) != W.live[W.key[ev]])
            fail("event %d of key %d sent round behind replay %d, but the replay in flight is "
                 "%d (0: none; the key was freed since)", ev, W.key[ev],
                 token_of(it->dl->behind_replay), W.live[W.key[ev]]);
        if (to_dlq == 2 && W.n_queue < MAX_MSGS) {
            /* Behind the key's replay: to the end of the stream, its token. */
            W.queue[W.n_queue++] = (struct msg){.ev = ev, .attempt = 1,
                                                .token = token_of(it->dl->behind_replay),
                                                .round = d->m.round + 1};
            stats.sent_behind++;
        } else if (to_dlq == 2) {
            fail("queue overflow");
        } else if (to_dlq) {
            W.dlq[ev >= 0 ? ev : W.n_events]++;
        } else if (W.n_delayed < MAX_MSGS) {
            struct msg m = {.ev = ev, .attempt = it->attempt + 1};
            W.delayed[W.n_delayed++] = m;
        } else {
            fail("delay queue overflow");
        }
    }
    if (confirmed)
        d->copied[it->member >= 0 ? it->member : 0] = 1;
    if (confirmed && it->member >= 0)
        stats.member_copies++;
    return confirmed ? 0 : -1;
}

static int b_publish_dead(struct worker *w, const struct item *it, const char *why)
{
    if (strstr(why, "read-only") && !strstr(why, "again for this delivery"))
        fail("dead-lettered for a read-only node: %s", why);
    /* What batch_io's publish_dead does with a delivery held while its
     * key's replay is in flight. */
    if (it->dl->behind_replay[0])
        return publish(w, it, 2);
    return publish(w, it, 1);
}

static int b_publish_retry(struct worker *w, const struct item *it, int delay_ms, const char *why)
{
    (void)delay_ms;
    if (W.ordered)
        fail("an ordered consumer sent a retry through a delay queue: later events of its key "
             "would overtake it");
    if (strstr(why, "read-only") && !strstr(why, "again for this delivery"))
        fail("an attempt spent on a read-only node: %s", why);
    return publish(w, it, 0);
}

static int settle_one(struct sent *d, enum dstate to)
{
    if (d->st != DS_UNACKED) {
        fail("delivery tag %llu settled twice", (unsigned long long)d->tag);
        return -1;
    }
    d->st = to;
    if (to == DS_NACKED)
        requeue(d->m);
    return 0;
}

static int b_ack(struct worker *w, uint64_t tag, int multiple)
{
    (void)w;
    if (W.ordered && multiple)
        fail("an ordered consumer acked with multiple: it would ack deliveries still in hand");
    if (W.faults && chance(W.fault_pct / 2 + 1)) {
        say("  fault: the ack could not be sent");
        return -1;
    }
    if (!multiple)
        return settle_one(delivery_of(tag), DS_ACKED);
    for (int i = 0; i < W.n_dl; i++)
        if (W.dl[i].channel == W.channel && W.dl[i].tag <= tag && W.dl[i].st == DS_UNACKED)
            W.dl[i].st = DS_ACKED;
    return 0;
}

static int b_nack(struct worker *w, uint64_t tag, int multiple)
{
    (void)w;
    if (W.ordered)
        fail("an ordered consumer nacked tag %llu: the requeued event would come back behind "
             "later ones of its key", (unsigned long long)tag);
    /* A return spends the delivery's x-delivery-count (RabbitMQ before 4.3
     * counts every one): a database fault must not. */
    if (W.commit_lost && !W.violated) /* a handler that broke the contract: its fault */
        fail("a COMMIT that lost its connection or its node's writes was answered with a nack "
             "of tag %llu: a database fault spent x-delivery-count", (unsigned long long)tag);
    if (!multiple)
        return settle_one(delivery_of(tag), DS_NACKED);
    for (int i = 0; i < W.n_dl; i++)
        if (W.dl[i].channel == W.channel && W.dl[i].tag <= tag && W.dl[i].st == DS_UNACKED)
            settle_one(&W.dl[i], DS_NACKED);
    return 0;
}

static void b_keep_alive(struct worker *w)
{
    (void)w;
}

/* The channel closes: the broker returns what is unsettled. */
static void channel_close(void)
{
    say("  channel closed: the broker returns what is unsettled");
    /* A classic queue puts them back in their places: last first, each at
     * the head. (Unordered schedules keep the order they always had.) */
    for (int k = 0; k < W.n_dl; k++) {
        int i = W.ordered ? W.n_dl - 1 - k : k;
        if (W.dl[i].channel == W.channel && W.dl[i].st == DS_UNACKED) {
            W.dl[i].st = DS_CLOSED;
            requeue(W.dl[i].m);
        }
    }
    W.channel++;
    W.next_tag = 1;
}

static const struct sc_batch_io sim_io = {
    .exec = db_exec,
    .claim = db_claim,
    .claim_many = db_claim_many,
    .unclaim_many = db_unclaim_many,
    .count_claims = db_count,
    .commit = db_commit,
    .rollback = db_rollback,
    .in_transaction = db_in_transaction,
    .last_error = db_last_error,
    .replace_session = db_replace_session,
    .held_read = db_held_read,
    .held_hold = db_held_hold,
    .held_left = db_held_left,
    .handle = h_handle,
    .has_batch = h_has_batch,
    .handle_batch = h_handle_batch,
    .publish_dead = b_publish_dead,
    .publish_retry = b_publish_retry,
    .ack = b_ack,
    .nack = b_nack,
    .keep_alive = b_keep_alive,
};

/* ---- deliveries as the worker sees them ------------------------------------- */

static amqp_table_entry_t headers[BATCH_MAX][4];
static char token_texts[MAX_DELIVERIES][37];

static int event_body(char *out, size_t cap, int ev)
{
    if (ev >= 0 && W.ordered && W.key[ev] >= 0)
        return snprintf(out, cap, "{\"specversion\":\"1.0\",\"id\":\"%s\",\"type\":\"T\","
                        "\"source\":\"S\",\"subject\":\"k%d\",\"data\":{\"n\":%d,\"k\":\"k%d\"}}",
                        ids[ev], W.key[ev], ev, W.key[ev]);
    if (ev >= 0)
        return snprintf(out, cap, "{\"specversion\":\"1.0\",\"id\":\"%s\",\"type\":\"T\","
                        "\"source\":\"S\",\"data\":{\"n\":%d}}", ids[ev], ev);
    return snprintf(out, cap, "{\"specversion\":\"1.0\",\"id\":\"nope\"}");
}

/* The broker hands out m: env gets it, body and headers in the buffers
 * given (spans: a batch's members). */
static void deliver_env(amqp_envelope_t *env, char *body, size_t body_cap, amqp_table_entry_t *hdr,
                        size_t (*spans)[2], struct msg m)
{
    struct sent *d = &W.dl[W.n_dl++];
    *d = (struct sent){.m = m, .tag = W.next_tag++, .channel = W.channel, .st = DS_UNACKED};
    memset(env, 0, sizeof *env);
    if (m.n_mem == 0) {
        event_body(body, body_cap, m.ev);
        env->message.properties._flags = AMQP_BASIC_CONTENT_TYPE_FLAG;
        env->message.properties.content_type = amqp_cstring_bytes(SC_CT_STRUCTURED);
    } else {
        /* Batch mode: a JSON array of structured events, with some
         * whitespace, so a member's span is more than a guess. */
        size_t off = (size_t)snprintf(body, body_cap, "[ ");
        for (int i = 0; i < m.n_mem; i++) {
            if (i)
                off += (size_t)snprintf(body + off, body_cap - off, " ,\n ");
            spans[i][0] = off;
            off += (size_t)event_body(body + off, body_cap - off, m.mem[i]);
            spans[i][1] = off;
        }
        snprintf(body + off, body_cap - off, " ]");
        env->message.properties._flags = AMQP_BASIC_CONTENT_TYPE_FLAG;
        env->message.properties.content_type = amqp_cstring_bytes(SC_CT_BATCH);
    }
    env->delivery_tag = d->tag;
    env->redelivered = m.redelivered;
    env->message.body = amqp_cstring_bytes(body);
    int nh = 0;
    if (m.attempt > 1) {
        hdr[nh].key = amqp_cstring_bytes(SC_H_ATTEMPTS);
        hdr[nh].value.kind = AMQP_FIELD_KIND_I32;
        hdr[nh++].value.value.i32 = m.attempt;
    }
    if (W.quorum && m.dcount > 0) {
        hdr[nh].key = amqp_cstring_bytes("x-delivery-count");
        hdr[nh].value.kind = AMQP_FIELD_KIND_I64;
        hdr[nh++].value.value.i64 = m.dcount;
    }
    if (m.token) {
        char *t = token_texts[W.n_dl - 1];
        token_text(m.token, t);
        hdr[nh].key = amqp_cstring_bytes(SC_H_REPLAY_TOKEN);
        hdr[nh].value.kind = AMQP_FIELD_KIND_UTF8;
        hdr[nh++].value.value.bytes = amqp_cstring_bytes(t);
        hdr[nh].key = amqp_cstring_bytes(SC_H_REPLAY_ROUND);
        hdr[nh].value.kind = AMQP_FIELD_KIND_I64;
        hdr[nh++].value.value.i64 = m.round;
    }
    if (nh) {
        env->message.properties._flags |= AMQP_BASIC_HEADERS_FLAG;
        env->message.properties.headers.num_entries = nh;
        env->message.properties.headers.entries = hdr;
    }
}

static void deliver(struct delivery *dl, int slot, struct msg m)
{
    dl->in_place = 0; /* what an ordered schedule left in the array */
    dl->refused = NULL;
    dl->key = dl->event_id = NULL;
    dl->replay_token = "";
    dl->behind_replay[0] = 0; /* an ordered schedule's, never an unordered one's */
    deliver_env(&dl->env, bodies[slot], sizeof bodies[slot], headers[slot], member_spans[slot], m);
}

/* An ordered consumer's delivery lives in hand across batches: its body
 * and headers in a buffer of its own, freed when it leaves. */
struct held_buf {
    char body[1024];
    amqp_table_entry_t hdr[4];
    size_t spans[MAX_MEMBERS][2];
};

static int deliver_held(amqp_envelope_t *env, struct msg m)
{
    struct held_buf *b = malloc(sizeof *b);
    if (!b) {
        fail("out of memory");
        return -1;
    }
    deliver_env(env, b->body, sizeof b->body, b->hdr, b->spans, m);
    return 0;
}

static void drop_held(amqp_envelope_t *env)
{
    free(env->message.body.bytes); /* the held_buf it starts */
}

/* ---- invariants ------------------------------------------------------------- */

static void check_store(void)
{
    for (int ev = 0; ev < W.n_events; ev++) {
        if (W.involved[ev])
            continue;
        if (W.effects[ev] > 1)
            fail("event %d: its effect committed %d times", ev, W.effects[ev]);
        if (W.claims[ev] && W.effects[ev] == 0 && !W.dlq[ev])
            fail("event %d: claim committed without its effect (a redelivery would be acked as a "
                 "duplicate)", ev);
        if (W.effects[ev] && !W.claims[ev])
            fail("event %d: effect committed without its claim", ev);
    }
}

/* An event still on its way: in the queue, waiting out a retry delay, or in
 * a worker's hands. */
static int unpublished(int ev)
{
    for (int j = 0; j < W.n_late && !W.late_sent; j++)
        if (W.late_evs[j] == ev)
            return 1;
    return 0;
}

static int on_its_way(int ev)
{
    int yes = unpublished(ev); /* the producer still has it */
    for (int i = 0; i < W.n_queue; i++)
        yes |= msg_has(&W.queue[i], ev);
    for (int i = 0; i < W.n_delayed; i++)
        yes |= msg_has(&W.delayed[i], ev);
    for (int i = 0; i < W.n_dl; i++)
        yes |= msg_has(&W.dl[i].m, ev) && W.dl[i].st == DS_UNACKED;
    return yes;
}

/* After a batch: every delivery has one disposition the broker accepts,
 * and one is acked only when every event of it is settled: its claim
 * committed (applied now or before), a confirmed copy of that event, or
 * (a duplicate of a batch-mate) the batch-mate's copy in the DLQ or the
 * batch-mate still on its way. */
static void check_delivery(struct sent *d, enum next r, int kept)
{
    if (kept && d->st != DS_UNACKED)
        fail("delivery tag %llu kept in hand but settled with the broker",
             (unsigned long long)d->tag);
    if (d->st == DS_UNACKED && r != NEXT_RESET && !kept)
        fail("delivery tag %llu left unsettled with the channel open",
             (unsigned long long)d->tag);
    if (d->m.n_mem) {
        stats.batch_deliveries++;
        stats.batch_returned += d->st == DS_NACKED || d->st == DS_CLOSED ||
                                (d->st == DS_UNACKED && r == NEXT_RESET);
    }
    if (d->st != DS_ACKED)
        return;
    int copied = 0;
    for (int j = 0; j < d->m.n_mem; j++)
        copied += d->copied[j];
    stats.batch_acked_mixed += copied > 0 && copied < d->m.n_mem;
    int evs[MAX_MEMBERS], k = msg_events(&d->m, evs);
    for (int j = 0; j < k; j++) {
        int ev = evs[j];
        if (ev < 0 ? !d->copied[j]
                   : !W.claims[ev] && !d->copied[j] && !W.dlq[ev] && !W.involved[ev] &&
                         !on_its_way(ev))
            fail("delivery tag %llu acked with %s %d unsettled (no claim committed, no "
                 "confirmed copy)", (unsigned long long)d->tag,
                 d->m.n_mem ? "member" : "event", j);
    }
}

static void check_batch(int first, int n, enum next r)
{
    for (int i = first; i < first + n; i++)
        check_delivery(&W.dl[i], r, 0);
    check_store();
}

static struct sent *sent_of(uint64_t tag)
{
    for (int i = W.n_dl - 1; i >= 0; i--)
        if (W.dl[i].tag == tag && W.dl[i].channel == W.channel)
            return &W.dl[i];
    fail("unknown delivery tag %llu", (unsigned long long)tag);
    return &W.dl[0];
}

static void check_ordered_batch(const struct delivery *ds, int n, enum next r)
{
    for (int j = 0; j < n; j++)
        check_delivery(sent_of(ds[j].env.delivery_tag), r, ds[j].kept && r != NEXT_RESET);
    check_store();
}

/* Nothing lost: every event is applied, dead-lettered, or still on its way
 * (in the queue, waiting out a retry delay, or in a worker's hands). An ack
 * that loses an event shows here: its last copy is gone. */
static void check_nothing_lost(void)
{
    for (int ev = 0; ev < W.n_events; ev++) {
        if (W.effects[ev] == 1 || W.dlq[ev] || W.involved[ev])
            continue;
        if (!on_its_way(ev))
            fail("event %d lost: acked or dropped without its effect committed or a copy kept "
                 "(claim %d, effects %d)", ev, W.claims[ev], W.effects[ev]);
    }
}

/* ---- one schedule ----------------------------------------------------------- */

static struct consumer consumer;
static struct sc_consumer_config kcfg;
static struct sc_config cfg;
static int delays[] = {1000, 5000};
static const struct sc_handler_v1 sim_handler = {.abi_version = 1, .name = "sim"};
static struct item items[ITEMS_CAP];
static char reasons[ITEMS_CAP * SC_REASON_LEN];

static void setup_consumer(void)
{
    kcfg.name = "sim";
    kcfg.queue = "sim";
    kcfg.dead_letter_queue = "sim.dlq";
    kcfg.batch_max = BATCH_MAX;
    kcfg.retry_delays_ms = delays;
    kcfg.n_retry_delays = 2;
    consumer.cfg = &cfg;
    consumer.k = &kcfg;
    consumer.plugin.h = &sim_handler;
    sc_consumer_metrics_init(&consumer.m, "sim", 1);
}

/* Runs one batch the way the consume loop does, holding it through new
 * sessions while it says so. */
static enum next run_batch(struct worker *w, int n)
{
    if (W.tainted)
        fail("a batch ran on a session a handler broke, never replaced");
    enum next r = sc_batch_process(w, dls, n);
    for (int holds = 0; r == NEXT_DB_HOLD; holds++) {
        if (!W.outage)
            fail("batch held for a new session, but the session was fine (an error of the "
                 "handler or of the transaction taken for an outage)");
        if (!W.faults && holds > 2 * w->n_items + 4)
            fail("a held batch of %d events did not settle in %d new sessions after the faults "
                 "stopped", w->n_items, holds);
        if (holds > 3 * ITEMS_CAP + 6) {
            say("  the hold ends (db_outage_hold_ms): everything is returned");
            r = NEXT_RESET;
            break;
        }
        if (W.faults && chance(W.fault_pct)) {
            say("  the new session fails; the hold ends");
            r = NEXT_RESET;
            break;
        }
        new_session("held batch");
        w->holding = 1;
        r = sc_batch_process(w, dls, n);
    }
    w->holding = 0;
    w->hold_one_by_one = 0;
    w->hold_culprit[0] = 0;
    return r;
}

/* Batch-mode messages, drawn from a stream of their own so that a schedule
 * without them is the schedule it always was: runs of events become
 * members of one message (now and then with a malformed member), most of
 * them no longer sent alone, some messages sent twice whole. */
static void add_batch_messages(uint64_t seed)
{
    uint64_t main_rng = rng;
    rng = seed ^ 0x5ca1ab1e0ddba11ULL;
    W.batches = !no_batches && chance(45);
    for (int ev = 0; W.batches && ev < W.n_events;) {
        if (!chance(60)) {
            ev++;
            continue;
        }
        struct msg m = {.ev = -1, .attempt = 1};
        int want = 1 + pick(MAX_MEMBERS);
        while (m.n_mem < want && ev < W.n_events) {
            if (m.n_mem && chance(12)) {
                m.mem[m.n_mem++] = -1;
                W.n_malformed_sent = 1;
                continue;
            }
            int alone = chance(30);
            for (int i = 0; i < W.n_queue && !alone; i++)
                if (W.queue[i].n_mem == 0 && W.queue[i].ev == ev) {
                    memmove(&W.queue[i], &W.queue[i + 1], sizeof W.queue[0] * (size_t)(W.n_queue - i - 1));
                    W.n_queue--;
                    i--;
                }
            m.mem[m.n_mem++] = ev++;
        }
        for (int copies = chance(30) ? 2 : 1; copies > 0 && W.n_queue < MAX_MSGS; copies--) {
            int at = pick(W.n_queue + 1);
            memmove(&W.queue[at + 1], &W.queue[at], sizeof W.queue[0] * (size_t)(W.n_queue - at));
            W.queue[at] = m;
            W.n_queue++;
        }
    }
    rng = main_rng;
}

/* Per-key order, drawn from a stream of its own so that an unordered
 * schedule is the schedule it always was: keys for the events (now and then
 * one without), the key's source (subject or a data pointer), and each
 * event's rank in its key: its first place in the queue. */
static void add_order(uint64_t seed)
{
    uint64_t main_rng = rng;
    rng = seed ^ 0x0dde7ed0c0ffee11ULL;
    W.ordered = !no_ordered && chance(40);
    int n_keys = 1 + pick(4);
    for (int ev = 0; ev < W.n_events; ev++)
        W.key[ev] = chance(8) ? -1 : pick(n_keys);
    W.hold = chance(50);
    kcfg.ordering = (struct sc_ordering_config){.present = W.ordered,
                                                .key = chance(50) ? "subject" : "data/k",
                                                .partitions = 1,
                                                .on_dead_letter = W.hold ? "hold" : "skip"};
    W.hold &= W.ordered;
    for (int ev = 0; ev < W.n_events; ev++)
        W.rank[ev] = MAX_MSGS;
    for (int i = W.n_queue - 1; i >= 0; i--)
        if (W.queue[i].n_mem == 0 && W.queue[i].ev >= 0)
            W.rank[W.queue[i].ev] = i;
    rng = main_rng;
}

/* A held key that keeps receiving events, drawn from a stream of its own
 * so that every other schedule stays as it was: one key's last events are
 * held back from the queue and published once a replay has freed the key;
 * its first event, and the first of the late ones, are refused the first
 * time they run, so the key is held, replayed, freed and held again. */
static void add_late(uint64_t seed)
{
    uint64_t main_rng = rng;
    rng = seed ^ 0x1a7e0a881e5ULL;
    W.late_key = -1;
    if (!W.hold || no_replays || !chance(50)) {
        rng = main_rng;
        return;
    }
    int k = W.key[pick(W.n_events)], evs[MAX_EVENTS], ne = 0;
    for (int r = 0; r < MAX_MSGS && k >= 0; r++)
        for (int e = 0; e < W.n_events; e++)
            if (W.key[e] == k && W.rank[e] == r)
                evs[ne++] = e;
    if (ne < 3) {
        rng = main_rng;
        return;
    }
    W.late_key = k;
    W.reject_first[evs[0]] = 1;
    int from = 1 + pick(ne - 2);
    for (int i = from; i < ne; i++)
        W.late_evs[W.n_late++] = evs[i];
    W.reject_first[evs[from]] = 1;
    /* Out of the queue (every copy of them) until the key is freed. */
    for (int i = 0; i < W.n_queue; i++)
        for (int j = 0; j < W.n_late; j++)
            if (W.queue[i].n_mem == 0 && W.queue[i].ev == W.late_evs[j]) {
                memmove(&W.queue[i], &W.queue[i + 1], sizeof W.queue[0] * (size_t)(W.n_queue - i - 1));
                W.n_queue--;
                i--;
                break;
            }
    for (int j = 0; j < W.n_late; j++)
        W.rank[W.late_evs[j]] = MAX_MSGS + j;
    rng = main_rng;
}

static void publish_late(void)
{
    if (W.late_sent || W.n_queue + W.n_late > MAX_MSGS)
        return;
    W.late_sent = 1;
    say("  producer: key %d freed, its %d later events published", W.late_key, W.n_late);
    for (int j = 0; j < W.n_late; j++)
        W.queue[W.n_queue++] = (struct msg){.ev = W.late_evs[j], .attempt = 1};
}

static int late_pending(void)
{
    return W.late_key >= 0 && !W.late_sent && W.n_replays < 4;
}

/* The operator's `sidecar dlq replay --key` (admin_dlq_key.c), as the
 * consumer sees it: a held key's held events not consumed, in their order,
 * up to the first the DLQ has no copy of, each copy taken off the DLQ and
 * put at the end of the stream with a new token, which becomes the key's
 * current replay; now and then cut short (a copy refused, the command
 * killed). Its own draws, so that every other schedule stays as it was. */
static int rpick(int n)
{
    uint64_t z = (W.replay_rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (int)((z ^ (z >> 31)) % (uint64_t)n);
}

static void replay_a_key(void)
{
    int keys[MAX_EVENTS], nk = 0;
    for (int k = 0; k < MAX_EVENTS; k++)
        if (held_first(k) >= 0)
            keys[nk++] = k;
    if (!nk)
        return;
    int k = keys[rpick(nk)], evs[MAX_EVENTS], ne = 0;
    for (int e = 0; e < W.n_events; e++)
        if (W.key[e] == k && W.held_seq[e] && W.effects[e] == 0)
            evs[ne++] = e;
    for (int i = 1; i < ne; i++)
        for (int j = i; j > 0 && W.held_seq[evs[j]] < W.held_seq[evs[j - 1]]; j--) {
            int t = evs[j];
            evs[j] = evs[j - 1];
            evs[j - 1] = t;
        }
    int upto = 0;
    while (upto < ne && W.dlq[evs[upto]] > 0)
        upto++;
    if (!upto || W.n_queue + upto > MAX_MSGS)
        return;
    int sent = rpick(5) == 0 ? rpick(upto + 1) : upto;
    W.key_token[k] = W.live[k] = ++W.next_token;
    W.n_replays++;
    stats.replays++;
    say("  operator: replay of key %d (token %d): %d of its %d held events%s", k, W.next_token,
        sent, ne, sent < upto ? ", cut short" : "");
    for (int i = 0; i < sent; i++) {
        W.dlq[evs[i]]--;
        W.queue[W.n_queue++] = (struct msg){.ev = evs[i], .attempt = 1, .token = W.next_token};
        stats.replay_copies++;
    }
}

/* A delivery starts (or goes on) waiting in hand only for a replay in
 * flight: named, and its key not free since. (Once waiting it may outlive
 * the replay by a poll: a COMMIT whose answer was lost freed the key
 * unknown to the consumer.) */
static void check_waiting(const struct sc_order *o, const int *was, int n_was, const int *idx,
                          int n)
{
    for (int a = 0; a < n_was; a++) {
        int stays = 0;
        for (int b = 0; b < n; b++)
            stays |= idx[b] == was[a];
        const struct sc_order_slot *s = &o->slots[was[a]];
        int k = s->kind == SC_ORDER_KEYED ? key_index(s->key) : -1;
        if (!stays && k >= 0 && k < MAX_EVENTS && !W.live[k])
            fail("a delivery of key %d waits in hand for a replay, but none is in flight (the "
                 "key was freed since, or never replayed)", k);
    }
}

/* An ordered consumer's loop, the way sidecar/consume/ordered.c runs it:
 * deliveries taken into the in-hand set (at most prefetch), a batch of what
 * may run now, the kept ones back in their places with their delays on the
 * simulated clock; a reset returns everything in hand. */
static void run_ordered(struct worker *w, int fault_batches)
{
    struct sc_order o;
    int idx[BATCH_MAX];
    if (sc_order_init(&o, 2 + pick(7))) {
        fail("out of memory");
        return;
    }
    stats.ordered_schedules++;
    for (int b = 0; b < 600 + 400 * W.n_replays && !W.failure[0]; b++) {
        if (b == fault_batches) {
            W.faults = 0;
            say("-- faults stop");
        }
        if (W.hold && !no_replays && W.n_replays < 4 && rpick(100) < 8)
            replay_a_key();
        int room = o.cap - o.n, avail = W.n_queue < room ? W.n_queue : room;
        int take = avail ? pick(avail + 1) : 0;
        if (o.n == 0 && avail && take == 0)
            take = 1;
        if (W.n_dl + take > MAX_DELIVERIES) {
            fail("too many deliveries");
            break;
        }
        for (int i = 0; i < take; i++) {
            struct sc_order_slot *sl = sc_order_add(&o);
            if (deliver_held(&sl->env, W.queue[0])) {
                o.n--;
                break;
            }
            memmove(&W.queue[0], &W.queue[1], sizeof W.queue[0] * (size_t)--W.n_queue);
            sl->received_us = W.now_ms * 1000;
            sc_order_classify(&kcfg, sl);
            if (break_order && sl->kind == SC_ORDER_KEYED) {
                /* Every delivery its own key: a key's later events run beside
                 * (and before) its head. */
                snprintf(sl->key, sizeof sl->key, "tag%llu",
                         (unsigned long long)sl->env.delivery_tag);
                sl->hash = sc_order_hash(sl->key);
            }
        }
        if (o.n == 0 && W.n_queue == 0 && !late_pending())
            break;
        int64_t next_due;
        int n = sc_order_pick(&o, W.now_ms, 1 + pick(BATCH_MAX), idx, &next_due);
        stats.waited_behind += (unsigned long long)(o.n - n);
        if (n == 0) {
            if (next_due != INT64_MAX)
                W.now_ms = next_due; /* nothing may run: time passes */
            continue;
        }
        sc_order_batch(&o, idx, n, dls);
        struct sc_db_err he = {0};
        if (W.hold && sc_held_check(w, dls, n, &he)) {
            say("  the held keys could not be read: a new session, nothing runs");
            new_session("held keys unread");
            continue;
        }
        if (W.hold) {
            int before = n, was[BATCH_MAX];
            memcpy(was, idx, sizeof was);
            n = sc_held_wait(&kcfg, &o, idx, dls, n, W.now_ms);
            stats.waited_for_replay += (unsigned long long)(before - n);
            if (before > n)
                say("  %d wait in hand for their keys' replays", before - n);
            check_waiting(&o, was, before, idx, n);
            if (n == 0) {
                W.now_ms += pick(500);
                continue;
            }
        }
        W.n_batch_evs = 0;
        for (int j = 0; j < n; j++)
            W.batch_evs[W.n_batch_evs++] = sent_of(dls[j].env.delivery_tag)->m.ev;
        if (verbose) {
            char line[512];
            int off = 0;
            for (int j = 0; j < n; j++) {
                const struct sent *d = sent_of(dls[j].env.delivery_tag);
                off += snprintf(line + off, sizeof line - (size_t)off, " %d(key %d, tag %llu, "
                                "in place %d)", d->m.ev, d->m.ev >= 0 ? W.key[d->m.ev] : -1,
                                (unsigned long long)d->tag, dls[j].in_place);
            }
            say("t=%lld ms, %d in hand, batch %d:%s", (long long)W.now_ms, o.n, b, line);
        }
        enum next r = run_batch(w, n);
        say("  -> %s", r == NEXT_CONTINUE ? "continue" : r == NEXT_DB_LOST ? "db lost" : "reset");
        check_ordered_batch(dls, n, r);
        for (int j = 0; j < n; j++)
            stats.in_place_retries += dls[j].kept && dls[j].spent;
        sc_batch_release(w);
        if (r == NEXT_RESET) {
            channel_close();
            for (int i = 0; i < o.n; i++)
                drop_held(&o.slots[i].env);
            o.n = 0;
            new_session("after a reset");
        } else {
            sc_order_after(&o, idx, dls, n, W.now_ms, drop_held);
            if (r == NEXT_DB_LOST)
                new_session("db lost");
        }
        check_nothing_lost();
        W.now_ms += pick(500);
    }
    if (!W.failure[0] && o.n)
        fail("%d deliveries still in hand at the end of the schedule", o.n);
    for (int i = 0; i < o.n; i++)
        drop_held(&o.slots[i].env);
    sc_order_free(&o);
}

static int run_schedule(uint64_t seed)
{
    memset(&W, 0, sizeof W);
    rng = seed;
    W.n_events = 1 + pick(MAX_EVENTS - 1);
    W.fault_pct = 3 + pick(20);
    W.quorum = chance(50);
    W.has_batch = chance(40);
    W.max_attempts = 2 + pick(4);
    W.poison = chance(15) ? pick(W.n_events) : -1;
    W.channel = 1;
    W.next_tag = 1;
    kcfg.max_attempts = W.max_attempts;
    kcfg.queue_type = W.quorum ? "quorum" : "classic";
    for (int i = 0; i < W.n_events; i++)
        snprintf(ids[i], sizeof ids[i], "00000000-0000-4000-8000-%012x", i + 1);
    /* Each event published once, some twice (a producer's repeat), and a
     * malformed message now and then. */
    for (int i = 0; i < W.n_events; i++) {
        W.queue[W.n_queue++] = (struct msg){.ev = i, .attempt = 1};
        if (chance(25))
            W.queue[W.n_queue++] = (struct msg){.ev = i, .attempt = 1};
    }
    if (chance(30)) {
        W.queue[W.n_queue++] = (struct msg){.ev = -1, .attempt = 1};
        W.n_malformed_sent = 1;
    }
    for (int i = W.n_queue - 1; i > 0; i--) {
        int j = pick(i + 1);
        struct msg t = W.queue[i];
        W.queue[i] = W.queue[j];
        W.queue[j] = t;
    }
    add_order(seed);
    add_late(seed);
    W.replay_rng = seed ^ 0x5eed0fa11ed0beefULL;
    if (!W.ordered)
        add_batch_messages(seed);
    say("seed %llu: %d events, %d messages%s, faults %d%%, %s queue, handle_batch %s, "
        "max_attempts %d, poison event %d%s", (unsigned long long)seed, W.n_events, W.n_queue,
        W.batches ? " (batch-mode messages among them)" : "", W.fault_pct,
        W.quorum ? "quorum" : "classic", W.has_batch ? "yes" : "no", W.max_attempts, W.poison,
        W.ordered ? ", ordered consumer" : "");

    struct worker w = {.c = &consumer, .io = &sim_io, .items = items, .items_cap = ITEMS_CAP,
                       .reasons = reasons};
    int fault_batches = 5 + pick(40);
    W.faults = 1;
    if (W.ordered)
        run_ordered(&w, fault_batches);
    for (int b = 0; b < 400 && !W.failure[0] && !W.ordered; b++) {
        if (b == fault_batches) {
            W.faults = 0;
            say("-- faults stop");
        }
        /* Retry copies come back after their delay. */
        while (W.n_delayed && (W.n_queue == 0 || chance(30))) {
            W.queue[W.n_queue++] = W.delayed[0];
            memmove(&W.delayed[0], &W.delayed[1], sizeof W.delayed[0] * (size_t)--W.n_delayed);
        }
        if (W.n_queue == 0)
            break;
        int n = 1 + pick(BATCH_MAX < W.n_queue ? BATCH_MAX : W.n_queue);
        int first = W.n_dl;
        if (W.n_dl + n > MAX_DELIVERIES) {
            fail("too many deliveries");
            break;
        }
        /* The loop's rule: a batch-mode message ends the gathering. */
        W.n_batch_evs = 0;
        for (int i = 0; i < n; i++) {
            int evs[MAX_MEMBERS], k = msg_events(&W.queue[0], evs);
            for (int j = 0; j < k; j++)
                W.batch_evs[W.n_batch_evs++] = evs[j];
            deliver(&dls[i], i, W.queue[0]);
            memmove(&W.queue[0], &W.queue[1], sizeof W.queue[0] * (size_t)--W.n_queue);
            if (sc_batch_ends_gathering(&w, &dls[i].env))
                n = i + 1;
        }
        if (verbose) {
            char line[512];
            int off = 0;
            for (int i = 0; i < n; i++) {
                const struct msg *m = &W.dl[first + i].m;
                if (m->n_mem == 0)
                    off += snprintf(line + off, sizeof line - (size_t)off, " %d", m->ev);
                for (int j = 0; j < m->n_mem; j++)
                    off += snprintf(line + off, sizeof line - (size_t)off, "%s%d%s",
                                    j ? "," : " [", m->mem[j], j == m->n_mem - 1 ? "]" : "");
                off += snprintf(line + off, sizeof line - (size_t)off, "(tag %llu, att %d, dc %d)",
                                (unsigned long long)W.dl[first + i].tag, m->attempt, m->dcount);
            }
            say("batch %d:%s", b, line);
        }
        enum next r = run_batch(&w, n);
        say("  -> %s", r == NEXT_CONTINUE ? "continue" : r == NEXT_DB_LOST ? "db lost" : "reset");
        check_batch(first, n, r);
        sc_batch_release(&w);
        if (r == NEXT_RESET) {
            channel_close();
            new_session("after a reset");
        } else if (r == NEXT_DB_LOST) {
            new_session("db lost");
        }
        check_nothing_lost();
    }
    if (!W.failure[0] && (W.n_queue || W.n_delayed))
        fail("the queue did not drain after the faults stopped (%d waiting, %d delayed)",
             W.n_queue, W.n_delayed);
    for (int i = 0; i < W.n_dl && !W.failure[0]; i++)
        if (W.dl[i].st == DS_UNACKED)
            fail("delivery tag %llu never settled", (unsigned long long)W.dl[i].tag);
    for (int ev = 0; ev < W.n_events && !W.failure[0]; ev++)
        if (W.effects[ev] != 1 && !W.dlq[ev] && !W.involved[ev] && !unpublished(ev))
            fail("event %d lost: no effect and no dead letter", ev);
    if (W.poison >= 0 && !W.failure[0] && !W.involved[W.poison] && !unpublished(W.poison) &&
        (W.effects[W.poison] || !W.dlq[W.poison]))
        fail("the poison event was not dead-lettered after max_attempts");
    if (W.n_malformed_sent && !W.dlq[W.n_events] && !W.failure[0])
        fail("the malformed message was not dead-lettered");
    check_store();
    return W.failure[0] ? -1 : 0;
}

int main(int argc, char **argv)
{
    uint64_t first = 1, count = 20000;
    int one = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            first = strtoull(argv[++i], NULL, 10);
            count = 1;
            one = 1;
        } else if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc) {
            count = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--first") == 0 && i + 1 < argc) {
            first = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--verbose") == 0) {
            verbose = 1;
        } else if (strcmp(argv[i], "--no-batches") == 0) {
            no_batches = 1;
        } else if (strcmp(argv[i], "--no-ordered") == 0) {
            no_ordered = 1;
        } else if (strcmp(argv[i], "--no-replays") == 0) {
            no_replays = 1;
        } else if (strcmp(argv[i], "--break-order") == 0) {
            break_order = 1;
        } else if (strcmp(argv[i], "--stale-token") == 0) {
            stale_token = 1;
        } else {
            fprintf(stderr, "usage: %s [--seeds N] [--first S] | --seed S [--verbose] "
                    "[--no-batches] [--no-ordered] [--no-replays] [--break-order] "
                    "[--stale-token]\n", argv[0]);
            return 2;
        }
    }
    if (getenv("SC_SIM_SEEDS") && !one)
        count = strtoull(getenv("SC_SIM_SEEDS"), NULL, 10);
    if (getenv("SC_SIM_FIRST") && !one)
        first = strtoull(getenv("SC_SIM_FIRST"), NULL, 10);
    sc_log_min_level = verbose ? SC_LOG_DEBUG : SC_LOG_ERROR + 1;
    setup_consumer();
    printf("1..%d\n", one ? 1 : 3);
    if (!one) {
        /* Attempt headers above the clamp are clamped, not reset to 1: a
         * copy that says it ran 5,000,000 times is over max_attempts. */
        memset(&W, 0, sizeof W);
        W.n_events = 1;
        W.poison = -1;
        W.always_retry = 1;
        W.channel = W.next_tag = 1;
        kcfg.max_attempts = 5;
        kcfg.queue_type = "classic";
        snprintf(ids[0], sizeof ids[0], "00000000-0000-4000-8000-000000000001");
        struct worker dw = {.c = &consumer, .io = &sim_io, .items = items,
                            .items_cap = ITEMS_CAP, .reasons = reasons};
        W.n_batch_evs = 1;
        deliver(&dls[0], 0, (struct msg){.ev = 0, .attempt = 1});
        headers[0][0].key = amqp_cstring_bytes(SC_H_ATTEMPTS);
        headers[0][0].value.kind = AMQP_FIELD_KIND_I64;
        headers[0][0].value.value.i64 = 5000000;
        dls[0].env.message.properties._flags = AMQP_BASIC_HEADERS_FLAG;
        dls[0].env.message.properties.headers.num_entries = 1;
        dls[0].env.message.properties.headers.entries = headers[0];
        enum next r = sc_batch_process(&dw, dls, 1);
        ok(r == NEXT_CONTINUE && items[0].attempt == SC_MAX_ATTEMPTS_SEEN && W.dlq[0] == 1 &&
               W.n_delayed == 0,
           "an attempt header of 5000000 is clamped to %d and dead-lettered (attempt %d, dlq %d, "
           "delayed %d)", SC_MAX_ATTEMPTS_SEEN, items[0].attempt, W.dlq[0], W.n_delayed);
        sc_batch_release(&dw);
        /* A retried delivery at attempt 2 below the limit goes through a
         * delay queue, counted once. */
        memset(&W, 0, sizeof W);
        W.n_events = 1;
        W.poison = -1;
        W.always_retry = 1;
        W.channel = W.next_tag = 1;
        deliver(&dls[0], 0, (struct msg){.ev = 0, .attempt = 2});
        r = sc_batch_process(&dw, dls, 1);
        ok(r == NEXT_CONTINUE && W.n_delayed == 1 && W.delayed[0].attempt == 3 && !W.dlq[0],
           "a retry at attempt 2 of 5 goes to a delay queue as attempt 3");
        sc_batch_release(&dw);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t failed = 0, first_failed = 0;
    for (uint64_t s = first; s < first + count; s++) {
        if (run_schedule(s) == 0)
            continue;
        if (!failed++)
            first_failed = s;
        if (failed <= 5)
            printf("# seed %llu: %s\n#   replay: %s --seed %llu --verbose\n", (unsigned long long)s,
                   W.failure, argv[0], (unsigned long long)s);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("# %llu schedules from seed %llu in %.2f s (%.0f/s), %llu failed\n",
           (unsigned long long)count, (unsigned long long)first, secs, (double)count / secs,
           (unsigned long long)failed);
    printf("# batch mode: %llu deliveries of batch-mode messages, %llu returned whole, %llu acked "
           "with some members applied and others copied, %llu member copies confirmed\n",
           stats.batch_deliveries, stats.batch_returned, stats.batch_acked_mixed,
           stats.member_copies);
    printf("# per-key order: %llu ordered schedules, %llu retries in place, %llu deliveries "
           "waited in hand behind their key's head or its delay\n", stats.ordered_schedules,
           stats.in_place_retries, stats.waited_behind);
    printf("# held keys: %llu replays (%llu copies), %llu freed a key, %llu keys held again "
           "after that; while a replay was in flight %llu deliveries waited in hand for it, %llu "
           "were sent behind it\n", stats.replays, stats.replay_copies, stats.freed_by_replay,
           stats.held_again, stats.waited_for_replay, stats.sent_behind);
    if (failed)
        printf("not ok %d - consumer core simulation: %llu of %llu schedules broke an invariant "
               "(first: seed %llu)\n", one ? 1 : 3, (unsigned long long)failed, (unsigned long long)count,
               (unsigned long long)first_failed);
    else
        printf("ok %d - consumer core simulation: %llu schedules, every invariant held\n",
               one ? 1 : 3, (unsigned long long)count);
    return failed ? 1 : 0;
}
