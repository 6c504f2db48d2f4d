/* sidecar dlq: list, show and replay a consumer's dead-lettered messages. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "io/amqp_conn.h"
#include "consume/republish.h"

#define DLQ_MAX 10000

struct dead {
    uint64_t tag;
    amqp_message_t msg;
    char event_id[64];
};

static void header_text(const amqp_basic_properties_t *p, const char *key, char *out, size_t len)
{
    const amqp_table_t *h = (p->_flags & AMQP_BASIC_HEADERS_FLAG) ? &p->headers : NULL;
    amqp_bytes_t b = sc_amqp_header_bytes(h, key);
    if (b.len) {
        snprintf(out, len, "%.*s", (int)b.len, (const char *)b.bytes);
        return;
    }
    int64_t v = sc_amqp_header_int(h, key, -1);
    if (v >= 0)
        snprintf(out, len, "%lld", (long long)v);
    else
        snprintf(out, len, "-");
}

/* The event id: the body's "id", else the message_id property. */
static void event_id_of(const amqp_message_t *m, char *out, size_t len)
{
    json_t *j = json_loadb(m->body.bytes, m->body.len, 0, NULL);
    const char *id = j ? json_string_value(json_object_get(j, "id")) : NULL;
    if (id)
        snprintf(out, len, "%s", id);
    else if (m->properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG)
        snprintf(out, len, "%.*s", (int)m->properties.message_id.len,
                 (const char *)m->properties.message_id.bytes);
    else
        snprintf(out, len, "(no id)");
    json_decref(j);
}

/* Takes every message of the queue without acking it: they return to the
 * queue when the channel closes, unless acked. Returns the count or -1. */
static int browse(struct sc_amqp *a, const char *queue, struct dead *out, char *err, size_t len)
{
    int n = 0;
    while (n < DLQ_MAX) {
        amqp_rpc_reply_t r = amqp_basic_get(a->conn, SC_AMQP_CHANNEL, amqp_cstring_bytes(queue), 0);
        if (r.reply_type != AMQP_RESPONSE_NORMAL) {
            snprintf(err, len, "basic.get on %s failed (does the queue exist?)", queue);
            return -1;
        }
        if (r.reply.id == AMQP_BASIC_GET_EMPTY_METHOD)
            break;
        out[n].tag = ((amqp_basic_get_ok_t *)r.reply.decoded)->delivery_tag;
        r = amqp_read_message(a->conn, SC_AMQP_CHANNEL, &out[n].msg, 0);
        if (r.reply_type != AMQP_RESPONSE_NORMAL) {
            snprintf(err, len, "reading a message of %s failed", queue);
            return -1;
        }
        event_id_of(&out[n].msg, out[n].event_id, sizeof out[n].event_id);
        n++;
    }
    return n;
}

static void print_message(const struct dead *d)
{
    const amqp_basic_properties_t *p = &d->msg.properties;
    printf("event %s\n", d->event_id);
    if (p->_flags & AMQP_BASIC_HEADERS_FLAG) {
        for (int i = 0; i < p->headers.num_entries; i++) {
            char key[256], val[2048];
            const amqp_table_entry_t *e = &p->headers.entries[i];
            snprintf(key, sizeof key, "%.*s", (int)e->key.len, (const char *)e->key.bytes);
            header_text(p, key, val, sizeof val);
            printf("  %s: %s\n", key, val);
        }
    }
    printf("  body: %.*s\n", (int)d->msg.body.len, (const char *)d->msg.body.bytes);
}

