/* sidecar dlq: list, show and replay a consumer's dead-lettered messages
 * (a key's replay and release: admin_dlq_key.c). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin.h"
#include "admin/dlq_browse.h"
#include "consume/order.h"
#include "consume/republish.h"
#include "envelope/attributes.h"
#include "envelope/message.h"
#include "envelope/uuid_text.h"
#include "fault.h"
#include "io/amqp_conn.h"
#include "io/db_held.h"
#include "lifecycle.h"

/* A browse gives back every message it read, and a quorum queue counts each
 * give-back as a delivery (x-delivery-count); RabbitMQ 4 drops a message at
 * its queue's delivery limit, 20 unless declared otherwise. A dead letter
 * read with a count of this many is first put back as a fresh copy, so no
 * number of browses takes it near a limit of 20. */
#define DLQ_REFRESH_AT 10

#define H_DELIVERY_COUNT "x-delivery-count"

const amqp_table_t *sc_dlq_headers(const amqp_basic_properties_t *p)
{
    return (p->_flags & AMQP_BASIC_HEADERS_FLAG) ? &p->headers : NULL;
}

static void header_text(const amqp_basic_properties_t *p, const char *key, char *out, size_t len)
{
    const amqp_table_t *h = sc_dlq_headers(p);
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

/* An id as the logs and `inspect` show it: the canonical lowercase form of a
 * UUID in any RFC 4122 spelling, else the text as written (the logs cut a
 * malformed id at 64 bytes; so does this). */
static void log_form(const char *s, size_t len, char *out, size_t out_len)
{
    char canon[37];
    if (sc_uuid_canonical(s, len, canon) == 0)
        snprintf(out, out_len, "%s", canon);
    else
        snprintf(out, out_len, "%.*s", (int)(len > 64 ? 64 : len), s);
}

/* 1 when the id s (any spelling) is want (canonical when a UUID, else as
 * written, or the 64 bytes a log line shows of a longer one). */
static int id_is(const char *s, size_t len, const char *want)
{
    char canon[37];
    if (sc_uuid_canonical(s, len, canon) == 0)
        return strcmp(canon, want) == 0;
    size_t n = strlen(want);
    return (n == len || (n == 64 && len > 64)) && memcmp(s, want, n) == 0;
}

void sc_dlq_event_id(const amqp_message_t *msg, const struct sc_consumer_config *k,
                     char event_id[72], char **raw_id)
{
    const amqp_basic_properties_t *p = &msg->properties;
    const struct sc_message m = {.props = p, .body = msg->body, .exchange = amqp_empty_bytes,
                                 .routing_key = amqp_empty_bytes};
    const struct sc_envelope_opts o = sc_envelope_opts_for(k);
    struct sc_message_events evs;
    char why[512];
    event_id[0] = 0;
    *raw_id = NULL;
    if (sc_message_open(&m, &o, &evs, why, sizeof why) == 0 && evs.n == 1) {
        struct sc_parsed_event ev;
        if (sc_message_event(&m, &o, &evs, 0, &ev, why, sizeof why) == 0) {
            snprintf(event_id, 72, "%s", ev.ev.id);
            *raw_id = strdup(ev.ev.original_id);
            sc_event_free(&ev);
        } else {
            snprintf(event_id, 72, "%s", ev.log_id);
            *raw_id = ev.id_from[0] ? strdup(ev.id_from) : NULL;
        }
    }
    sc_message_events_free(&evs);
    if (!event_id[0] && (o.plain || sc_binary_prefix(&m) < 0)) {
        json_t *j = json_loadb(msg->body.bytes, msg->body.len, 0, NULL);
        const char *id = j ? json_string_value(json_object_get(j, "id")) : NULL;
        if (id) {
            *raw_id = strdup(id);
            log_form(id, strlen(id), event_id, 72);
        }
        json_decref(j);
    }
    if (!event_id[0] && (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG))
        log_form(p->message_id.bytes, p->message_id.len, event_id, 72);
}

static void identify(struct dead *d, const struct sc_consumer_config *k)
{
    sc_dlq_event_id(&d->msg, k, d->event_id, &d->raw_id);
    if (!d->event_id[0])
        snprintf(d->event_id, sizeof d->event_id, "(no id)");
    d->delivered = sc_amqp_header_int(sc_dlq_headers(&d->msg.properties), H_DELIVERY_COUNT, -1);
}

/* want: the --id argument, canonical when a UUID; NULL matches all. The id
 * the logs show, the id as written, or the message_id property. */
static int matches(const struct dead *d, const char *want)
{
    if (!want)
        return 1;
    const amqp_basic_properties_t *p = &d->msg.properties;
    if (strcmp(d->event_id, want) == 0 || (d->raw_id && id_is(d->raw_id, strlen(d->raw_id), want)))
        return 1;
    return (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG) &&
           id_is(p->message_id.bytes, p->message_id.len, want);
}

static int key_is(amqp_bytes_t k, const char *s)
{
    size_t n = strlen(s);
    return k.len == n && memcmp(k.bytes, s, n) == 0;
}

static int key_starts(amqp_bytes_t k, const char *s)
{
    size_t n = strlen(s);
    return k.len > n && memcmp(k.bytes, s, n) == 0;
}

/* What a replay leaves behind: the broker's death bookkeeping (x-death,
 * x-first-death-*, x-last-death-*) and delivery count, and the sidecar's
 * attempt bookkeeping (x-sidecar-*, but the original route, which a second
 * dead letter must still name). A refresh leaves only the delivery count. */
static int dropped(amqp_bytes_t k, int replay)
{
    if (key_is(k, H_DELIVERY_COUNT))
        return 1;
    if (!replay)
        return 0;
    /* A key's replay keeps each event's place among the key's dead
     * letters (should it fail again) and marks itself anew. */
    if (key_is(k, SC_H_REPLAY_KEY) || key_is(k, SC_H_REPLAY_TOKEN))
        return 1;
    if (replay == 2 && key_is(k, SC_H_HOLD_SEQ))
        return 0;
    if (key_is(k, SC_H_ORIG_EXCHANGE) || key_is(k, SC_H_ORIG_ROUTING_KEY))
        return 0;
    return key_is(k, "x-death") || key_starts(k, "x-first-death-") ||
           key_starts(k, "x-last-death-") || key_starts(k, SC_H_PREFIX);
}

int sc_dlq_publish_copy(struct sc_amqp *a, const struct dead *d, const char *exchange,
                        const char *queue, int replay, const char *replay_key,
                        const char *replay_token, enum sc_publish_result *m_result, char *err,
                        size_t err_len)
{
    const amqp_basic_properties_t *p = &d->msg.properties;
    amqp_basic_properties_t np = *p;
    const amqp_table_t *h = sc_dlq_headers(p);
    amqp_table_entry_t *keep = NULL;
    int nk = 0, room = (h ? h->num_entries : 0) + 2;
    if (!(keep = calloc((size_t)room, sizeof *keep))) {
        snprintf(err, err_len, "out of memory");
        *m_result = SC_PUB_FAILED;
        return 0;
    }
    for (int j = 0; h && j < h->num_entries; j++)
        if (!dropped(h->entries[j].key, replay))
            keep[nk++] = h->entries[j];
    if (replay_key) {
        keep[nk].key = amqp_cstring_bytes(SC_H_REPLAY_KEY);
        keep[nk].value.kind = AMQP_FIELD_KIND_UTF8;
        keep[nk++].value.value.bytes = amqp_cstring_bytes(replay_key);
    }
    if (replay_token) {
        keep[nk].key = amqp_cstring_bytes(SC_H_REPLAY_TOKEN);
        keep[nk].value.kind = AMQP_FIELD_KIND_UTF8;
        keep[nk++].value.value.bytes = amqp_cstring_bytes(replay_token);
    }
    if (nk || h) {
        np._flags |= AMQP_BASIC_HEADERS_FLAG;
        np.headers.num_entries = nk;
        np.headers.entries = keep;
    }
    sc_amqp_props_clear_ttl(&np); /* only the operator may let it expire */
    struct sc_publish m = {.exchange = exchange ? exchange : "", .routing_key = queue,
                           .props = &np, .body = d->msg.body, .mandatory = 1};
    err[0] = 0;
    int acked = sc_amqp_publish_confirmed(a, &m, 1, 10000, err, err_len);
    free(keep);
    *m_result = m.result;
    return acked < 0 ? -1 : acked == 1;
}

static int publish_copy(struct sc_amqp *a, const struct dead *d, const char *queue, int replay,
                        enum sc_publish_result *m_result, char *err, size_t err_len)
{
    return sc_dlq_publish_copy(a, d, NULL, queue, replay, NULL, NULL, m_result, err, err_len);
}

/* basic.qos changes nothing here: its answer proves the broker, which
 * handles a channel's methods in order, took the ack. */
int sc_dlq_ack_confirmed(struct sc_amqp *a, uint64_t tag, char *err, size_t err_len)
{
    if (sc_amqp_ack(a, tag, 0)) {
        snprintf(err, err_len, "the ack could not be sent");
        return -1;
    }
    amqp_basic_qos(a->conn, SC_AMQP_CHANNEL, 0, 0, 0);
    amqp_rpc_reply_t r = amqp_get_rpc_reply(a->conn);
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return 0;
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION)
        snprintf(err, err_len, "%s", amqp_error_string2(r.library_error));
    else if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
             r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        amqp_connection_close_t *m = r.reply.decoded;
        snprintf(err, err_len, "connection closed by broker: %u %.*s", m->reply_code,
                 (int)m->reply_text.len, (const char *)m->reply_text.bytes);
    } else if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
               r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_t *m = r.reply.decoded;
        snprintf(err, err_len, "channel closed by broker: %u %.*s", m->reply_code,
                 (int)m->reply_text.len, (const char *)m->reply_text.bytes);
    } else {
        snprintf(err, err_len, "no answer from the broker");
    }
    return -1;
}

