/* Member names in JSON text: I-JSON (RFC 7493) requires the names of an
 * object to be unique, and a consumer that parses `data` with a strict
 * parser refuses text where they are not (MariaDB's JSON type stores such
 * text as written). One rule for the relay and the producer helper: a
 * payload with a repeated name never becomes a message. */
#ifndef SC_JSON_NAMES_H
#define SC_JSON_NAMES_H

#include <stddef.h>

/* For text that sc_json_text_valid() accepts: returns 1 when some object has
 * two members of the same name (compared after decoding escapes, so "a" and
 * "\u0061" are the same name), copying the first such name into name
 * (non-printable bytes shown as '?', cut to name_len - 1); 0 when every
 * object's names are distinct; -1 when out of memory. The cost is
 * O(n log n) in the number of names, at any nesting depth. */
int sc_json_duplicate_name(const char *s, size_t len, char *name, size_t name_len);

#endif
