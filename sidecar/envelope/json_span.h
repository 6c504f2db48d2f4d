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

/* 1 when s[0..len) is exactly one valid JSON value (RFC 8259, UTF-8;
 * surrounding whitespace allowed), 0 otherwise. */
int sc_json_text_valid(const char *s, size_t len);

#endif
