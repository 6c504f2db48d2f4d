/* The consumer's topology: its exchanges, queue (with the quorum delivery
 * limit), bindings, dead-letter, delay and partition queues. */
#include "amqp_conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/amqp_private.h"
#include "log.h"

void sc_amqp_retry_queue_name(const struct sc_consumer_config *k, int delay_ms, char *out,
                              size_t out_len)
{
    snprintf(out, out_len, "%s.retry.%dms", k->queue, delay_ms);
}

static int declare_queue_seen(struct sc_amqp *a, const char *name, const char *type,
                              const amqp_table_entry_t *extra, int n_extra, char *seen,
                              size_t seen_len, char *err, size_t err_len)
{
    amqp_table_entry_t entries[6];
    int n = 0;
    for (int i = 0; i < n_extra; i++)
        entries[n++] = extra[i];
    if (strcmp(type, "quorum") == 0) {
        entries[n].key = amqp_cstring_bytes("x-queue-type");
        entries[n].value.kind = AMQP_FIELD_KIND_UTF8;
        entries[n].value.value.bytes = amqp_cstring_bytes("quorum");
        n++;
    }
    amqp_table_t args = {n, entries};
    amqp_queue_declare(a->conn, SC_AMQP_CHANNEL, amqp_cstring_bytes(name), 0, 1, 0, 0, args);
    amqp_rpc_reply_t r = amqp_get_rpc_reply(a->conn);
    if (seen && seen_len) {
        /* The whole refusal, which err would cut: its end names a value. */
        seen[0] = 0;
        if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
            r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
            amqp_channel_close_t *m = r.reply.decoded;
            snprintf(seen, seen_len, "%.*s", (int)m->reply_text.len,
                     (const char *)m->reply_text.bytes);
        }
    }
    char what[300];
    snprintf(what, sizeof what, "declare queue %.280s", name);
    return sc_amqp_reply_error(r, what, err, err_len);
}

static int declare_queue(struct sc_amqp *a, const char *name, const char *type,
                         const amqp_table_entry_t *extra, int n_extra, char *err, size_t err_len)
{
    return declare_queue_seen(a, name, type, extra, n_extra, NULL, 0, err, err_len);
}

int sc_amqp_declare_exchange(struct sc_amqp *a, const char *exchange, char *err, size_t err_len)
{
    char what[300];
    amqp_exchange_declare(a->conn, SC_AMQP_CHANNEL, amqp_cstring_bytes(exchange),
                          amqp_cstring_bytes("topic"), 0, 1, 0, 0, amqp_empty_table);
    snprintf(what, sizeof what, "declare exchange %s", exchange);
    return sc_amqp_reply_error(amqp_get_rpc_reply(a->conn), what, err, err_len);
}

/* After the broker closed channel 1 over a refused declare: answers the
 * close and opens the channel again. Returns 0, or -1 with err set. */
static int reopen_channel(struct sc_amqp *a, char *err, size_t err_len)
{
    amqp_channel_close_ok_t ok;
    if (amqp_send_method(a->conn, SC_AMQP_CHANNEL, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok) != AMQP_STATUS_OK)
        return sc_amqp_fail(err, err_len, "amqp channel.close-ok", "cannot send it");
    amqp_channel_open(a->conn, SC_AMQP_CHANNEL);
    return sc_amqp_reply_error(amqp_get_rpc_reply(a->conn), "amqp channel.open", err, err_len);
}

/* The x-delivery-limit of every quorum queue the sidecar declares: the
 * largest the field takes (a signed 32-bit integer). A quorum queue counts
 * each return as a delivery — a failed attempt, and every delivery in hand
 * when a session ends (a crash, a lost connection, a database outage longer
 * than db_outage_hold_ms) or a `sidecar dlq` browse gives back what it read —
 * and RabbitMQ 4 drops a message at its limit, 20 when none was declared,
 * without a trace. The consumer dead-letters at max_attempts itself
 * (x-delivery-count), so the broker's limit must never come first, however
 * many sessions end: a fixed value no count reaches, which also leaves
 * max_attempts free to change (a queue's arguments cannot). -1, RabbitMQ 4's
 * "no limit", is no answer: RabbitMQ 3.x reads it as a limit below zero and
 * drops every message the first time it is given back (measured on 3.10). */
