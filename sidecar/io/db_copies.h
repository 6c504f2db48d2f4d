/* consumer_tenant_copy (sql/schema/015): the copies an ordered consumer
 * with tenants sent round, one row per copy out, in mysql.url's database.
 * Every statement ends its own transaction. */
#ifndef SC_DB_COPIES_H
#define SC_DB_COPIES_H

#include <stdint.h>

#include "io/db.h"

struct sc_copy_row {
    char event_id[37];
    int64_t rank;
    char mark[97];
};

/* The row of event_id (its rank and the ring's mark), written; an existing
 * one is moved to rank only when move is set. Returns 0, or -1 with e
 * filled. */
int sc_db_copy_put(struct sc_db *db, const char *consumer, const char *queue, const char *tenant,
                   const char *event_id, int64_t rank, const char *mark, int move,
                   struct sc_db_err *e);

/* Sets the rank and mark of each row of rows[0..n) (by event id), in one
 * transaction. Returns 0, or -1 with e filled (nothing changed). */
int sc_db_copy_renumber(struct sc_db *db, const char *consumer, const char *queue,
                        const char *tenant, const struct sc_copy_row *rows, int n,
                        struct sc_db_err *e);

/* Deletes the rows of ids[0..n). Returns 0, or -1 with e filled. */
int sc_db_copy_delete(struct sc_db *db, const char *consumer, const char *queue,
                      const char *tenant, const char *const *ids, int n, struct sc_db_err *e);

/* Deletes the row of rank (a copy given up on). Returns 0, or -1. */
int sc_db_copy_delete_rank(struct sc_db *db, const char *consumer, const char *queue,
                           const char *tenant, int64_t rank, struct sc_db_err *e);

/* Every row of (consumer, queue, tenant), rank first, at most cap: *rows
 * (free it) and *n. Returns 0, or -1 with e filled. */
int sc_db_copy_load(struct sc_db *db, const char *consumer, const char *queue, const char *tenant,
                    int cap, struct sc_copy_row **rows, int *n, struct sc_db_err *e);

#endif
