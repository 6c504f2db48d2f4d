/* What the broker connection's files share and no other file uses: the
 * text of a failed call, and the answer to a close the broker sent. */
#ifndef SC_AMQP_PRIVATE_H
#define SC_AMQP_PRIVATE_H

#include <stddef.h>

#include "io/amqp_conn.h"
#include "io/sc_rabbitmq.h"

/* Writes "what: detail" into err; returns -1. */
int sc_amqp_fail(char *err, size_t len, const char *what, const char *detail);
/* Describes an RPC reply; returns 0 for a normal reply, -1 otherwise. */
int sc_amqp_reply_error(amqp_rpc_reply_t r, const char *what, char *err, size_t len);
/* Answers a channel.close or connection.close the broker sent, so it can
 * release what it holds, and describes it in err. */
void sc_amqp_answer_close(struct sc_amqp *a, const amqp_frame_t *f, char *err, size_t err_len);

#endif