int sc_dlq_run(const struct sc_config *cfg, int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: sidecar dlq -c FILE list|show|replay CONSUMER [--id EVENT_ID | --all]\n");
        return 2;
    }
    const char *verb = argv[0], *name = argv[1], *id = NULL;
    int all = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--id") == 0 && i + 1 < argc)
            id = argv[++i];
        else if (strcmp(argv[i], "--all") == 0)
            all = 1;
        else {
            fprintf(stderr, "sidecar dlq: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    int list = strcmp(verb, "list") == 0, show = strcmp(verb, "show") == 0,
        replay = strcmp(verb, "replay") == 0;
    if (!list && !show && !replay) {
        fprintf(stderr, "sidecar dlq: expected list, show or replay, got '%s'\n", verb);
        return 2;
    }
    if ((show || replay) && !id && !all) {
        fprintf(stderr, "sidecar dlq %s: say which: --id EVENT_ID or --all\n", verb);
        return 2;
    }
    const struct sc_consumer_config *k = sc_config_consumer(cfg, name);
    if (!k) {
        fprintf(stderr, "sidecar dlq: no consumer named '%s' in the config\n", name);
        return 2;
    }
    struct sc_amqp a, pub;
    char err[512];
    if (sc_amqp_connect(&a, cfg, "sidecar dlq", err, sizeof err)) {
        fprintf(stderr, "sidecar dlq: %s\n", err);
        return 1;
    }
    struct dead *ds = calloc(DLQ_MAX, sizeof *ds);
    int n = ds ? browse(&a, k->dead_letter_queue, ds, err, sizeof err) : -1;
    if (n < 0) {
        fprintf(stderr, "sidecar dlq: %s\n", ds ? err : "out of memory");
        sc_amqp_close(&a);
        free(ds);
        return 1;
    }
    int rc = 0, matched = 0, replayed = 0;
    if (list) {
        printf("%d message(s) in %s%s\n", n, k->dead_letter_queue, n == DLQ_MAX ? " (first 10000)" : "");
        for (int i = 0; i < n; i++) {
            char reason[600], attempts[32], at[64];
            header_text(&ds[i].msg.properties, SC_H_REASON, reason, sizeof reason);
            header_text(&ds[i].msg.properties, SC_H_ATTEMPTS, attempts, sizeof attempts);
            header_text(&ds[i].msg.properties, SC_H_FAILED_AT, at, sizeof at);
            printf("%s  attempts %s  failed %s  %s\n", ds[i].event_id, attempts, at, reason);
        }
    } else if (show) {
        for (int i = 0; i < n; i++)
            if (all || strcmp(ds[i].event_id, id) == 0) {
                print_message(&ds[i]);
                matched++;
            }
        rc = matched ? 0 : 1;
    } else if (sc_amqp_connect(&pub, cfg, "sidecar dlq replay", err, sizeof err) ||
               sc_amqp_confirm_select(&pub, err, sizeof err)) {
        fprintf(stderr, "sidecar dlq: %s\n", err);
        rc = 1;
    } else {
        for (int i = 0; i < n; i++) {
            struct dead *d = &ds[i];
            if (!all && strcmp(d->event_id, id) != 0)
                continue;
            matched++;
            /* To the dead-lettering consumer's own queue through the
             * default exchange, as its retries go: the original exchange
             * would hand a copy to every queue bound to it, and a consumer
             * whose consumed_event rows were purged would apply it again. */
            const amqp_basic_properties_t *p = &d->msg.properties;
            /* Back as it first came: without the sidecar's headers, so it
             * starts again at attempt 1. */
            amqp_basic_properties_t np = *p;
            amqp_table_entry_t keep[64];
            int nk = 0;
            if (p->_flags & AMQP_BASIC_HEADERS_FLAG)
                for (int j = 0; j < p->headers.num_entries && nk < 64; j++) {
                    const amqp_bytes_t *key = &p->headers.entries[j].key;
                    /* The original route stays: a plain message's type and
                     * source come from it, and it now arrives through the
                     * default exchange. */
                    int route = (key->len == strlen(SC_H_ORIG_EXCHANGE) &&
                                 memcmp(key->bytes, SC_H_ORIG_EXCHANGE, key->len) == 0) ||
                                (key->len == strlen(SC_H_ORIG_ROUTING_KEY) &&
                                 memcmp(key->bytes, SC_H_ORIG_ROUTING_KEY, key->len) == 0);
                    if (route || (!(key->len > 10 &&
                                    memcmp(key->bytes, SC_H_PREFIX, strlen(SC_H_PREFIX)) == 0) &&
                                  !(key->len == 7 && memcmp(key->bytes, "x-death", 7) == 0)))
                        keep[nk++] = p->headers.entries[j];
                }
            np.headers.num_entries = nk;
            np.headers.entries = keep;
            sc_amqp_props_clear_ttl(&np); /* only the operator may let it expire */
            struct sc_publish m = {.exchange = "", .routing_key = k->queue, .props = &np,
                                   .body = d->msg.body, .mandatory = 1};
            if (sc_amqp_publish_confirmed(&pub, &m, 1, 10000, err, sizeof err) == 1 &&
                sc_amqp_ack(&a, d->tag, 0) == 0) {
                replayed++;
                printf("replayed %s to queue '%s'\n", d->event_id, k->queue);
            } else {
                fprintf(stderr, "sidecar dlq: %s not replayed (%s%s%s): it stays in %s\n",
                        d->event_id, sc_publish_result_name(m.result), err[0] ? ": " : "", err,
                        k->dead_letter_queue);
                rc = 1;
            }
        }
        sc_amqp_close(&pub);
        printf("replayed %d of %d matching message(s); %d left in %s\n", replayed, matched,
               n - replayed, k->dead_letter_queue);
        if (!matched)
            rc = 1;
    }
    for (int i = 0; i < n; i++)
        amqp_destroy_message(&ds[i].msg);
    free(ds);
    sc_amqp_close(&a); /* what was not acked goes back to the queue */
    return rc;
}
