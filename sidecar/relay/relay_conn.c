#include "relay_conn.h"

#include "log.h"

int64_t sc_relay_now(const struct sc_relay_core *c)
{
    return c->ops->now_ms(c->io);
}

void sc_relay_db_lost(struct sc_relay_core *c)
{
    c->ops->db_close(c->io);
    atomic_store(&c->m->db_connected, 0);
}

void sc_relay_amqp_lost(struct sc_relay_core *c)
{
    c->ops->amqp_close(c->io);
    atomic_store(&c->m->amqp_connected, 0);
}

/* Records a database failure. Logs only when the failing state changes (a
 * new error code), so a server that refuses every claim for an hour (read
 * only after a failover) gives one line, not one per retry. */
void sc_relay_db_failed(struct sc_relay_core *c, const char *what, const struct sc_db_err *e)
{
    c->db_fails++;
    if (e->code == c->db_state && c->db_fails > 1)
        return;
    c->db_state = e->code ? e->code : (unsigned)-1;
    sc_warn("relay: %s failed: error %u (SQLSTATE %s): %s; retrying with backoff, logged again "
            "when the error changes", what, e->code, e->sqlstate, e->msg);
}

void sc_relay_db_healthy(struct sc_relay_core *c)
{
    if (c->db_state)
        sc_info("relay: database works again after %llu failed attempts (last error %u)",
                c->db_fails, c->db_state == (unsigned)-1 ? 0 : c->db_state);
    c->db_state = 0;
    c->db_fails = 0;
}

/* 1 when the failed statement can simply run again on this connection: a
 * deadlock or lock wait, once the transaction is rolled back. Every other
 * class (connection, failure, one this code does not know) is 0. */
int sc_relay_rerun_in_place(struct sc_relay_core *c, const struct sc_db_err *e)
{
    switch (e->cls) {
    case SC_DBERR_DEADLOCK:
    case SC_DBERR_LOCK_WAIT: {
        struct sc_db_err rb = {0};
        return c->ops->rollback(c->io, &rb) == 0;
    }
    default:
        return 0;
    }
}

/* rabbitmq-c sends heartbeats only inside its own calls: before database
 * work the relay sends one itself once half the interval has passed, so no
 * statement starts with the broker already waiting long (the check of
 * mysql.lock_wait_timeout_s against amqp.heartbeat_s rests on this). */
void sc_relay_keep_alive(struct sc_relay_core *c)
{
    if (c->p.heartbeat_ms <= 0 || !c->ops->amqp_is_open(c->io))
        return;
    int64_t t = sc_relay_now(c);
    if (t - c->last_beat < c->p.heartbeat_ms / 2)
        return;
    c->last_beat = t;
    c->ops->heartbeat(c->io); /* a failure shows on the next broker call */
}

/* Opens what is closed. Returns 1 when both are open, else 0 with the
 * round's wait set. */
int sc_relay_connect_both(struct sc_relay_core *c)
{
    if (!c->ops->db_is_open(c->io)) {
        struct sc_db_err e = {0};
        if (c->ops->db_open(c->io, &e)) {
            sc_relay_db_failed(c, "database", &e);
            c->round_wait = c->ops->backoff_ms(c->io, ++c->connect_failures);
            return 0;
        }
        atomic_store(&c->m->db_connected, 1);
        sc_relay_keep_alive(c);
    }
    if (!c->ops->amqp_is_open(c->io)) {
        char err[512] = "";
        if (c->ops->amqp_open(c->io, err, sizeof err)) {
            c->round_wait = c->ops->backoff_ms(c->io, ++c->connect_failures);
            sc_warn("relay: broker: %s; attempt %llu, retrying in %d ms", err, ++c->broker_failures,
                    c->round_wait);
            return 0;
        }
        atomic_store(&c->m->amqp_connected, 1);
        c->last_beat = sc_relay_now(c);
    }
    c->connect_failures = c->broker_failures = 0;
    return 1;
}
