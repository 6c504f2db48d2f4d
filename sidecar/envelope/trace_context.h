/* W3C Trace Context (https://www.w3.org/TR/trace-context/): the
 * `traceparent` and `tracestate` values an event carries from the producer's
 * transaction through the outbox, the relay and the consumer to the handler.
 * One validator for every hop, so the producer refuses exactly what the
 * relay and the consumer would ignore. */
#ifndef SC_TRACE_CONTEXT_H
#define SC_TRACE_CONTEXT_H

#include <stddef.h>

/* version 00: "00-" 32 hex "-" 16 hex "-" 2 hex, lowercase */
#define SC_TRACEPARENT_LEN 55
#define SC_TRACESTATE_MAX 512
#define SC_TRACESTATE_MEMBERS_MAX 32

/* 1 when s[0..n) is a version-00 traceparent with a trace id and a parent
 * id that are not all zeros; 0 with the reason in why otherwise. */
int sc_traceparent_check(const char *s, size_t n, char *why, size_t why_len);

/* 1 when s[0..n) is a tracestate list: at most 32 `key=value` members
 * separated by commas (optional blanks around them; empty members allowed),
 * keys as the grammar says and each once, at most 512 characters; 0 with
 * the reason in why otherwise. */
int sc_tracestate_check(const char *s, size_t n, char *why, size_t why_len);

/* The trace id of a valid traceparent: 32 hex digits and a NUL. */
void sc_trace_id_of(const char *traceparent, char out[33]);

/* The parent (span) id of a valid traceparent: 16 hex digits and a NUL. */
void sc_trace_parent_id_of(const char *traceparent, char out[17]);

/* A new random span id, 16 lowercase hex digits (never all zeros) and a
 * NUL. Returns 0, or -1 when the system has no randomness to give. */
int sc_span_id_new(char out[17]);

#endif
