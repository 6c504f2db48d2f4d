/* Consuming: start a consumer, check its queue, receive deliveries and the
 * broker's own frames (cancel, close), ack and nack. */
#include "amqp_conn.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include "io/amqp_private.h"

int sc_amqp_start_consume(struct sc_amqp *a, const char *queue, int prefetch, const char *tag,
                          char *err, size_t err_len)
{
    amqp_basic_qos(a->conn, SC_AMQP_CHANNEL, 0, (uint16_t)prefetch, 0);
    if (sc_amqp_reply_error(amqp_get_rpc_reply(a->conn), "basic.qos", err, err_len))
        return -1;
    amqp_basic_consume(a->conn, SC_AMQP_CHANNEL, amqp_cstring_bytes(queue),
                       amqp_cstring_bytes(tag), 0, 0 /* manual ack */, 0, amqp_empty_table);
    if (sc_amqp_reply_error(amqp_get_rpc_reply(a->conn), "basic.consume", err, err_len))
        return -1;
    snprintf(a->consumer_tag, sizeof a->consumer_tag, "%s", tag);
    snprintf(a->queue, sizeof a->queue, "%s", queue);
    a->prefetch = prefetch;
    return 0;
}

int sc_amqp_frames_waiting(struct sc_amqp *a, int wait_ms)
{
    if (!a->conn)
        return 0;
    if (amqp_frames_enqueued(a->conn) || amqp_data_in_buffer(a->conn))
        return 1;
    amqp_socket_t *s = amqp_get_socket(a->conn);
    struct pollfd p = {.fd = s ? amqp_socket_get_sockfd(s) : -1, .events = POLLIN};
    return p.fd >= 0 && poll(&p, 1, wait_ms) > 0;
}

enum sc_queue_state sc_amqp_check_queue(struct sc_amqp *a, const char *queue, uint32_t *ready,
                                        char *err, size_t err_len)
{
    *ready = 0;
    if (!a->check_open) {
        amqp_channel_open(a->conn, SC_AMQP_CHECK_CHANNEL);
        if (sc_amqp_reply_error(amqp_get_rpc_reply(a->conn), "amqp channel.open (queue check)", err,
                        err_len))
            return SC_QUEUE_UNKNOWN;
        a->check_open = 1;
    }
    /* Frames of other channels that arrive meanwhile are queued by the
     * library and read next, in order. */
    amqp_queue_declare_ok_t *ok = amqp_queue_declare(a->conn, SC_AMQP_CHECK_CHANNEL,
                                                     amqp_cstring_bytes(queue), 1, 0, 0, 0,
                                                     amqp_empty_table);
    amqp_rpc_reply_t r = amqp_get_rpc_reply(a->conn);
    if (r.reply_type == AMQP_RESPONSE_NORMAL && ok) {
        *ready = ok->message_count;
        return ok->consumer_count > 0 ? SC_QUEUE_CONSUMED : SC_QUEUE_UNCONSUMED;
    }
    char what[300];
    snprintf(what, sizeof what, "declare queue %.250s (passive, check)", queue);
    sc_amqp_reply_error(r, what, err, err_len);
    if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION && r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_t *m = r.reply.decoded;
        amqp_channel_close_ok_t close_ok;
        a->check_open = 0;
        if (amqp_send_method(a->conn, SC_AMQP_CHECK_CHANNEL, AMQP_CHANNEL_CLOSE_OK_METHOD,
                             &close_ok) != AMQP_STATUS_OK)
            return SC_QUEUE_UNKNOWN;
        if (m->reply_code == AMQP_NOT_FOUND)
            return SC_QUEUE_GONE;
    }
    return SC_QUEUE_UNKNOWN;
}

int sc_amqp_consume_again(struct sc_amqp *a, const struct sc_consumer_config *k, char *err,
                          size_t err_len)
{
    if (sc_amqp_declare_consumer(a, k, err, err_len))
        return -1;
    char tag[sizeof a->consumer_tag];
    memcpy(tag, a->consumer_tag, sizeof tag);
    return sc_amqp_start_consume(a, k->queue, a->prefetch, tag, err, err_len);
}

enum sc_amqp_recv sc_amqp_receive(struct sc_amqp *a, amqp_envelope_t *env, int timeout_ms,
                                  char *err, size_t err_len)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    amqp_maybe_release_buffers(a->conn);
    amqp_rpc_reply_t r = amqp_consume_message(a->conn, env, &tv, 0);
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return SC_AMQP_RECV_MESSAGE;
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && r.library_error == AMQP_STATUS_TIMEOUT)
        return SC_AMQP_RECV_TIMEOUT;
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
        r.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
        /* A frame other than a delivery is waiting: read it. */
        amqp_frame_t f;
        struct timeval wait = {1, 0};
        int rc = amqp_simple_wait_frame_noblock(a->conn, &f, &wait);
        if (rc != AMQP_STATUS_OK) {
            sc_amqp_fail(err, err_len, "amqp", amqp_error_string2(rc));
            return SC_AMQP_RECV_CLOSED;
        }
        if (f.frame_type != AMQP_FRAME_METHOD)
            return SC_AMQP_RECV_TIMEOUT;
        switch (f.payload.method.id) {
        case AMQP_CHANNEL_CLOSE_METHOD:
        case AMQP_CONNECTION_CLOSE_METHOD:
            sc_amqp_answer_close(a, &f, err, err_len);
            return SC_AMQP_RECV_CLOSED;
        case AMQP_BASIC_CANCEL_METHOD: {
            /* The channel stays open; RabbitMQ sends it with nowait. */
            amqp_basic_cancel_t *m = f.payload.method.decoded;
            snprintf(err, err_len, "the broker cancelled consumer %.*s of queue %s (queue deleted?)",
                     (int)m->consumer_tag.len, (const char *)m->consumer_tag.bytes,
                     a->queue[0] ? a->queue : "?");
            if (!m->nowait) {
                amqp_basic_cancel_ok_t ok = {m->consumer_tag};
                amqp_send_method(a->conn, f.channel, AMQP_BASIC_CANCEL_OK_METHOD, &ok);
            }
            return SC_AMQP_RECV_CANCELLED;
        }
        default:
            return SC_AMQP_RECV_TIMEOUT;
        }
    }
    sc_amqp_reply_error(r, "amqp receive", err, err_len);
    return SC_AMQP_RECV_CLOSED;
}

int sc_amqp_ack(struct sc_amqp *a, uint64_t tag, int multiple)
{
    return amqp_basic_ack(a->conn, SC_AMQP_CHANNEL, tag, multiple) == AMQP_STATUS_OK ? 0 : -1;
}

int sc_amqp_nack_requeue(struct sc_amqp *a, uint64_t tag, int multiple)
{
    return amqp_basic_nack(a->conn, SC_AMQP_CHANNEL, tag, multiple, 1) == AMQP_STATUS_OK ? 0 : -1;
}