#define SC_QUORUM_DELIVERY_LIMIT 2147483647

int sc_amqp_existing_delivery_limit(const char *text, long long *limit)
{
    /* "... but current is none", "... but current is '50'" and "... but
     * current is the value '50' of type 'signedint'" (RabbitMQ 3.10, 4). */
    static const char tail[] = "but current is ";
    const char *p = NULL;
    for (const char *q = strstr(text, tail); q; q = strstr(q + 1, tail))
        p = q + strlen(tail);
    size_t n = strlen(text);
    /* Cut at 255 bytes, the text ends in "...": what is left may be the name's. */
    if (!p || !strstr(text, "inequivalent arg 'x-delivery-limit'") ||
        (n >= 3 && strcmp(text + n - 3, "...") == 0))
        return -1;
    if (strcmp(p, "none") == 0)
        return 0;
    if (strncmp(p, "the value ", 10) == 0)
        p += 10;
    if (*p++ != '\'')
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (end == p || *end != '\'' || errno)
        return -1;
    *limit = v;
    return 1;
}

int sc_amqp_delivery_limit_enough(int has, long long limit, int max_attempts)
{
    if (has < 0)
        return 0;
    if (has == 0)
        limit = SC_DELIVERY_LIMIT_DEFAULT;
    /* Negative: no limit on RabbitMQ 4, every return dropped on 3.x. */
    return limit >= (long long)max_attempts + SC_DELIVERY_LIMIT_MARGIN;
}

enum queue_use {
    Q_CONSUMED,    /* the queue, or a partition: what the workers take from */
    Q_DELAY,       /* a delay queue: no one consumes, nothing is given back */
    Q_DEAD_LETTER, /* taken from only by `sidecar dlq` */
};

static void limit_words(int has, long long limit, char *out, size_t len)
{
    if (has > 0)
        snprintf(out, len, "x-delivery-limit %lld%s", limit,
                 limit < 0 ? " (no limit on RabbitMQ 4, but RabbitMQ 3.x drops a message the "
                             "first time it is given back)" : "");
    else if (has == 0)
        snprintf(out, len, "no x-delivery-limit (so RabbitMQ 4 gives it %d)",
                 SC_DELIVERY_LIMIT_DEFAULT);
    else
        snprintf(out, len, "an x-delivery-limit the broker's answer cuts off (a long name; "
                 "`rabbitmqctl list_queues name arguments` shows it)");
}

/* A consumed queue whose limit lets the broker drop a message before
 * max_attempts dead-letters it: not taken. */
static int refuse(const struct sc_consumer_config *k, const char *q, int has, long long limit,
                  char *err, size_t err_len)
{
    char what[200], times[40] = "", lower[60] = "";
    limit_words(has, limit, what, sizeof what);
    long long at = has == 0 ? SC_DELIVERY_LIMIT_DEFAULT : limit;
    if (has >= 0 && at >= 0)
        snprintf(times, sizeof times, " more than %lld times", at);
    if (has >= 0 && at - SC_DELIVERY_LIMIT_MARGIN >= 1)
        snprintf(lower, sizeof lower, "lower max_attempts to %lld or ",
                 at - SC_DELIVERY_LIMIT_MARGIN);
    snprintf(err, err_len,
             "quorum queue %s has %s, less than the max_attempts + %d = %d it needs: the broker "
             "would drop a message given back%s before the consumer dead-letters it, and cannot "
             "change a queue's arguments: %smove the consumer to a new queue (docs/upgrading.md)",
             q, what, SC_DELIVERY_LIMIT_MARGIN, k->max_attempts + SC_DELIVERY_LIMIT_MARGIN, times,
             lower);
    return SC_AMQP_REFUSED;
}