void sc_dlq_free(struct dead *ds, int n)
{
    for (int i = 0; i < n; i++) {
        amqp_destroy_message(&ds[i].msg);
        free(ds[i].raw_id);
    }
}

/* A browse holds every message it read until it gives them back; only the
 * bodies the command prints or republishes are kept, so `list` over 10,000
 * dead letters holds their headers, not their bodies. */
static void drop_body(struct dead *d, int wanted)
{
    if (wanted)
        return;
    amqp_bytes_free(d->msg.body);
    d->msg.body = amqp_empty_bytes;
}

/* 1 when d is an event of ordering key `key` for consumer k. */
static int of_key(const struct sc_consumer_config *k, const struct dead *d, const char *key)
{
    amqp_envelope_t env;
    memset(&env, 0, sizeof env);
    env.message = d->msg;
    char kk[SC_ORDER_KEY_MAX + 1], id[37], why[256];
    return sc_order_key_id(k, &env, kk, sizeof kk, id, why, sizeof why) == SC_ORDER_KEYED &&
           strcmp(kk, key) == 0;
}

int sc_dlq_browse(struct sc_amqp *a, const struct sc_consumer_config *k, struct dead *out, int max,
                  int refresh, const char *spare, int spare_all, int bodies, const char *keep,
                  const char *keep_key, int *held, char *err, size_t err_len)
{
    const char *queue = k->dead_letter_queue;
    amqp_queue_declare_ok_t *q = amqp_queue_declare(a->conn, SC_AMQP_CHANNEL,
                                                    amqp_cstring_bytes(queue), 1, 0, 0, 0,
                                                    amqp_empty_table);
    if (!q) {
        snprintf(err, err_len, "dead-letter queue %s cannot be read (does it exist? the consumer "
                 "declares it at start)", queue);
        return -1;
    }
    *held = q->message_count > (uint32_t)max ? max : (int)q->message_count;
    int n = 0;
    for (int i = 0; i < *held; i++) {
        amqp_rpc_reply_t r = amqp_basic_get(a->conn, SC_AMQP_CHANNEL, amqp_cstring_bytes(queue), 0);
        if (r.reply_type != AMQP_RESPONSE_NORMAL) {
            snprintf(err, err_len, "basic.get on %s failed", queue);
            goto failed;
        }
        if (r.reply.id == AMQP_BASIC_GET_EMPTY_METHOD)
            break; /* another command holds the rest */
        struct dead *d = &out[n];
        d->tag = ((amqp_basic_get_ok_t *)r.reply.decoded)->delivery_tag;
        r = amqp_read_message(a->conn, SC_AMQP_CHANNEL, &d->msg, 0);
        if (r.reply_type != AMQP_RESPONSE_NORMAL) {
            snprintf(err, err_len, "reading a message of %s failed", queue);
            goto failed;
        }
        n++;
        identify(d, k);
        /* The frames the body came in stay in the connection's pool until
         * released: without this a browse holds every body twice. */
        amqp_maybe_release_buffers(a->conn);
        int wanted = bodies && (!keep || matches(d, keep)) && (!keep_key || of_key(k, d, keep_key));
        if (!refresh || d->delivered < DLQ_REFRESH_AT || spare_all || (spare && matches(d, spare)) ||
            (keep_key && wanted)) {
            drop_body(d, wanted);
            continue;
        }
        enum sc_publish_result res;
        int c = publish_copy(a, d, queue, 0, &res, err, err_len);
        if (c < 0)
            goto failed;
        if (c == 1 && sc_amqp_ack(a, d->tag, 0) == 0)
            d->tag = 0;
        /* Not confirmed: it stays as it is, one delivery more. */
        drop_body(d, wanted);
    }
    return n;
failed:
    sc_dlq_free(out, n);
    return -1;
}

