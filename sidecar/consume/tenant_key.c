/* A delivery's tenant, read from the message as tenants.key says. */
#include "consume/tenant_key.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consume/republish.h"
#include "envelope/json_span.h"
#include "envelope/message.h"
#include "io/amqp_conn.h"
#include "tenant.h"

/* The binary mode's header prefixes (the AMQP binding and its variants, as
 * the envelope reads them). */
static const char *const ce_prefixes[] = {"cloudEvents:", "cloudEvents_", "ce-", "ce_", NULL};

/* Copies v[0..n) to tenant as the value found, or says why not. */
static int take(const char *v, size_t n, const char *where, char *tenant, char *why,
                size_t why_len)
{
    if (n == 0 || n > SC_TENANT_MAX) {
        snprintf(why, why_len, "no tenant: %s is %s", where, n ? "longer than 48 bytes" : "empty");
        return -1;
    }
    memcpy(tenant, v, n);
    tenant[n] = 0;
    return 0;
}

static int from_header(const amqp_envelope_t *env, const char *name, char *tenant, char *why,
                       size_t why_len)
{
    amqp_bytes_t b = sc_amqp_header_bytes(sc_delivery_headers(env), name);
    if (!b.len) {
        snprintf(why, why_len, "no tenant: no header %.128s", name);
        return -1;
    }
    return take(b.bytes, b.len, "the header", tenant, why, why_len);
}

/* The tenant of one parsed event. */
static int from_event(const char *key, const amqp_envelope_t *env, const struct sc_parsed_event *ev,
                      char *tenant, char *why, size_t why_len)
{
    if (strcmp(key, "subject") == 0) {
        const char *s = ev->ev.subject;
        if (!s) {
            snprintf(why, why_len, "no tenant: the event has no subject");
            return -1;
        }
        return take(s, strlen(s), "the subject", tenant, why, why_len);
    }
    if (strncmp(key, "extension:", 10) == 0) {
        const char *name = key + 10;
        json_t *v = ev->json ? json_object_get((json_t *)ev->json, name) : NULL;
        if (v && json_is_string(v))
            return take(json_string_value(v), json_string_length(v), "the extension", tenant, why,
                        why_len);
        if (v) {
            snprintf(why, why_len, "no tenant: extension %s is not a string", name);
            return -1;
        }
        for (const char *const *p = ce_prefixes; *p; p++) {
            char h[160];
            snprintf(h, sizeof h, "%s%s", *p, name);
            amqp_bytes_t b = sc_amqp_header_bytes(sc_delivery_headers(env), h);
            if (b.len)
                return take(b.bytes, b.len, "the extension", tenant, why, why_len);
        }
        snprintf(why, why_len, "no tenant: the event has no extension attribute %s", name);
        return -1;
    }
    /* data/<pointer>: a string (its text as written) or a number. */
    const char *v, *kind;
    size_t n;
    int found = sc_json_pointer_scalar(ev->ev.data_json, ev->ev.data_json_len, key + 4, &v, &n, &kind);
    if (found == 0) {
        snprintf(why, why_len, "no tenant: %.200s names nothing", key);
        return -1;
    }
    if (found < 0) {
        snprintf(why, why_len, "no tenant: %.200s names %s, not a string or a number", key, kind);
        return -1;
    }
    return take(v, n, key, tenant, why, why_len);
}

/* The tenant of a message the batch dead-letters as malformed (or too
 * large), for its dead letter only: read where no parsed event is needed
 * (an AMQP header, a binary mode header, the structured body's member when
 * the body is a JSON object). Returns 0 with tenant set, or -1. */
