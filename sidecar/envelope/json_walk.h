/* Inside the JSON scanner: a walk over the children of one object or array
 * (json_span.c), for the member, array and pointer lookups built on it. */
#ifndef SC_JSON_WALK_H
#define SC_JSON_WALK_H

#include <stddef.h>

struct sc_json_walk {
    const char *p, *end;
    int object;
    int started;
};

/* Opens the container that starts at p (after whitespace). Returns 0, or
 * -1 when no object or array starts there. */
int sc_json_walk_open(struct sc_json_walk *w, const char *p, const char *end);

/* The next child: 1 with its key token (objects: quotes included) and its
 * value's span, 0 once the container closed (the walk after it), -1 when
 * the text is not valid JSON. */
int sc_json_walk_next(struct sc_json_walk *w, const char **key, size_t *key_len, const char **v,
                      const char **v_end);

/* 1 when only whitespace is left after the walk's container. */
int sc_json_walk_ends_text(const struct sc_json_walk *w);

/* 1 when the key token (quotes included, valid) spells key, escapes decoded. */
int sc_json_key_is(const char *tok, size_t tok_len, const char *key);

#endif
