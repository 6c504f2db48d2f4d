/* The daemon's side of the batch core's seam: the worker's database session,
 * its plugin and its two broker connections. */
#include "consume/batch_io.h"

#include <string.h>

#include "consume/republish.h"
#include "consume/tenant_pool.h"
#include "consume/worker.h"

static int exec_(struct worker *w, const char *sql, struct sc_db_err *e)
{
    return sc_db_query(&w->db, sql, e);
}

static int claim(struct worker *w, const char *id, struct sc_db_err *e)
{
    return sc_db_insert_consumed(&w->db, w->c->k->name, id, e);
}

static int claim_many(struct worker *w, const char *const *ids, int n, struct sc_db_err *e)
{
    return sc_db_insert_consumed_many(&w->db, w->c->k->name, ids, n, e);
}

static int unclaim_many(struct worker *w, const char *const *ids, int n, struct sc_db_err *e)
{
    return sc_db_delete_consumed_many(&w->db, w->c->k->name, ids, n, e);
}

static int count_claims(struct worker *w, const char *const *ids, int n, long *found,
                        struct sc_db_err *e)
{
    return sc_db_count_consumed_many(&w->db, w->c->k->name, ids, n, found, e);
}

static int commit(struct worker *w, struct sc_db_err *e)
{
    return sc_db_commit(&w->db, e);
}

static int rollback(struct worker *w, struct sc_db_err *e)
{
    return sc_db_rollback(&w->db, e);
}

static int in_transaction(struct worker *w)
{
    return sc_db_in_transaction(&w->db);
}

static void last_error(struct worker *w, struct sc_db_err *e)
{
    sc_db_last_error(&w->db, e);
}

static int held_read(struct worker *w, const char *const *keys, int n, struct sc_held_row *rows,
                     struct sc_db_err *e)
{
    return sc_db_held_read(&w->db, w->c->k->name, keys, n, rows, e);
}

static int held_hold(struct worker *w, const char *key, const char *event_id, const char *token,
                     int64_t *seq, char *current, struct sc_db_err *e)
{
    return sc_db_held_hold(&w->db, w->c->k->name, key, event_id, token, seq, current, e);
}

static long held_left(struct worker *w, const char *key, char *first, struct sc_db_err *e)
{
    return sc_db_held_left(&w->db, w->c->k->name, key, first, e);
}

static sc_handler_status handle(struct worker *w, const struct sc_event *ev, char *reason,
                                size_t reason_len)
{
    return sc_plugin_handle(&w->c->plugin, w->db.conn, ev, reason, reason_len);
}

static int has_batch(struct worker *w)
{
    return w->c->plugin.handle_batch != NULL;
}

static int handle_batch(struct worker *w, const struct sc_event *const *evs, size_t n,
                        sc_handler_status *st, char *reasons, size_t reason_len)
{
    return sc_plugin_handle_batch(&w->c->plugin, w->db.conn, evs, n, st, reasons, reason_len);
}

/* The message_id of a member's copy: the id as the member wrote it, which
 * its structured copy is checked against (a UUID canonical); none when it
 * does not fit a message_id (an AMQP short string). */
static const char *member_id(const struct sc_parsed_event *e)
{
    if (!e->id_of_source)
        return e->ev.id;
    return strlen(e->ev.original_id) <= 255 ? e->ev.original_id : NULL;
}

/* A member of a batch-mode message is copied alone; any other event is its
 * delivery. */
static const struct sc_member_copy *member_of(const struct item *it, struct sc_member_copy *m)
{
    if (it->member < 0)
        return NULL;
    *m = (struct sc_member_copy){
        .index = it->member,
        .body = {it->body_len, (char *)it->dl->env.message.body.bytes + it->body_off},
        .id = it->parsed ? member_id(&it->ev) : NULL,
        .type = it->parsed ? it->ev.ev.type : NULL,
    };
    return m;
}

static int publish_dead(struct worker *w, const struct item *it, const char *why)
{
    struct sc_member_copy m;
    if (it->dl->behind_replay[0])
        return sc_republish_behind_replay(&w->out, w->c->k, &it->dl->env, it->dl->key,
                                          it->dl->behind_replay, it->hold_seq, &it->lf);
    return sc_republish_dead(&w->out, w->c->k, &it->dl->env, member_of(it, &m), it->attempt, why,
                             it->hold_seq, it->dl->tenant, &it->lf);
}

static int publish_retry(struct worker *w, const struct item *it, int delay_ms, const char *why)
{
    struct sc_member_copy m;
    return sc_republish_retry(&w->out, w->c->k, &it->dl->env, member_of(it, &m), it->attempt,
                              delay_ms, why, &it->lf);
}

static int ack(struct worker *w, uint64_t tag, int multiple)
{
    /* With tenants each delivery is acked alone, at the end of its round. */
    if (w->tenant && !multiple && sc_tenant_ack_defer(w, tag) == 0)
        return 0;
    if (w->tenant && !multiple)
        sc_tenant_settled(w, tag);
    return sc_amqp_ack(&w->in, tag, multiple);
}

static int nack(struct worker *w, uint64_t tag, int multiple)
{
    if (w->tenant && !multiple)
        sc_tenant_settled(w, tag);
    return sc_amqp_nack_requeue(&w->in, tag, multiple);
}

const struct sc_batch_io sc_batch_io_real = {
    .exec = exec_,
    .claim = claim,
    .claim_many = claim_many,
    .unclaim_many = unclaim_many,
    .count_claims = count_claims,
    .commit = commit,
    .rollback = rollback,
    .in_transaction = in_transaction,
    .last_error = last_error,
    .replace_session = sc_worker_reset_db,
    .held_read = held_read,
    .held_hold = held_hold,
    .held_left = held_left,
    .handle = handle,
    .has_batch = has_batch,
    .handle_batch = handle_batch,
    .publish_dead = publish_dead,
    .publish_retry = publish_retry,
    .ack = ack,
    .nack = nack,
    .keep_alive = sc_worker_keep_alive,
};
