#include "republish.h"

#include "consume/order.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct headers {
    amqp_table_entry_t *e;
    int n, cap;
};

/* Starts from the delivery's headers minus the keys the sidecar rewrites and
 * the broker's own delivery count: a copy is a new message, and a quorum
 * queue shows a published x-delivery-count on its first delivery as if the
 * copy had been delivered that often (the guard would dead-letter it). */
static int named(amqp_bytes_t key, const char *name)
{
    return key.len == strlen(name) && memcmp(key.bytes, name, key.len) == 0;
}

static int headers_from(struct headers *h, const amqp_table_t *old)
{
    int n_old = old ? old->num_entries : 0;
    h->cap = n_old + 8;
    h->n = 0;
    if (!(h->e = calloc((size_t)h->cap, sizeof *h->e)))
        return -1;
    static const char *const rewritten[] = {SC_H_ATTEMPTS, SC_H_REASON, SC_H_CONSUMER, SC_H_FAILED_AT,
                                            SC_H_LAST_ERROR, SC_H_BATCH_INDEX, SC_H_TENANT,
                                            "x-delivery-count"};
    for (int i = 0; i < n_old; i++) {
        const amqp_table_entry_t *e = &old->entries[i];
        int drop = 0;
        for (size_t j = 0; j < sizeof rewritten / sizeof *rewritten; j++)
            drop |= named(e->key, rewritten[j]);
        if (!drop)
            h->e[h->n++] = *e;
    }
    return 0;
}

static void headers_str(struct headers *h, const char *key, amqp_bytes_t val)
{
    amqp_table_entry_t *e = &h->e[h->n++];
    e->key = amqp_cstring_bytes(key);
    e->value.kind = AMQP_FIELD_KIND_UTF8;
    e->value.value.bytes = val;
}

static void headers_int(struct headers *h, const char *key, int64_t val)
{
    amqp_table_entry_t *e = &h->e[h->n++];
    e->key = amqp_cstring_bytes(key);
    e->value.kind = AMQP_FIELD_KIND_I64;
    e->value.value.i64 = val;
}

const amqp_table_t *sc_delivery_headers(const amqp_envelope_t *env)
{
    const amqp_basic_properties_t *p = &env->message.properties;
    return (p->_flags & AMQP_BASIC_HEADERS_FLAG) ? &p->headers : NULL;
}

/* The first exchange and routing key the message was published with: every
 * copy carries them (a copy of a copy keeps the first). */
static void headers_original_route(struct headers *h, const amqp_envelope_t *env)
{
    const amqp_table_t *old = sc_delivery_headers(env);
    if (!sc_amqp_header_bytes(old, SC_H_ORIG_EXCHANGE).len &&
        !sc_amqp_header_bytes(old, SC_H_ORIG_ROUTING_KEY).len) {
        headers_str(h, SC_H_ORIG_EXCHANGE, env->exchange);
        headers_str(h, SC_H_ORIG_ROUTING_KEY, env->routing_key);
    }
}

/* Publishes a copy of the delivery (or of one member of it) to the default
 * exchange with routing key `queue` and the given headers, under confirms.
 * Returns 0 when confirmed. */
static int republish_via(struct sc_amqp *out, const amqp_envelope_t *env,
                         const struct sc_member_copy *member, const char *exchange,
                         const char *queue, struct headers *h, const struct sc_log_fields *lf)
{
    amqp_basic_properties_t props = env->message.properties;
    amqp_bytes_t body = env->message.body;
    if (member) {
        /* The batch's content type, message_id and type name the batch: the
         * copy is a structured event of its own. */
        body = member->body;
        props._flags |= AMQP_BASIC_CONTENT_TYPE_FLAG;
        props.content_type = amqp_cstring_bytes("application/cloudevents+json");
        props._flags &= ~(AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_TYPE_FLAG |
                          AMQP_BASIC_CONTENT_ENCODING_FLAG);
        if (member->id) {
            props._flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
            props.message_id = amqp_cstring_bytes(member->id);
        }
        if (member->type) {
            props._flags |= AMQP_BASIC_TYPE_FLAG;
            props.type = amqp_cstring_bytes(member->type);
        }
        headers_int(h, SC_H_BATCH_INDEX, member->index);
    }
    props._flags |= AMQP_BASIC_HEADERS_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG;
    /* The publisher's per-message TTL must not follow the copy: it would
     * silently expire out of the DLQ, or cut a retry delay short. */
    sc_amqp_props_clear_ttl(&props);
    props.headers.num_entries = h->n;
    props.headers.entries = h->e;
    props.delivery_mode = AMQP_DELIVERY_PERSISTENT;
    struct sc_publish msg = {.exchange = exchange, .routing_key = queue, .props = &props,
                             .body = body, .mandatory = 1};
    char err[256] = "";
    int acked = sc_amqp_publish_confirmed(out, &msg, 1, 10000, err, sizeof err);
    if (acked == 1)
        return 0;
    sc_log(SC_LOG_ERROR, lf, "publish to %s not confirmed (%s%s%s): the delivery is not acked",
           queue, sc_publish_result_name(msg.result), err[0] ? ": " : "", err);
    return -1;
}

