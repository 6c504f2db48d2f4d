/* Name-based UUIDs (RFC 4122 version 5, SHA-1) for ids that are not UUIDs
 * (a plain message_id; a CloudEvents id with its source): the same name
 * always gives the same id, so a repeat meets its claim. */
#ifndef SC_UUID_V5_H
#define SC_UUID_V5_H

#include <stddef.h>

/* The namespace of every id the sidecar derives from a message_id. Fixed:
 * changing it would make every repeat of such a message look new. */
#define SC_MESSAGE_ID_NAMESPACE "e14e4d96-96cb-4472-bb74-4bfd5af7215d"

/* UUIDv5(namespace, name[0..len)) in canonical lowercase text (37 bytes with
 * the NUL). namespace is a canonical UUID; returns 0, or -1 when it is not. */
int sc_uuid_v5(const char *namespace_uuid, const void *name, size_t len, char out[37]);

/* UUIDv5 of the name a, a NUL byte, b: a name of two parts (neither holding
 * a NUL) that no other pair spells. Returns 0, or -1 as sc_uuid_v5. */
int sc_uuid_v5_pair(const char *namespace_uuid, const void *a, size_t a_len, const void *b,
                    size_t b_len, char out[37]);

/* The id of a message_id: its canonical form when it is a UUID in any RFC
 * 4122 spelling (returns 0), else its UUIDv5 under SC_MESSAGE_ID_NAMESPACE
 * (returns 1). */
int sc_message_id_to_event_id(const char *message_id, size_t len, char out[37]);

#endif