/* A quorum queue, with SC_QUORUM_DELIVERY_LIMIT. One that exists with another
 * limit or none (declared by an earlier version) is declared again as it is,
 * its other arguments still checked, when nothing is lost by it: a delay
 * queue; the dead-letter queue (`sidecar dlq` gives a dead letter a fresh
 * count before it nears 20; a warning); a consumed queue whose limit is at
 * least max_attempts + SC_DELIVERY_LIMIT_MARGIN (a warning). Otherwise
 * SC_AMQP_REFUSED. A policy's delivery-limit is not seen (AMQP 0-9-1 shows
 * none); where both are set RabbitMQ takes the lower. */
static int declare_quorum(struct sc_amqp *a, const struct sc_consumer_config *k, const char *q,
                          enum queue_use use, const amqp_table_entry_t *extra, int n_extra,
                          char *err, size_t err_len)
{
    amqp_table_entry_t e[5];
    for (int i = 0; i < n_extra; i++)
        e[i] = extra[i];
    e[n_extra].key = amqp_cstring_bytes("x-delivery-limit");
    e[n_extra].value.kind = AMQP_FIELD_KIND_I32;
    e[n_extra].value.value.i32 = SC_QUORUM_DELIVERY_LIMIT;
    char seen[512];
    if (declare_queue_seen(a, q, "quorum", e, n_extra + 1, seen, sizeof seen, err, err_len) == 0)
        return 0;
    if (!strstr(seen, "inequivalent arg 'x-delivery-limit'"))
        return -1;
    long long limit = 0;
    int has = sc_amqp_existing_delivery_limit(seen, &limit), declared = 0;
    if (reopen_channel(a, err, err_len))
        return -1;
    if (has < 0) {
        /* The answer was cut short: none, or some limit? */
        if (declare_queue_seen(a, q, "quorum", extra, n_extra, seen, sizeof seen, err,
                               err_len) == 0) {
            has = 0;
            declared = 1;
        } else if (!strstr(seen, "inequivalent arg 'x-delivery-limit'") ||
                   reopen_channel(a, err, err_len)) {
            return -1;
        } else {
            has = sc_amqp_existing_delivery_limit(seen, &limit);
        }
    }
    if (use == Q_CONSUMED && !sc_amqp_delivery_limit_enough(has, limit, k->max_attempts))
        return refuse(k, q, has, limit, err, err_len);
    if (!declared && has > 0) {
        e[n_extra].value.kind = AMQP_FIELD_KIND_I64;
        e[n_extra].value.value.i64 = limit;
        if (declare_queue(a, q, "quorum", e, n_extra + 1, err, err_len))
            return -1;
    } else if (!declared && has == 0) {
        if (declare_queue(a, q, "quorum", extra, n_extra, err, err_len))
            return -1;
    } else if (!declared) {
        amqp_queue_declare(a->conn, SC_AMQP_CHANNEL, amqp_cstring_bytes(q), 1, 0, 0, 0,
                           amqp_empty_table);
        char what[300];
        snprintf(what, sizeof what, "declare queue %.270s (passive)", q);
        if (sc_amqp_reply_error(amqp_get_rpc_reply(a->conn), what, err, err_len))
            return -1;
    }
    char what[200];
    limit_words(has, limit, what, sizeof what);
    if (use == Q_DEAD_LETTER)
        sc_warn("amqp: dead-letter queue %s keeps %s, since the broker cannot change a queue's "
                "arguments: each `sidecar dlq` browse counts as a delivery there, and RabbitMQ 4 "
                "drops a message at its limit; `sidecar dlq` gives a dead letter a fresh count "
                "before it nears 20, and a policy with delivery-limit -1 (RabbitMQ 4) lifts it",
                q, what);
    else if (use == Q_CONSUMED)
        sc_warn("amqp: quorum queue %s keeps %s, since the broker cannot change a queue's "
                "arguments: enough for max_attempts %d + %d, but RabbitMQ drops a message given "
                "back more often (sessions that end with it in hand count too); a new queue "
                "gets %d (docs/upgrading.md)",
                q, what, k->max_attempts, SC_DELIVERY_LIMIT_MARGIN, SC_QUORUM_DELIVERY_LIMIT);
    else
        sc_info("amqp: delay queue %s keeps %s: no one consumes from it", q, what);
    return 0;
}

