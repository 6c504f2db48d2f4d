/* One broker sample of the console (console_sampler.h): each consumer's
 * queue and dead-letter queue by a passive queue.declare, which reads a
 * queue's depth and consumers without touching a message. */
#include <stdio.h>
#include <stdlib.h>

#include "console_sampler.h"
#include "io/sc_rabbitmq.h"

/* A passive queue.declare: the queue's depth and consumers. Returns 0; 1
 * when the broker refused it (no such queue, or not allowed: err says,
 * and the channel is open again); -1 when the connection is gone. */
static int passive_declare(struct sc_amqp *a, const char *queue, long long *msgs,
                           long long *cons, char *err, size_t err_len)
{
    amqp_queue_declare_ok_t *ok = amqp_queue_declare(a->conn, SC_AMQP_CHANNEL,
                                                     amqp_cstring_bytes(queue), 1, 0, 0, 0,
                                                     amqp_empty_table);
    if (ok) {
        *msgs = ok->message_count;
        *cons = ok->consumer_count;
        return 0;
    }
    amqp_rpc_reply_t r = amqp_get_rpc_reply(a->conn);
    if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION && r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_t *m = r.reply.decoded;
        snprintf(err, err_len, "%.*s", (int)m->reply_text.len, (const char *)m->reply_text.bytes);
        amqp_channel_close_ok_t close_ok;
        if (amqp_send_method(a->conn, SC_AMQP_CHANNEL, AMQP_CHANNEL_CLOSE_OK_METHOD, &close_ok) ||
            !amqp_channel_open(a->conn, SC_AMQP_CHANNEL))
            return -1;
        return 1;
    }
    snprintf(err, err_len, "%s", r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION
                                     ? amqp_error_string2(r.library_error)
                                     : "the broker closed the connection");
    return -1;
}

int sc_console_sample_amqp(const struct sc_console *con, struct sc_amqp *a,
                           struct amqp_reading *out, char *err, size_t err_len)
{
    if (!sc_amqp_connected(a) && sc_amqp_connect(a, &con->cfg_short, "sidecar console", err, err_len))
        return -1;
    size_t nk = con->cfg->n_consumers;
    long long *v = calloc(3 * (nk ? nk : 1), sizeof *v);
    char (*qe)[SC_CONSOLE_QUEUE_ERR_MAX] = calloc(nk ? nk : 1, sizeof *qe);
    if (!v || !qe) {
        free(v);
        free(qe);
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    for (size_t k = 0; k < nk; k++) {
        const struct sc_consumer_config *c = &con->cfg->consumers[k];
        long long dlq_cons = 0;
        char why[200] = "";
        v[k] = v[nk + k] = v[2 * nk + k] = -1;
        int rc = passive_declare(a, c->queue, &v[k], &v[nk + k], why, sizeof why);
        if (rc == 1)
            snprintf(qe[k], sizeof qe[k], "queue %s: %s", c->queue, why);
        if (rc >= 0) {
            rc = passive_declare(a, c->dead_letter_queue, &v[2 * nk + k], &dlq_cons, why, sizeof why);
            if (rc == 1 && !qe[k][0])
                snprintf(qe[k], sizeof qe[k], "queue %s: %s", c->dead_letter_queue, why);
        }
        if (rc < 0) {
            snprintf(err, err_len, "%s", why);
            sc_amqp_close(a);
            free(v);
            free(qe);
            return -1;
        }
    }
    out->counts = v;
    out->queue_err = qe;
    return 0;
}
