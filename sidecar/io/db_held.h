/* Held keys of an ordered consumer with "on_dead_letter": "hold"
 * (sql/schema/010_consumer_held_key.sql, 011_consumer_held_event.sql), so
 * that every instance and every restart holds them too. consumer_held_key:
 * per key, the counter that numbers its dead letters in arrival order
 * (never reset) and the token of its current replay. consumer_held_event:
 * per dead-lettered event of the key, its number. A key is held while one of
 * its events there is not consumed, behind the first of them. Each statement
 * that changes a row commits at once: a hold must stand before the dead
 * letter that caused it is acked. */
#ifndef SC_DB_HELD_H
#define SC_DB_HELD_H

#include <stdint.h>

#include "io/db.h"

/* A held key as the consumer reads it. */
struct sc_held_row {
    int found;              /* held */
    char held_behind[37];   /* its first held event not consumed */
    char replay_token[37];  /* the current replay's token, empty: none */
};

/* Reads keys[0..n) of consumer into rows[0..n) and ends the read's
 * transaction. Returns 0, or -1 with e filled. */
int sc_db_held_read(struct sc_db *db, const char *consumer, const char *const *keys, int n,
                    struct sc_held_row *rows, struct sc_db_err *e);

/* Records that event_id of key was dead-lettered: the key is held. The
 * event keeps the number it had (a copy dead-lettered again, a late
 * duplicate), else gets the key's next; *seq gets it. token: the replay
 * token of a copy that ran and failed again ("" for any other dead letter):
 * when it is the key's current replay's, that replay ends there; a key with
 * no held event left has no replay either (a token is cleared). current
 * (room 37) gets the key's replay token as the hold commits ("" for none).
 * Returns 0, or -1 with e filled (rolled back). */
int sc_db_held_hold(struct sc_db *db, const char *consumer, const char *key, const char *event_id,
                    const char *token, int64_t *seq, char *current, struct sc_db_err *e);

/* Forgets key's held events that are consumed, then says whether any is
 * left (1, first (room 37) gets the first of them; 0: the key is free, and
 * its replay token is cleared in the same transaction), or -1 with e
 * filled. Commits. */
long sc_db_held_left(struct sc_db *db, const char *consumer, const char *key, char *first,
                     struct sc_db_err *e);

/* One held event of a key, for `sidecar dlq replay --key`. */
struct sc_held_event {
    char event_id[37];
    int64_t seq;
};

/* Opens the transaction that names a replay: locks the key's row and reads
 * its held events not consumed, in arrival order, into *out (malloc'd, *n;
 * the caller frees). Returns 0 (*n may be 0: not held), or -1 with e filled
 * (rolled back). Ends with sc_db_held_name_replay or a rollback. */
int sc_db_held_lock_events(struct sc_db *db, const char *consumer, const char *key,
                           struct sc_held_event **out, int *n, struct sc_db_err *e);

/* In the transaction sc_db_held_lock_events opened: token becomes the key's
 * current replay (the consumer runs copies carrying it, and holds any other
 * copy), and the key's consumed events are forgotten. Commits. Returns 0, or
 * -1 with e filled (rolled back). */
int sc_db_held_name_replay(struct sc_db *db, const char *consumer, const char *key,
                           const char *token, struct sc_db_err *e);

/* `sidecar dlq release --key`: forgets every held event of key and its
 * replay (the operator gives them up). Returns how many were not consumed
 * (0: it was not held), or -1 with e filled. */
long sc_db_held_release(struct sc_db *db, const char *consumer, const char *key,
                        struct sc_db_err *e);

#endif
