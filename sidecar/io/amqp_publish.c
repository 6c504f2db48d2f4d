/* Publishing under publisher confirms: every message's fate (acked,
 * nacked, returned, refused, timed out) read back, every wait bounded. */
#include "amqp_conn.h"

#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include "io/amqp_private.h"
#include "lifecycle.h"

int sc_amqp_confirm_select(struct sc_amqp *a, char *err, size_t err_len)
{
    amqp_confirm_select(a->conn, SC_AMQP_CHANNEL);
    if (sc_amqp_reply_error(amqp_get_rpc_reply(a->conn), "confirm.select", err, err_len))
        return -1;
    a->next_seq = 1;
    return 0;
}

int sc_amqp_reopen_channel(struct sc_amqp *a, char *err, size_t err_len)
{
    amqp_channel_open(a->conn, SC_AMQP_CHANNEL);
    if (sc_amqp_reply_error(amqp_get_rpc_reply(a->conn), "amqp channel.open (again, after the broker closed it)",
                    err, err_len))
        return -1;
    return sc_amqp_confirm_select(a, err, err_len);
}

static int bytes_eq(amqp_bytes_t x, amqp_bytes_t y)
{
    return x.len == y.len && (x.len == 0 || memcmp(x.bytes, y.bytes, x.len) == 0);
}

/* Marks the pending message a basic.return refers to: by message_id where
 * both have one, else by body. */
static void mark_returned(struct sc_publish *msgs, size_t n, const amqp_message_t *m)
{
    int has_id = (m->properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG) != 0;
    for (size_t i = 0; i < n; i++) {
        if (msgs[i].result != SC_PUB_PENDING)
            continue;
        const amqp_basic_properties_t *p = msgs[i].props;
        int match;
        if (has_id && p && (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG))
            match = bytes_eq(p->message_id, m->properties.message_id);
        else
            match = bytes_eq(msgs[i].body, m->body);
        if (match) {
            msgs[i].result = SC_PUB_RETURNED;
            return;
        }
    }
}

/* Applies a basic.ack / basic.nack for tag (and all below when multiple). */
static size_t settle(struct sc_publish *msgs, size_t n, uint64_t tag, int multiple, int ack)
{
    size_t settled = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(msgs[i].seq == tag || (multiple && msgs[i].seq <= tag)))
            continue;
        if (msgs[i].result == SC_PUB_PENDING) {
            msgs[i].result = ack ? SC_PUB_ACKED : SC_PUB_NACKED;
            settled++;
        } else if (msgs[i].result == SC_PUB_RETURNED && msgs[i].seq != 0) {
            msgs[i].seq = 0; /* the ack that follows a return settles it */
            settled++;
        }
    }
    return settled;
}

int sc_amqp_publish_confirmed(struct sc_amqp *a, struct sc_publish *msgs, size_t n, int timeout_ms,
                              char *err, size_t err_len)
{
    if (sc_amqp_publish_begin(a, msgs, n, err, err_len))
        return -1;
    return sc_amqp_collect_confirms(a, msgs, n, timeout_ms, NULL, err, err_len);
}

int sc_amqp_publish_begin(struct sc_amqp *a, struct sc_publish *msgs, size_t n, char *err,
                          size_t err_len)
{
    for (size_t i = 0; i < n; i++) {
        msgs[i].result = SC_PUB_PENDING;
        msgs[i].seq = a->next_seq;
        int rc = amqp_basic_publish(a->conn, SC_AMQP_CHANNEL, amqp_cstring_bytes(msgs[i].exchange),
                                    amqp_cstring_bytes(msgs[i].routing_key), msgs[i].mandatory, 0,
                                    msgs[i].props, msgs[i].body);
        if (rc != AMQP_STATUS_OK) {
            for (size_t j = i; j < n; j++)
                msgs[j].result = SC_PUB_FAILED;
            sc_amqp_fail(err, err_len, "basic.publish", amqp_error_string2(rc));
            return -1;
        }
        a->next_seq++; /* a message refused before sending (bad data) takes no number */
    }
    return 0;
}

/* 1 when a channel.close blames one message of those published: a 406 on
 * basic.publish (RabbitMQ: larger than max_message_size). A close for any
 * other reason (404 no exchange, 403) would refuse every message alike. */
