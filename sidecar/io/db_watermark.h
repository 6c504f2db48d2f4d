/* The binlog relay's watermark, as its readers (the relay's and the
 * console's gauges, inspect, purge) see it: relay_checkpoint's
 * published_created_before (sql/schema/014). Every outbox row created
 * before it is published or FAILED, whatever its status column says: the
 * binlog relay leaves published rows PENDING. */
#ifndef SC_DB_WATERMARK_H
#define SC_DB_WATERMARK_H

#include <stddef.h>

#include "db.h"

#define SC_DB_WATERMARK_LEN 32 /* "YYYY-MM-DD HH:MM:SS.ffffff" and its end */

/* Reads the watermark into out. Returns 1 when one is stored, 0 when none
 * is (no relay_checkpoint, no such column, no grant to read it, no row,
 * NULL: every PENDING row is then pending, as before 014), -1 with e. */
int sc_db_outbox_watermark(struct sc_db *db, char *out, size_t len, struct sc_db_err *e);

/* The same as "YYYY-MM-DDTHH:MM:SS.ffffffZ", the reports' form of a time
 * (which compares as text with created_at in that form). */
int sc_db_outbox_watermark_iso(struct sc_db *db, char *out, size_t len, struct sc_db_err *e);

#endif