static int republish(struct sc_amqp *out, const amqp_envelope_t *env,
                     const struct sc_member_copy *member, const char *queue, struct headers *h,
                     const struct sc_log_fields *lf)
{
    return republish_via(out, env, member, "", queue, h, lf);
}

int sc_republish_behind_replay(struct sc_amqp *out, const struct sc_consumer_config *k,
                               const amqp_envelope_t *env, const char *key, const char *token,
                               int64_t hold_seq, const struct sc_log_fields *lf)
{
    struct headers h;
    if (headers_from(&h, sc_delivery_headers(env)))
        return -1;
    /* The copy takes the key's current replay token, and its place. */
    int j = 0;
    for (int i = 0; i < h.n; i++) {
        amqp_bytes_t name = h.e[i].key;
        if (!named(name, SC_H_REPLAY_KEY) && !named(name, SC_H_REPLAY_TOKEN) &&
            !named(name, SC_H_HOLD_SEQ) && !named(name, SC_H_REPLAY_ROUND))
            h.e[j++] = h.e[i];
    }
    h.n = j;
    headers_str(&h, SC_H_REPLAY_KEY, amqp_cstring_bytes(key));
    headers_str(&h, SC_H_REPLAY_TOKEN, amqp_cstring_bytes(token));
    headers_int(&h, SC_H_HOLD_SEQ, hold_seq);
    headers_int(&h, SC_H_REPLAY_ROUND,
                sc_amqp_header_int(sc_delivery_headers(env), SC_H_REPLAY_ROUND, 0) + 1);
    /* It comes back through the default or the partitions' exchange: a
     * plain message's type and source are read from these. */
    headers_original_route(&h, env);
    char ex[300] = "";
    if (k->ordering.partitions > 1)
        sc_amqp_ordering_exchange_name(k, ex, sizeof ex);
    int rc = republish_via(out, env, NULL, ex, ex[0] ? "" : k->queue, &h, lf);
    free(h.e);
    return rc;
}

int sc_republish_dead(struct sc_amqp *out, const struct sc_consumer_config *k,
                      const amqp_envelope_t *env, const struct sc_member_copy *member,
                      int attempt, const char *why, int64_t hold_seq, const char *tenant,
                      const struct sc_log_fields *lf)
{
    struct headers h;
    char failed_at[64];
    if (headers_from(&h, sc_delivery_headers(env)))
        return -1;
    sc_log_timestamp(failed_at, sizeof failed_at);
    headers_str(&h, SC_H_REASON, amqp_cstring_bytes(why));
    headers_str(&h, SC_H_CONSUMER, amqp_cstring_bytes(k->name));
    headers_int(&h, SC_H_ATTEMPTS, attempt);
    headers_str(&h, SC_H_FAILED_AT, amqp_cstring_bytes(failed_at));
    if (tenant)
        headers_str(&h, SC_H_TENANT, amqp_cstring_bytes(tenant));
    headers_original_route(&h, env);
    if (hold_seq > 0 && !sc_amqp_header_bytes(sc_delivery_headers(env), SC_H_HOLD_SEQ).len &&
        sc_amqp_header_int(sc_delivery_headers(env), SC_H_HOLD_SEQ, -1) < 0)
        headers_int(&h, SC_H_HOLD_SEQ, hold_seq);
    int rc = republish(out, env, member, k->dead_letter_queue, &h, lf);
    free(h.e);
    return rc;
}

int sc_republish_retry(struct sc_amqp *out, const struct sc_consumer_config *k,
                       const amqp_envelope_t *env, const struct sc_member_copy *member,
                       int attempt, int delay_ms, const char *why,
                       const struct sc_log_fields *lf)
{
    char queue[300];
    sc_amqp_retry_queue_name(k, delay_ms, queue, sizeof queue);
    struct headers h;
    if (headers_from(&h, sc_delivery_headers(env)))
        return -1;
    headers_int(&h, SC_H_ATTEMPTS, attempt + 1);
    headers_str(&h, SC_H_LAST_ERROR, amqp_cstring_bytes(why));
    headers_original_route(&h, env);
    int rc = republish(out, env, member, queue, &h, lf);
    free(h.e);
    return rc;
}

int sc_republish_round(struct sc_amqp *out, const struct sc_consumer_config *k,
                       const amqp_envelope_t *env, int attempt, int delay_ms, const char *why,
                       const char *mark_name, const char *mark, const struct sc_log_fields *lf)
{
    char queue[300];
    sc_amqp_retry_queue_name(k, delay_ms, queue, sizeof queue);
    struct headers h;
    if (headers_from(&h, sc_delivery_headers(env)))
        return -1;
    int j = 0;
    for (int i = 0; i < h.n; i++)
        if (!named(h.e[i].key, mark_name))
            h.e[j++] = h.e[i]; /* one mark: the latest round's */
    h.n = j;
    headers_int(&h, SC_H_ATTEMPTS, attempt + 1);
    headers_str(&h, SC_H_LAST_ERROR, amqp_cstring_bytes(why));
    headers_str(&h, mark_name, amqp_cstring_bytes(mark));
    headers_original_route(&h, env);
    int rc = republish(out, env, NULL, queue, &h, lf);
    free(h.e);
    return rc;
}