/* The queue type of the consumer's config: a quorum queue with its limit. */
static int declare_for(struct sc_amqp *a, const struct sc_consumer_config *k, const char *q,
                       enum queue_use use, const amqp_table_entry_t *extra, int n_extra,
                       char *err, size_t err_len)
{
    if (strcmp(k->queue_type, "quorum") == 0)
        return declare_quorum(a, k, q, use, extra, n_extra, err, err_len);
    return declare_queue(a, q, k->queue_type, extra, n_extra, err, err_len);
}

void sc_amqp_partition_queue_name(const struct sc_consumer_config *k, int i, char *out,
                                  size_t out_len)
{
    snprintf(out, out_len, "%s.p%d", k->queue, i);
}

void sc_amqp_ordering_exchange_name(const struct sc_consumer_config *k, char *out, size_t out_len)
{
    snprintf(out, out_len, "%s.ordering", k->queue);
}

/* An ordered stream's queue: one consumer at a time takes from it (the
 * others wait as hot standbys), so its order is the queue's order. */
static int declare_ordered_queue(struct sc_amqp *a, const struct sc_consumer_config *k,
                                 const char *name, char *err, size_t err_len)
{
    amqp_table_entry_t sac;
    sac.key = amqp_cstring_bytes("x-single-active-consumer");
    sac.value.kind = AMQP_FIELD_KIND_BOOLEAN;
    sac.value.value.boolean = 1;
    return declare_for(a, k, name, Q_CONSUMED, &sac, 1, err, err_len);
}

static int bind_queue(struct sc_amqp *a, const char *queue, const char *exchange, const char *key,
                      char *err, size_t err_len)
{
    char what[600];
    amqp_queue_bind(a->conn, SC_AMQP_CHANNEL, amqp_cstring_bytes(queue),
                    amqp_cstring_bytes(exchange), amqp_cstring_bytes(key), amqp_empty_table);
    snprintf(what, sizeof what, "bind %.250s to %.250s (%.80s)", queue, exchange, key);
    return sc_amqp_reply_error(amqp_get_rpc_reply(a->conn), what, err, err_len);
}

/* The name of partition i's entry on the ring: the fanout exchange
 * <queue>.ordering.p<i>, bound to the partition's queue. */
static void partition_entry_name(const struct sc_consumer_config *k, int i, char *out,
                                 size_t out_len)
{
    snprintf(out, out_len, "%s.ordering.p%d", k->queue, i);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* partitions > 1: the consistent-hash exchange <queue>.ordering (hashing
 * header x-ordering-key), bound to every exchange of the bindings, spreads
 * the keys over <queue>.p0 .. p<N-1>, each with one active consumer. Every
 * partition has the same weight.
 *
 * The ring's order decides which partition a key reaches, so it must be
 * the same after a broker restart. RabbitMQ rebuilds a ring at boot: a
 * queue's entries as each queue recovers (in no fixed order: keys moved
 * to other partitions on most restarts), an exchange's in the sorted
 * order of their names. So the ring's entries are one fanout exchange per
 * partition, bound in that sorted order from the first declaration on, and
 * a deleted partition queue leaves the ring as it was. */