static int from_malformed(const char *key, const amqp_envelope_t *env, int read_body,
                          char *tenant)
{
    char why[160];
    if (strncmp(key, "header:", 7) == 0)
        return from_header(env, key + 7, tenant, why, sizeof why);
    if (strncmp(key, "extension:", 10) == 0)
        for (const char *const *p = ce_prefixes; *p; p++) {
            char h[160];
            snprintf(h, sizeof h, "%s%s", *p, key + 10);
            amqp_bytes_t b = sc_amqp_header_bytes(sc_delivery_headers(env), h);
            if (b.len)
                return take(b.bytes, b.len, "the extension", tenant, why, sizeof why);
        }
    if (!read_body)
        return -1;
    json_t *root = json_loadb(env->message.body.bytes, env->message.body.len, 0, NULL);
    int rc = -1;
    if (json_is_object(root)) {
        if (strcmp(key, "subject") == 0 || strncmp(key, "extension:", 10) == 0) {
            json_t *v = json_object_get(root, key[0] == 's' ? "subject" : key + 10);
            if (json_is_string(v))
                rc = take(json_string_value(v), json_string_length(v), "the member", tenant,
                          why, sizeof why);
        } else {
            char *data = json_dumps(json_object_get(root, "data"), JSON_COMPACT | JSON_ENCODE_ANY);
            const char *v, *kind;
            size_t n;
            if (data && sc_json_pointer_scalar(data, strlen(data), key + 4, &v, &n, &kind) > 0)
                rc = take(v, n, key, tenant, why, sizeof why);
            free(data);
        }
    }
    json_decref(root);
    return rc;
}

/* A malformed message's tenant as from_malformed() reads it, kept only
 * when the names pattern accepts it. */
static enum sc_tenant_kind open_tenant(const struct sc_tenants_config *t, const regex_t *re,
                                       const amqp_envelope_t *env, int read_body, char *tenant)
{
    char refused[200];
    if (from_malformed(t->key, env, read_body, tenant) ||
        !sc_tenant_name_ok(re, tenant, refused, sizeof refused))
        tenant[0] = 0;
    return SC_TENANT_OPEN;
}

enum sc_tenant_kind sc_tenant_read(const struct sc_tenants_config *t, const regex_t *re,
                                   const struct sc_consumer_config *k, const amqp_envelope_t *env,
                                   char *tenant, char *why, size_t why_len)
{
    tenant[0] = why[0] = 0;
    if (k->max_message_bytes > 0 && env->message.body.len > (size_t)k->max_message_bytes)
        return open_tenant(t, re, env, 0, tenant); /* the batch dead-letters it unread */
    int found;
    if (strncmp(t->key, "header:", 7) == 0) {
        found = from_header(env, t->key + 7, tenant, why, why_len) == 0;
    } else {
        /* The envelope is read here once more than the batch reads it: the
         * tenant decides which batch the delivery joins. */
        const struct sc_message m = {.props = &env->message.properties, .body = env->message.body,
                                     .exchange = env->exchange, .routing_key = env->routing_key};
        const struct sc_envelope_opts o = sc_envelope_opts_for(k);
        struct sc_message_events evs;
        char reason[512];
        if (sc_message_open(&m, &o, &evs, reason, sizeof reason)) {
            sc_message_events_free(&evs);
            return open_tenant(t, re, env, 1, tenant);
        }
        if (evs.n == 0) {
            sc_message_events_free(&evs);
            return SC_TENANT_OPEN; /* an empty batch: nothing runs, acked */
        }
        found = 1;
        for (int i = 0; i < evs.n && found; i++) {
            struct sc_parsed_event ev;
            char one[SC_TENANT_MAX + 1];
            if (sc_message_event(&m, &o, &evs, i, &ev, reason, sizeof reason)) {
                sc_message_events_free(&evs);
                /* malformed: the batch says why */
                return open_tenant(t, re, env, 1, tenant);
            }
            found = from_event(t->key, env, &ev, one, why, why_len) == 0;
            if (found && i == 0)
                memcpy(tenant, one, sizeof one);
            else if (found && strcmp(one, tenant) != 0) {
                snprintf(why, why_len, "members of one batch-mode message name two tenants "
                         "(%s, %s)", tenant, one);
                found = 0;
            }
            sc_event_free(&ev);
        }
        sc_message_events_free(&evs);
    }
    if (!found)
        return SC_TENANT_REFUSED;
    char refused[200];
    if (!sc_tenant_name_ok(re, tenant, refused, sizeof refused)) {
        snprintf(why, why_len, "tenant refused: %s", refused);
        return SC_TENANT_REFUSED;
    }
    return SC_TENANT_FOUND;
}