/* Closing the channel gives the messages back; a quorum queue takes them
 * back asynchronously, hence the wait. */
void sc_dlq_give_back(struct sc_amqp *a, const struct sc_consumer_config *k, const struct dead *ds,
                      int n)
{
    uint32_t held = 0;
    for (int i = 0; i < n; i++)
        held += ds[i].tag != 0;
    if (!held || !a->conn)
        return;
    amqp_rpc_reply_t r = amqp_channel_close(a->conn, SC_AMQP_CHANNEL, AMQP_REPLY_SUCCESS);
    if (r.reply_type != AMQP_RESPONSE_NORMAL)
        return;
    amqp_channel_open(a->conn, SC_AMQP_CHANNEL);
    if (amqp_get_rpc_reply(a->conn).reply_type != AMQP_RESPONSE_NORMAL)
        return;
    int64_t until = sc_now_ms() + 3000;
    for (;;) {
        amqp_queue_declare_ok_t *q = amqp_queue_declare(a->conn, SC_AMQP_CHANNEL,
                                                        amqp_cstring_bytes(k->dead_letter_queue),
                                                        1, 0, 0, 0, amqp_empty_table);
        if (!q || q->message_count >= held || sc_now_ms() >= until)
            return;
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
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

/* Replays each message of ds matching want to k's own queue. Returns the
 * exit status. */
static int replay(struct sc_amqp *a, const struct sc_consumer_config *k, struct dead *ds, int n,
                  const char *want)
{
    int rc = 0, matched = 0, replayed = 0, unsure = 0, lost = 0;
    char err[512];
    for (int i = 0; i < n; i++) {
        struct dead *d = &ds[i];
        if (!matches(d, want))
            continue;
        matched++;
        if (lost) {
            fprintf(stderr, "sidecar dlq: %s not replayed (the connection to the broker is gone): "
                    "it stays in %s\n", d->event_id, k->dead_letter_queue);
            rc = 1;
            continue;
        }
        /* To the dead-lettering consumer's own queue through the default
         * exchange, as its retries go: the original exchange would hand a
         * copy to every queue bound to it, and a consumer whose
         * consumed_event rows were purged would apply it again. */
        enum sc_publish_result res;
        char ex[300] = "";
        if (k->ordering.present && k->ordering.partitions > 1)
            sc_amqp_ordering_exchange_name(k, ex, sizeof ex); /* the queue is its partitions */
        int c = sc_dlq_publish_copy(a, d, ex[0] ? ex : NULL, ex[0] ? "" : k->queue, 1, NULL, NULL, &res,
                                 err, sizeof err);
        if (c != 1) {
            fprintf(stderr, "sidecar dlq: %s not replayed (%s%s%s): it stays in %s\n", d->event_id,
                    sc_publish_result_name(res), err[0] ? ": " : "", err, k->dead_letter_queue);
            lost = c < 0;
            rc = 1;
            continue;
        }
        SC_FAULT("dlq.replay_confirmed");
        if (sc_dlq_ack_confirmed(a, d->tag, err, sizeof err) == 0) {
            d->tag = 0;
            replayed++;
            printf("replayed %s to queue '%s'\n", d->event_id, k->queue);
            continue;
        }
        /* The copy is in the queue; whether the broker took the ack of the
         * DLQ copy is unknown. A second copy is harmless: the consumer
         * takes it for a duplicate. */
        printf("replayed %s to queue '%s', but its DLQ copy may remain (%s): replaying it again "
               "is harmless, the consumer takes a second copy for a duplicate\n",
               d->event_id, k->queue, err);
        replayed++;
        unsure++;
        lost = 1;
        rc = 1;
    }
    printf("replayed %d of %d matching message(s)", replayed, matched);
    if (unsure)
        printf(" (%d of them may also remain in %s)", unsure, k->dead_letter_queue);
    printf("; %d left in %s\n", n - replayed + unsure, k->dead_letter_queue);
    return matched ? rc : 1;
}

int sc_dlq_run(const struct sc_config *cfg, int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: sidecar dlq -c FILE list|show|replay|release CONSUMER [--id EVENT_ID | --all | --key KEY [--tenant NAME]]\n");
        return 2;
    }
    const char *tenant;
    if (sc_admin_take_tenant(cfg, "dlq", &argc, argv, &tenant))
        return 2;
    if (argc < 2) {
        fprintf(stderr, "usage: sidecar dlq -c FILE list|show|replay|release CONSUMER [--id EVENT_ID | --all | --key KEY [--tenant NAME]]\n");
        return 2;
    }
    const char *verb = argv[0], *name = argv[1], *id = NULL, *key = NULL;
    int all = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--id") == 0 && i + 1 < argc)
            id = argv[++i];
        else if (strcmp(argv[i], "--key") == 0 && i + 1 < argc)
            key = argv[++i];
        else if (strcmp(argv[i], "--all") == 0)
            all = 1;
        else {
            fprintf(stderr, "sidecar dlq: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    int list = strcmp(verb, "list") == 0, show = strcmp(verb, "show") == 0,
        replaying = strcmp(verb, "replay") == 0, releasing = strcmp(verb, "release") == 0;
    if (!list && !show && !replaying && !releasing) {
        fprintf(stderr, "sidecar dlq: expected list, show, replay or release, got '%s'\n", verb);
        return 2;
    }
    if (key && (!(replaying || releasing) || id || all)) {
        fprintf(stderr, "sidecar dlq: --key goes with replay or release alone\n");
        return 2;
    }
    if (tenant && !key) {
        /* A dead letter names its tenant (x-sidecar-tenant); --id and --all
         * replay it to where it came from, whichever tenant. */
        fprintf(stderr, "sidecar dlq: --tenant goes with --key\n");
        return 2;
    }
    if (releasing && !key) {
        fprintf(stderr, "sidecar dlq release: say which key: --key KEY\n");
        return 2;
    }
    if ((show || replaying) && !id && !all && !key) {
        fprintf(stderr, "sidecar dlq %s: say which: --id EVENT_ID or --all%s\n", verb,
                replaying ? " or --key KEY" : "");
        return 2;
    }
    const struct sc_consumer_config *k = sc_config_consumer(cfg, name);
    if (!k) {
        fprintf(stderr, "sidecar dlq: no consumer named '%s' in the config\n", name);
        return 2;
    }
    if (releasing)
        return sc_dlq_release_key(cfg, k, key, tenant);
    if (key) {
        struct sc_amqp ka;
        char kerr[512];
        if (sc_amqp_connect(&ka, cfg, "sidecar dlq", kerr, sizeof kerr)) {
            fprintf(stderr, "sidecar dlq: %s\n", kerr);
            return 1;
        }
        int krc = sc_dlq_replay_key(&ka, cfg, k, key, tenant);
        sc_amqp_close(&ka);
        return krc;
    }
    /* A UUID in the canonical form the logs show, whatever spelling was
     * typed; any other id as typed. */
    char canon[37];
    const char *filter = all || !id ? NULL
                         : sc_uuid_canonical(id, strlen(id), canon) == 0 ? canon : id;

    struct sc_amqp a;
    char err[512];
    if (sc_amqp_connect(&a, cfg, "sidecar dlq", err, sizeof err)) {
        fprintf(stderr, "sidecar dlq: %s\n", err);
        return 1;
    }
    struct dead *ds = calloc(DLQ_MAX, sizeof *ds);
    int held = 0, n = -1;
    if (!ds)
        snprintf(err, sizeof err, "out of memory");
    else if (sc_amqp_confirm_select(&a, err, sizeof err) == 0)
        n = sc_dlq_browse(&a, k, ds, DLQ_MAX, strcmp(k->queue_type, "quorum") == 0,
                   replaying ? filter : NULL, replaying && !filter, !list, filter, NULL, &held, err,
                   sizeof err);
    if (n < 0) {
        fprintf(stderr, "sidecar dlq: %s\n", err);
        sc_amqp_close(&a);
        free(ds);
        return 1;
    }
    SC_FAULT("dlq.browsed");
    int rc = 0, matched = 0;
    if (list) {
        printf("%d message(s) in %s%s\n", n, k->dead_letter_queue, held == DLQ_MAX ? " (first 10000)" : "");
        for (int i = 0; i < n; i++) {
            char reason[600], attempts[32], at[64];
            header_text(&ds[i].msg.properties, SC_H_REASON, reason, sizeof reason);
            header_text(&ds[i].msg.properties, SC_H_ATTEMPTS, attempts, sizeof attempts);
            header_text(&ds[i].msg.properties, SC_H_FAILED_AT, at, sizeof at);
            printf("%s  attempts %s  failed %s  %s\n", ds[i].event_id, attempts, at, reason);
        }
    } else if (show) {
        for (int i = 0; i < n; i++)
            if (matches(&ds[i], filter)) {
                print_message(&ds[i]);
                matched++;
            }
        rc = matched ? 0 : 1;
    } else {
        rc = replay(&a, k, ds, n, filter);
    }
    sc_dlq_give_back(&a, k, ds, n);
    sc_dlq_free(ds, n);
    free(ds);
    sc_amqp_close(&a);
    return rc;
}