static int declare_partitions(struct sc_amqp *a, const struct sc_consumer_config *k, char *err,
                              size_t err_len)
{
    char ex[300], q[300], what[700];
    sc_amqp_ordering_exchange_name(k, ex, sizeof ex);
    amqp_table_entry_t hh;
    hh.key = amqp_cstring_bytes("hash-header");
    hh.value.kind = AMQP_FIELD_KIND_UTF8;
    hh.value.value.bytes = amqp_cstring_bytes(SC_H_ORDERING_KEY);
    amqp_table_t args = {1, &hh};
    amqp_exchange_declare(a->conn, SC_AMQP_CHANNEL, amqp_cstring_bytes(ex),
                          amqp_cstring_bytes("x-consistent-hash"), 0, 1, 0, 0, args);
    snprintf(what, sizeof what, "declare exchange %s (x-consistent-hash: is the plugin "
             "rabbitmq_consistent_hash_exchange enabled?)", ex);
    if (sc_amqp_reply_error(amqp_get_rpc_reply(a->conn), what, err, err_len))
        return -1;
    int n = k->ordering.partitions;
    for (int i = 0; i < n; i++) {
        sc_amqp_partition_queue_name(k, i, q, sizeof q);
        int rc = declare_ordered_queue(a, k, q, err, err_len);
        if (rc)
            return rc;
        char entry[300];
        partition_entry_name(k, i, entry, sizeof entry);
        amqp_exchange_declare(a->conn, SC_AMQP_CHANNEL, amqp_cstring_bytes(entry),
                              amqp_cstring_bytes("fanout"), 0, 1, 0, 1, amqp_empty_table);
        snprintf(what, sizeof what, "declare exchange %s", entry);
        if (sc_amqp_reply_error(amqp_get_rpc_reply(a->conn), what, err, err_len) ||
            bind_queue(a, q, entry, "", err, err_len))
            return -1;
    }
    /* Every process binds in the same order, so the first binding of each
     * entry comes in that order too. */
    char (*entries)[300] = malloc((size_t)n * sizeof *entries);
    if (!entries) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++)
        partition_entry_name(k, i, entries[i], sizeof entries[i]);
    qsort(entries, (size_t)n, sizeof entries[0], by_name);
    int failed = 0;
    for (int i = 0; i < n && !failed; i++) {
        amqp_exchange_bind(a->conn, SC_AMQP_CHANNEL, amqp_cstring_bytes(entries[i]),
                           amqp_cstring_bytes(ex), amqp_cstring_bytes("1"), amqp_empty_table);
        snprintf(what, sizeof what, "bind exchange %s to %s (1)", entries[i], ex);
        failed = sc_amqp_reply_error(amqp_get_rpc_reply(a->conn), what, err, err_len);
    }
    free(entries);
    if (failed)
        return -1;
    /* Up to 0.3 the ring's entries were the queues themselves: once the
     * exchanges are on it, the queues leave it (the ring is never empty
     * meanwhile). A binding that is not there unbinds without error. */
    for (int i = 0; i < n; i++) {
        sc_amqp_partition_queue_name(k, i, q, sizeof q);
        amqp_queue_unbind(a->conn, SC_AMQP_CHANNEL, amqp_cstring_bytes(q), amqp_cstring_bytes(ex),
                          amqp_cstring_bytes("1"), amqp_empty_table);
        snprintf(what, sizeof what, "unbind %s from %s (1)", q, ex);
        if (sc_amqp_reply_error(amqp_get_rpc_reply(a->conn), what, err, err_len))
            return -1;
    }
    for (size_t i = 0; i < k->n_bindings; i++) {
        const struct sc_binding *b = &k->bindings[i];
        amqp_exchange_bind(a->conn, SC_AMQP_CHANNEL, amqp_cstring_bytes(ex),
                           amqp_cstring_bytes(b->exchange), amqp_cstring_bytes(b->routing_key),
                           amqp_empty_table);
        snprintf(what, sizeof what, "bind exchange %s to %s (%s)", ex, b->exchange, b->routing_key);
        if (sc_amqp_reply_error(amqp_get_rpc_reply(a->conn), what, err, err_len))
            return -1;
    }
    return 0;
}

/* An ordered consumer with tenants: the delay queue of the first
 * retry_delays_ms entry, back onto the partitions' exchange (the copy keeps
 * x-ordering-key, so its partition) or the queue. One queue, one TTL: the
 * copies come back in the order they left. */
