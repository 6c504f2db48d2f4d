/* UUIDs as text: the one parser of the envelope's id (consumer), the
 * outbox row's event_id (relay) and the producer helper's ids. No
 * dependencies, so the producer library compiles it in too. */
#ifndef SC_UUID_TEXT_H
#define SC_UUID_TEXT_H

#include <stddef.h>

/* Accepts any RFC 4122 spelling of a UUID: hex digits of either case in
 * 8-4-4-4-12 groups, optionally in braces or after "urn:uuid:". Writes the
 * canonical lowercase form (37 bytes with the NUL) and returns 0, or -1. */
int sc_uuid_canonical(const char *s, size_t len, char out[37]);

/* Returns 1 when s is a canonical lowercase UUID (8-4-4-4-12 hex). */
int sc_is_canonical_uuid(const char *s, size_t len);

#endif