static int refuses_a_message(const amqp_frame_t *f)
{
    if (f->payload.method.id != AMQP_CHANNEL_CLOSE_METHOD)
        return 0;
    const amqp_channel_close_t *m = f->payload.method.decoded;
    return m->reply_code == AMQP_PRECONDITION_FAILED &&
           ((uint32_t)m->class_id << 16 | m->method_id) == AMQP_BASIC_PUBLISH_METHOD;
}

int sc_amqp_collect_confirms(struct sc_amqp *a, struct sc_publish *msgs, size_t n, int timeout_ms,
                             enum sc_amqp_error_class *cls, char *err, size_t err_len)
{
    enum sc_amqp_error_class why = SC_AMQPERR_CONNECTION;
    size_t pending = 0;
    for (size_t i = 0; i < n; i++)
        pending += msgs[i].result == SC_PUB_PENDING;
    int64_t deadline = sc_now_ms() + timeout_ms;
    while (pending > 0) {
        int64_t left = deadline - sc_now_ms();
        if (left <= 0)
            break;
        struct timeval tv = {(time_t)(left / 1000), (suseconds_t)((left % 1000) * 1000)};
        amqp_frame_t f;
        int rc = amqp_simple_wait_frame_noblock(a->conn, &f, &tv);
        if (rc == AMQP_STATUS_TIMEOUT)
            break;
        if (rc != AMQP_STATUS_OK) {
            sc_amqp_fail(err, err_len, "waiting for publisher confirms", amqp_error_string2(rc));
            goto failed;
        }
        if (f.frame_type != AMQP_FRAME_METHOD)
            continue;
        switch (f.payload.method.id) {
        case AMQP_BASIC_ACK_METHOD: {
            amqp_basic_ack_t *m = f.payload.method.decoded;
            pending -= settle(msgs, n, m->delivery_tag, m->multiple, 1);
            break;
        }
        case AMQP_BASIC_NACK_METHOD: {
            amqp_basic_nack_t *m = f.payload.method.decoded;
            pending -= settle(msgs, n, m->delivery_tag, m->multiple, 0);
            break;
        }
        case AMQP_BASIC_RETURN_METHOD: {
            amqp_message_t m;
            amqp_rpc_reply_t r = amqp_read_message(a->conn, f.channel, &m, 0);
            if (sc_amqp_reply_error(r, "reading basic.return", err, err_len))
                goto failed;
            mark_returned(msgs, n, &m);
            amqp_destroy_message(&m);
            break;
        }
        case AMQP_CHANNEL_CLOSE_METHOD:
        case AMQP_CONNECTION_CLOSE_METHOD:
            if (refuses_a_message(&f))
                why = SC_AMQPERR_REFUSED;
            sc_amqp_answer_close(a, &f, err, err_len);
            goto failed;
        default:
            break;
        }
    }
    int acked = 0;
    for (size_t i = 0; i < n; i++) {
        if (msgs[i].result == SC_PUB_PENDING)
            msgs[i].result = SC_PUB_TIMEOUT;
        acked += msgs[i].result == SC_PUB_ACKED;
    }
    /* Every confirm and basic.return above was decoded into the channel's
     * frame pool, which only grows until it is recycled: without this a
     * publishing connection keeps every confirm it ever read. Nothing of
     * this connection's pool is referenced past this point. */
    amqp_maybe_release_buffers(a->conn);
    return acked;
failed:
    for (size_t i = 0; i < n; i++)
        if (msgs[i].result == SC_PUB_PENDING)
            msgs[i].result = SC_PUB_FAILED;
    if (cls)
        *cls = why;
    return -1;
}

void sc_amqp_props_clear_ttl(amqp_basic_properties_t *p)
{
    p->_flags &= ~(amqp_flags_t)AMQP_BASIC_EXPIRATION_FLAG;
    p->expiration = amqp_empty_bytes;
}

const char *sc_publish_result_name(enum sc_publish_result r)
{
    static const char *const names[] = {"pending", "acked", "nacked", "returned (unroutable)",
                                        "confirm timeout", "connection failed"};
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "?";
}
