/* consumer_held_key (sql/schema/010_consumer_held_key.sql): the keys an
 * ordered consumer with "on_dead_letter": "hold" holds back, so that every
 * instance and every restart holds them too. Each statement that changes a
 * row commits at once: a hold must stand before the dead letter that caused
 * it is acked. */
#ifndef SC_DB_HELD_H
#define SC_DB_HELD_H

#include <stdint.h>

#include "io/db.h"

/* A held key as the consumer reads it. */
struct sc_held_row {
    int found;
    char held_behind[37];
    char replay_until[37];  /* empty: no replay in flight */
    char held_in_replay[37];
    int replay_done;        /* replay_until is consumed: the replay ended */
};

/* Reads the rows of keys[0..n) for consumer into rows[0..n) and ends the
 * read's transaction. Returns 0, or -1 with e filled. */
int sc_db_held_read(struct sc_db *db, const char *consumer, const char *const *keys, int n,
                    struct sc_held_row *rows, struct sc_db_err *e);

/* Records that event_id of key was dead-lettered: the key is held (behind
 * event_id when it was not held, or when event_id is a replayed event that
 * failed again: the replay ends there). *seq gets the key's next hold
 * sequence number. Returns 0, or -1 with e filled (rolled back). */
int sc_db_held_hold(struct sc_db *db, const char *consumer, const char *key, const char *event_id,
                    int replayed, int64_t *seq, struct sc_db_err *e);

/* An event of key arrived while a replay of it was in flight: the key stays
 * held behind it once the replay ends. Returns 0, or -1. */
int sc_db_held_in_replay(struct sc_db *db, const char *consumer, const char *key,
                         const char *event_id, struct sc_db_err *e);

/* The replay of key ended with event_id applied (event_id NULL: whatever
 * replay_until is, known to be consumed): the key is released, or held
 * behind what arrived during the replay. Returns 0, or -1. */
int sc_db_held_release(struct sc_db *db, const char *consumer, const char *key,
                       const char *event_id, struct sc_db_err *e);

/* sidecar dlq replay --key: event_id "pending" opens a replay of key (from
 * now on the consumer holds whatever else of the key it meets and keeps the
 * key held behind it); the last replayed event's id then says which effect
 * ends the replay. Returns 1 when marked, 0 when the key is not held, -1
 * with e filled. */
int sc_db_held_start_replay(struct sc_db *db, const char *consumer, const char *key,
                            const char *event_id, struct sc_db_err *e);

#endif
