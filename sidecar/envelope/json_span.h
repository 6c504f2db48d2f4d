/* A strict JSON (RFC 8259) scanner that validates text and finds where a
 * top-level member's value lies in it, without converting anything: the envelope's `data` is
 * handed on exactly as it was written (numbers of any size or precision
 * keep their digits), where a parser's doubles and 64-bit integers would
 * change or refuse it. Values may nest to any depth: the scan is a loop
 * with a bit of memory per open level, not a recursion. */
#ifndef SC_JSON_SPAN_H
#define SC_JSON_SPAN_H

#include <stddef.h>

/* Validates body[0..len) as one JSON object and finds the value of the
 * top-level member `key` (its name compared with escapes decoded). Returns 1 and sets [*start, *end) when present,
 * 0 when absent, -1 when the text is not a valid JSON object (or `key`
 * occurs twice at the top level). */
int sc_json_member_span(const char *body, size_t len, const char *key, size_t *start, size_t *end);

/* Validates body[0..len) as one JSON array and writes the span [start,
 * end) of each element into spans[0..max). Returns the number of elements
 * (also those beyond max), or -1 when the text is not a valid JSON array. */
long sc_json_array_spans(const char *body, size_t len, size_t (*spans)[2], size_t max);

/* 1 when pointer is an RFC 6901 JSON Pointer: "" (the whole value) or
 * "/"-separated reference tokens in which '~' is only ever "~0" or "~1". */
int sc_json_pointer_valid(const char *pointer);

/* The value an RFC 6901 pointer names in the JSON text [0..len): 1 with its
 * span [*start, *end), 0 when it names nothing (a missing key, an index out
 * of range, a scalar in the way), -1 when the pointer is not valid or the
 * text is not one valid JSON value. Array tokens are decimal indexes
 * without leading zeros; of duplicate keys, the last one counts. */
int sc_json_pointer_span(const char *text, size_t len, const char *pointer, size_t *start,
                         size_t *end);

/* The string or number a pointer names, as a key: a string's text between
 * its quotes (its escapes as written) or a number's digits, in *value,
 * *value_len. 1 when found, 0 when the pointer names nothing (or is not
 * valid), -1 when it names another kind of value, whose name ("an object",
 * "an array", "null", "a boolean") goes to *kind. */
int sc_json_pointer_scalar(const char *text, size_t len, const char *pointer, const char **value,
                           size_t *value_len, const char **kind);

/* 1 when s[0..len) is exactly one valid JSON value (RFC 8259, UTF-8;
 * surrounding whitespace allowed), 0 otherwise. */
int sc_json_text_valid(const char *s, size_t len);

#endif
