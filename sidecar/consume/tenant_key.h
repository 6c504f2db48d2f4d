/* A delivery's tenant (tenants.key), read before it joins a batch: the
 * tenant decides which database the batch's transaction runs in. */
#ifndef SC_CONSUME_TENANT_KEY_H
#define SC_CONSUME_TENANT_KEY_H

#include <regex.h>
#include <stddef.h>

#include "config.h"
#include "io/sc_rabbitmq.h"

/* What reading a delivery's tenant found. */
enum sc_tenant_kind {
    SC_TENANT_FOUND,   /* tenant set: a name tenants.names accepts */
    SC_TENANT_REFUSED, /* none, or a refused name: dead-lettered with why, never run */
    SC_TENANT_OPEN,    /* the message is malformed (or too large) as a message: the batch
                          dead-letters it as such, no tenant needed; tenant set (else "")
                          when it could still be read for the dead letter, from an AMQP
                          header, a binary mode header or the member of a body that is a
                          JSON object, and the names pattern accepts it */
};

/* The tenant of env for consumer k under t (names compiled in re): the
 * subject, a string or number at data/<pointer>, a CloudEvents extension
 * attribute (the structured body's member or a binary mode header) or an
 * AMQP header. Every member of a batch-mode message must name the same
 * tenant. tenant holds SC_TENANT_MAX + 1 bytes. */
enum sc_tenant_kind sc_tenant_read(const struct sc_tenants_config *t, const regex_t *re,
                                   const struct sc_consumer_config *k, const amqp_envelope_t *env,
                                   char *tenant, char *why, size_t why_len);

#endif