static int declare_return_queue(struct sc_amqp *a, const struct sc_consumer_config *k, char *err,
                                size_t err_len)
{
    char name[300], ex[300] = "";
    int delay = k->retry_delays_ms[0];
    sc_amqp_retry_queue_name(k, delay, name, sizeof name);
    if (k->ordering.partitions > 1)
        sc_amqp_ordering_exchange_name(k, ex, sizeof ex);
    amqp_table_entry_t extra[3];
    extra[0].key = amqp_cstring_bytes("x-message-ttl");
    extra[0].value.kind = AMQP_FIELD_KIND_I64;
    extra[0].value.value.i64 = delay;
    extra[1].key = amqp_cstring_bytes("x-dead-letter-exchange");
    extra[1].value.kind = AMQP_FIELD_KIND_UTF8;
    extra[1].value.value.bytes = amqp_cstring_bytes(ex);
    extra[2].key = amqp_cstring_bytes("x-dead-letter-routing-key");
    extra[2].value.kind = AMQP_FIELD_KIND_UTF8;
    extra[2].value.value.bytes = amqp_cstring_bytes(ex[0] ? "" : k->queue);
    return declare_for(a, k, name, Q_DELAY, extra, 3, err, err_len);
}

int sc_amqp_declare_consumer(struct sc_amqp *a, const struct sc_consumer_config *k, char *err,
                             size_t err_len)
{
    int rc;
    for (size_t i = 0; i < k->n_bindings; i++)
        if (sc_amqp_declare_exchange(a, k->bindings[i].exchange, err, err_len))
            return -1;
    if (k->ordering.present) {
        /* Retries run in place (consume/order.h): no delay queues, but the
         * one a down tenant's deliveries go round through. */
        if (declare_for(a, k, k->dead_letter_queue, Q_DEAD_LETTER, NULL, 0, err, err_len))
            return -1;
        if (k->ordering.tenant_returns && declare_return_queue(a, k, err, err_len))
            return -1;
        if (k->ordering.partitions > 1)
            return declare_partitions(a, k, err, err_len);
        if ((rc = declare_ordered_queue(a, k, k->queue, err, err_len)))
            return rc;
        for (size_t i = 0; i < k->n_bindings; i++)
            if (bind_queue(a, k->queue, k->bindings[i].exchange, k->bindings[i].routing_key, err,
                           err_len))
                return -1;
        return 0;
    }
    if ((rc = declare_for(a, k, k->queue, Q_CONSUMED, NULL, 0, err, err_len)))
        return rc;
    if (declare_for(a, k, k->dead_letter_queue, Q_DEAD_LETTER, NULL, 0, err, err_len))
        return -1;
    for (size_t i = 0; i < k->n_retry_delays; i++) {
        /* A delay queue holds a message for its TTL, then dead-letters it
         * through the default exchange back onto the consumer's queue. */
        char name[300];
        sc_amqp_retry_queue_name(k, k->retry_delays_ms[i], name, sizeof name);
        amqp_table_entry_t extra[3];
        extra[0].key = amqp_cstring_bytes("x-message-ttl");
        extra[0].value.kind = AMQP_FIELD_KIND_I64;
        extra[0].value.value.i64 = k->retry_delays_ms[i];
        extra[1].key = amqp_cstring_bytes("x-dead-letter-exchange");
        extra[1].value.kind = AMQP_FIELD_KIND_UTF8;
        extra[1].value.value.bytes = amqp_cstring_bytes("");
        extra[2].key = amqp_cstring_bytes("x-dead-letter-routing-key");
        extra[2].value.kind = AMQP_FIELD_KIND_UTF8;
        extra[2].value.value.bytes = amqp_cstring_bytes(k->queue);
        if (declare_for(a, k, name, Q_DELAY, extra, 3, err, err_len))
            return -1;
    }
    for (size_t i = 0; i < k->n_bindings; i++)
        if (bind_queue(a, k->queue, k->bindings[i].exchange, k->bindings[i].routing_key, err,
                       err_len))
            return -1;
    return 0;
}
