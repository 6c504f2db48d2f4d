/* consumer_held_key (sql/schema/010_consumer_held_key.sql, 011): the keys an
 * ordered consumer with "on_dead_letter": "hold" holds back, so that every
 * instance and every restart holds them too. Each statement that changes a
 * row commits at once: a hold must stand before the dead letter that caused
 * it is acked. A released key keeps its row (held_behind NULL): hold_seq,
 * which numbers the key's dead letters, never starts again. */
#ifndef SC_DB_HELD_H
#define SC_DB_HELD_H

#include <stdint.h>

#include "io/db.h"

/* A held key as the consumer reads it. */
struct sc_held_row {
    int found;
    char held_behind[37];
    char replay_until[37];  /* empty: no replay in flight */
    int replay_done;        /* replay_until is consumed: the replay ended */
};

/* Reads the rows of keys[0..n) for consumer into rows[0..n) and ends the
 * read's transaction. Returns 0, or -1 with e filled. */
int sc_db_held_read(struct sc_db *db, const char *consumer, const char *const *keys, int n,
                    struct sc_held_row *rows, struct sc_db_err *e);

/* Records that event_id of key was dead-lettered: the key is held (behind
 * event_id unless it already was; a replayed copy failing again during its
 * replay ends the replay and holds the key behind itself); during a replay
 * the key is noted to stay held behind event_id. *seq gets the dead
 * letter's number in the key's arrival order: prior_seq when it has one
 * (> 0: a replayed copy), else the next. Returns 0, or -1 with e filled
 * (rolled back). */
int sc_db_held_hold(struct sc_db *db, const char *consumer, const char *key, const char *event_id,
                    int replayed, int64_t prior_seq, int64_t *seq, struct sc_db_err *e);

enum sc_held_release {
    SC_HELD_RELEASE_ERROR = -1,
    SC_HELD_NOT_ENDED,  /* replay_until is not (any longer) the key's replay end */
    SC_HELD_RELEASED,
    SC_HELD_STAYS,      /* held behind what arrived during the replay (behind) */
};

/* The replay of key whose last copy is replay_until ended (that copy
 * applied, or known consumed): the key goes free, or stays held behind what
 * arrived during the replay (its id into behind, room 37). */
int sc_db_held_release(struct sc_db *db, const char *consumer, const char *key,
                       const char *replay_until, char *behind, struct sc_db_err *e);

/* What `sidecar dlq replay --key` reads of a key's row. */
struct sc_held_state {
    char held_behind[37];  /* empty: not held */
    int64_t hold_seq;      /* the highest number given to a dead letter of the key */
    char replay_until[37]; /* empty, SC_REPLAY_PENDING, or the last copy of a replay */
    int replay_done;       /* replay_until names a consumed event */
};

#define SC_REPLAY_PENDING "pending"

enum sc_replay_open {
    SC_REPLAY_OPEN_ERROR = -1,
    SC_REPLAY_NOT_HELD,   /* no hold: a plain replay of the key's dead letters */
    SC_REPLAY_OPENED,     /* marked pending: the consumer runs replayed copies */
    SC_REPLAY_IN_FLIGHT,  /* an earlier replay's copies are still on their way */
};

/* Opens a replay of key: marks it pending when held and no other replay's
 * copies are on their way. Fills st. */
enum sc_replay_open sc_db_held_open_replay(struct sc_db *db, const char *consumer, const char *key,
                                           struct sc_held_state *st, struct sc_db_err *e);

enum sc_replay_close {
    SC_REPLAY_CLOSE_ERROR = -1,
    SC_REPLAY_NAMED,      /* last_id ends the replay: publish the copies */
    SC_REPLAY_INCOMPLETE, /* the browse missed dead letters of the key: mark undone */
    SC_REPLAY_TAKEN,      /* the pending mark is gone: another replay, or a failure, ended it */
};

/* After the browse: names last_id as the replay's end when the pending mark
 * still stands and seen_seq (the highest x-sidecar-hold-seq the browse
 * found for the key) reaches the row's hold_seq; otherwise undoes the mark
 * (incomplete) or leaves the row alone (taken). Fills st. */
enum sc_replay_close sc_db_held_close_replay(struct sc_db *db, const char *consumer,
                                             const char *key, int64_t seen_seq,
                                             const char *last_id, struct sc_held_state *st,
                                             struct sc_db_err *e);

/* `sidecar dlq release --key`: frees key whatever its dead letters (the
 * operator gives them up). Returns 1 when it was held, 0 when not, -1. */
int sc_db_held_release_now(struct sc_db *db, const char *consumer, const char *key,
                           struct sc_held_state *st, struct sc_db_err *e);

#endif
