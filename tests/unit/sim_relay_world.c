/* The stand-ins behind struct sc_relay_ops: what a relay's calls do to the
 * simulated database and broker, with the faults the schedule draws, and
 * the invariants that are checked where the state changes (a mark, a
 * publish). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envelope/event.h"
#include "sim_relay.h"

/* splitmix64: one stream */
static uint64_t next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t sim_rand(struct sim_world *w)
{
    return next(&w->rng);
}

uint64_t sim_rand_order(struct sim_world *w)
{
    return next(&w->rng_order);
}

int sim_chance(struct sim_world *w, double p)
{
    return p > 0 && (double)(sim_rand(w) >> 11) * 0x1.0p-53 < p;
}

int64_t sim_range(struct sim_world *w, int64_t lo, int64_t hi)
{
    return hi <= lo ? lo : lo + (int64_t)(sim_rand(w) % (uint64_t)(hi - lo + 1));
}

int sim_size_chance(struct sim_world *w, double p)
{
    return p > 0 && (double)(next(&w->rng_size) >> 11) * 0x1.0p-53 < p;
}

int64_t sim_size_range(struct sim_world *w, int64_t lo, int64_t hi)
{
    return hi <= lo ? lo : lo + (int64_t)(next(&w->rng_size) % (uint64_t)(hi - lo + 1));
}

void sim_violation(struct sim_world *w, const char *fmt, ...)
{
    if (w->violation[0])
        return;
    int n = snprintf(w->violation, sizeof w->violation, "t=%lld ms: ", (long long)w->now);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->violation + n, sizeof w->violation - (size_t)n, fmt, ap);
    va_end(ap);
    sim_trace(w, "VIOLATION %s", w->violation);
}

void sim_trace(struct sim_world *w, const char *fmt, ...)
{
    if (!w->verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "# %8lld  ", (long long)w->now);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void sim_world_release(struct sim_world *w)
{
    for (int i = 0; i < SIM_MAX_RELAYS; i++) {
        free(w->relays[i].amqp.q);
        w->relays[i].amqp.q = NULL;
        w->relays[i].amqp.nq = w->relays[i].amqp.capq = 0;
    }
    free(w->copies);
    w->copies = NULL;
    w->n_copies = w->cap_copies = 0;
}

static struct sim_row *find_row(struct sim_world *w, const char *id, size_t len)
{
    for (int i = 0; i < w->n_rows; i++)
        if (strlen(w->rows[i].id) == len && memcmp(w->rows[i].id, id, len) == 0)
            return &w->rows[i];
    return NULL;
}

/* ---- the database ------------------------------------------------------------ */

static const struct {
    enum sc_db_error_class cls;
    unsigned code;
    const char *msg;
} db_errors[] = {
    {SC_DBERR_DEADLOCK, 1213, "Deadlock found when trying to get lock"},
    {SC_DBERR_LOCK_WAIT, 1205, "Lock wait timeout exceeded"},
    {SC_DBERR_CONNECTION, 2013, "Lost connection to server during query"},
    {SC_DBERR_FAILURE, 1290, "The MariaDB server is running with the --read-only option"},
    {SC_DBERR_DUPLICATE, 1062, "Duplicate entry"},
    {SC_DBERR_NONE, 0, "an error with no class"},
    /* a class added after this code was written (e.g. "not writable") */
    {(enum sc_db_error_class)(SC_DBERR_FAILURE + 1), 1836, "Running in read-only mode"},
    {(enum sc_db_error_class)(SC_DBERR_FAILURE + 7), 1047, "WSREP has not yet prepared node"},
};

static void fill_err(struct sc_db_err *e, int k)
{
    e->cls = db_errors[k].cls;
    e->code = db_errors[k].code;
    snprintf(e->sqlstate, sizeof e->sqlstate, "HY000");
    snprintf(e->msg, sizeof e->msg, "%s", db_errors[k].msg);
}

static int broken(struct sim_relay *r, struct sc_db_err *e)
{
    fill_err(e, 2);
    return -1;
}

/* A lock wait before the statement: at most lock_wait_timeout_s (the
 * server gives up then), one per step. The relay is held that long after
 * the step. */
static void maybe_stall(struct sim_relay *r)
{
    struct sim_world *w = r->w;
    if (r->stalled || !sim_chance(w, w->f_run.stall))
        return;
    r->stalled = 1;
    r->pending_stall = sim_chance(w, 0.3) ? w->lock_wait_ms : sim_range(w, 1, w->lock_wait_ms);
    r->last_stall = r->clock;
    w->st.stalls++;
    sim_trace(w, "r%d   database: statement waits %lld ms for a lock", r->idx, (long long)r->pending_stall);
}

/* A fault drawn for a statement: -1 none, else an index into db_errors. */
static int draw_fault(struct sim_relay *r, double p)
{
    struct sim_world *w = r->w;
    if (!sim_chance(w, p))
        return -1;
    w->st.db_faults++;
    return (int)sim_range(w, 0, (int64_t)(sizeof db_errors / sizeof db_errors[0]) - 1);
}

/* The statement failed with fault k: what that does to the session. */
static int fail_stmt(struct sim_relay *r, int k, struct sc_db_err *e, const char *what)
{
    fill_err(e, k);
    if (e->cls == SC_DBERR_CONNECTION)
        r->db_broken = 1;
    sim_trace(r->w, "r%d   database: %s fails: %u %s", r->idx, what, e->code, e->msg);
    return -1;
}

static int db_open(void *io, struct sc_db_err *e)
{
    struct sim_relay *r = io;
    if (sim_chance(r->w, r->w->f_run.db_connect)) {
        fill_err(e, 2);
        sim_trace(r->w, "r%d   database: connect fails", r->idx);
        return -1;
    }
    r->db_open = 1;
    r->db_broken = 0;
    return 0;
}

static void db_close(void *io)
{
    struct sim_relay *r = io;
    r->db_open = r->db_broken = 0;
}

static int db_is_open(void *io)
{
    return ((struct sim_relay *)io)->db_open;
}

static int rollback(void *io, struct sc_db_err *e)
{
    struct sim_relay *r = io;
    if (r->db_broken)
        return broken(r, e);
    int k = draw_fault(r, r->w->f_run.db / 2);
    if (k >= 0 && db_errors[k].cls == SC_DBERR_CONNECTION)
        return fail_stmt(r, k, e, "ROLLBACK");
    return 0;
}

static int same_aggregate(const struct sim_row *a, const struct sim_row *b)
{
    return strcmp(a->atype, b->atype) == 0 && strcmp(a->aid, b->aid) == 0;
}

/* An aggregate's order, as the claim statements have it: event_version,
 * then created_at, event_id (the rows' order in the world). */
int sim_before(const struct sim_row *y, const struct sim_row *x)
{
    return y->version < x->version || (y->version == x->version && y < x);
}

/* relay.ordering per_aggregate, as the claim statements have it: x is the
 * head of its aggregate (every earlier row PUBLISHED) and no row of its
 * aggregate is FAILED. */
static int aggregate_head(const struct sim_world *w, const struct sim_row *x)
{
    for (int i = 0; i < w->n_rows; i++) {
        const struct sim_row *y = &w->rows[i];
        if (y == x || !y->visible || !same_aggregate(x, y))
            continue;
        if (y->status == S_FAILED || (sim_before(y, x) && y->status != S_PUBLISHED))
            return 0;
    }
    return 1;
}

static int claimable(const struct sim_world *w, const struct sim_row *x)
{
    return !w->per_aggregate || aggregate_head(w, x);
}

static void lease(struct sim_relay *r, struct sim_row *x)
{
    struct sim_world *w = r->w;
    if (x->status == S_PUBLISHING)
        w->st.reclaimed++;
    x->status = S_PUBLISHING;
    x->owner = r->idx;
    x->lease_until = r->clock + w->lease_ms;
}

/* The claim: expired leases (lease_until < now) in lease order, then PENDING
 * rows in insertion order, at most max, in one transaction. Statements are
 * atomic here, which is what FOR UPDATE SKIP LOCKED and a short transaction
 * give: no two claims take the same row. */
static int claim(void *io, struct sc_relay_row *rows, int max, struct sc_db_err *e)
{
    struct sim_relay *r = io;
    struct sim_world *w = r->w;
    if (r->db_broken)
        return broken(r, e);
    maybe_stall(r);
    int k = draw_fault(r, w->f_run.db);
    if (k >= 0 && !sim_chance(w, w->f_run.db_commit))
        return fail_stmt(r, k, e, "claim");
    struct sim_row *pick[SIM_MAX_ROWS];
    char taken[SIM_MAX_ROWS] = {0};
    int n = 0;
    while (n < max) { /* expired leases, oldest lease first */
        int best = -1;
        for (int i = 0; i < w->n_rows; i++) {
            const struct sim_row *x = &w->rows[i];
            if (!taken[i] && x->visible && x->status == S_PUBLISHING && x->lease_until < r->clock &&
                claimable(w, x) && (best < 0 || x->lease_until < w->rows[best].lease_until))
                best = i;
        }
        if (best < 0)
            break;
        taken[best] = 1;
        pick[n++] = &w->rows[best];
    }
    for (int i = 0; i < w->n_rows && n < max; i++)
        if (w->rows[i].visible && w->rows[i].status == S_PENDING && claimable(w, &w->rows[i]))
            pick[n++] = &w->rows[i];
    if (k >= 0) { /* at COMMIT */
        int applied = db_errors[k].cls == SC_DBERR_CONNECTION && sim_chance(w, 0.5);
        if (applied) {
            w->st.unknown_commits++;
            for (int i = 0; i < n; i++)
                lease(r, pick[i]);
        }
        fail_stmt(r, k, e, applied ? "claim COMMIT (it did commit)" : "claim COMMIT");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        struct sim_row *x = pick[i];
        lease(r, x);
        x->claimed_at[r->idx] = r->clock;
        x->lease_set[r->idx] = x->lease_until;
        struct sc_relay_row *o = &rows[i];
        snprintf(o->event_id, sizeof o->event_id, "%.36s", x->id);
        o->aggregate_type = strdup(x->atype);
        o->aggregate_id = strdup(x->aid);
        o->event_type = strdup(x->etype);
        o->payload = strdup(x->payload);
        o->version = x->version;
        snprintf(o->time, sizeof o->time, "2026-12-01T10:00:00.%06dZ", (int)(x - w->rows));
    }
    sim_trace(w, "r%d   database: claimed %d rows (lease until %lld)", r->idx, n,
              (long long)(r->clock + w->lease_ms));
    return n;
}

/* A mark that commits: the conditional UPDATE's WHERE status = PUBLISHING
 * AND lease_owner = me, and the invariants of a PUBLISHED or FAILED row. */
static int apply_mark(struct sim_relay *r, struct sim_row *x, int to)
{
    struct sim_world *w = r->w;
    if (x->status != S_PUBLISHING || x->owner != r->idx)
        return 0;
    if (to == S_PUBLISHED) {
        int ok = 0;
        for (int i = 0; i < w->n_copies && !ok; i++) {
            const struct sim_copy *c = &w->copies[i];
            ok = c->row == (int)(x - w->rows) && c->relay == r->idx && c->owned && c->acked;
        }
        if (!ok)
            sim_violation(w, "relay %d marked %s PUBLISHED without a broker-acked copy published "
                          "under its lease", r->idx, x->id);
    } else if (x->kind == K_VALID) {
        sim_violation(w, "relay %d marked the valid row %s FAILED", r->idx, x->id);
    } else if (x->kind == K_TOO_LARGE) {
        w->st.too_large++;
    }
    x->status = to;
    x->owner = -1;
    x->lease_until = 0;
    x->marked_by = r->idx;
    w->unresolved--;
    return 1;
}

/* The lease a batch was claimed under must outlast the confirm waits up to
 * its mark unless a lock wait held this relay since (relay.lease_ms >
 * 2 x confirm_timeout_ms: the previous batch's wait and its own). */
static void check_window(struct sim_relay *r, const struct sim_row *x)
{
    int i = r->idx;
    if (r->clock > x->lease_set[i] && r->last_stall < x->claimed_at[i])
        sim_violation(r->w, "relay %d marks %s at %lld, after its lease ended (%lld; claimed at "
                      "%lld, lease_ms %d, confirm_timeout_ms %d) with no lock wait in between",
                      i, x->id, (long long)r->clock, (long long)x->lease_set[i],
                      (long long)x->claimed_at[i], r->w->lease_ms, r->w->confirm_ms);
}

static int mark_published(void *io, struct sc_relay_row *const *rows, int n, unsigned char *marked,
                          struct sc_db_err *e)
{
    struct sim_relay *r = io;
    struct sim_world *w = r->w;
    if (r->db_broken)
        return broken(r, e);
    struct sim_row *x[SC_BATCH_LIMIT];
    for (int i = 0; i < n; i++) {
        x[i] = find_row(w, rows[i]->event_id, strlen(rows[i]->event_id));
        check_window(r, x[i]);
    }
    maybe_stall(r);
    int k = draw_fault(r, w->f_run.db);
    if (k >= 0 && !sim_chance(w, w->f_run.db_commit))
        return fail_stmt(r, k, e, "mark PUBLISHED");
    if (k >= 0) {
        int applied = db_errors[k].cls == SC_DBERR_CONNECTION && sim_chance(w, 0.5);
        if (applied) {
            w->st.unknown_commits++;
            for (int i = 0; i < n; i++)
                apply_mark(r, x[i], S_PUBLISHED);
        }
        return fail_stmt(r, k, e, applied ? "mark COMMIT (it did commit)" : "mark COMMIT");
    }
    int m = 0;
    for (int i = 0; i < n; i++) {
        marked[i] = (unsigned char)apply_mark(r, x[i], S_PUBLISHED);
        m += marked[i];
    }
    r->told_published += (unsigned)m;
    r->told_lost += (unsigned)(n - m);
    sim_trace(w, "r%d   database: marked %d of %d PUBLISHED", r->idx, m, n);
    return 0;
}

static int mark_failed(void *io, const struct sc_relay_row *row, struct sc_db_err *e)
{
    struct sim_relay *r = io;
    struct sim_world *w = r->w;
    if (r->db_broken)
        return broken(r, e);
    struct sim_row *x = find_row(w, row->event_id, strlen(row->event_id));
    maybe_stall(r);
    int k = draw_fault(r, w->f_run.db);
    if (k >= 0 && !sim_chance(w, w->f_run.db_commit))
        return fail_stmt(r, k, e, "mark FAILED");
    if (k >= 0) {
        int applied = db_errors[k].cls == SC_DBERR_CONNECTION && sim_chance(w, 0.5);
        if (applied) {
            w->st.unknown_commits++;
            apply_mark(r, x, S_FAILED);
        }
        return fail_stmt(r, k, e, "mark FAILED COMMIT");
    }
    int m = apply_mark(r, x, S_FAILED);
    if (m)
        r->told_failed++;
    else
        r->told_lost++;
    sim_trace(w, "r%d   database: %s FAILED: %s", r->idx, x->id, m ? "marked" : "not ours");
    return m;
}

/* ---- the broker ----------------------------------------------------------------- */

/* Whether the connection still lives at the relay's clock: a scheduled drop,
 * or the broker closing it after two heartbeat intervals of silence. */
static int alive(struct sim_relay *r)
{
    struct sim_world *w = r->w;
    struct sim_conn *c = &r->amqp;
    if (!c->open || c->dead)
        return 0;
    if (r->clock >= c->drop_at) {
        c->dead = 1;
        w->st.drops++;
        sim_trace(w, "r%d   broker: connection dropped", r->idx);
        return 0;
    }
    if (w->heartbeat_ms > 0 && r->clock - c->last_send > 2LL * w->heartbeat_ms) {
        c->dead = 1;
        sim_violation(w, "the broker closed relay %d's connection: silent for %lld ms, more than two "
                      "heartbeats of %d ms (lock_wait_timeout %d ms)", r->idx,
                      (long long)(r->clock - c->last_send), w->heartbeat_ms, w->lock_wait_ms);
        return 0;
    }
    return 1;
}

/* rabbitmq-c sends a heartbeat inside its calls once an interval passed. */
static void library_heartbeats(struct sim_relay *r)
{
    int hb = r->w->heartbeat_ms;
    if (hb > 0 && r->clock - r->amqp.last_send >= hb)
        r->amqp.last_send += (r->clock - r->amqp.last_send) / hb * hb;
}

static int amqp_open(void *io, char *err, size_t err_len)
{
    struct sim_relay *r = io;
    struct sim_world *w = r->w;
    if (sim_chance(w, w->f_run.amqp_connect)) {
        snprintf(err, err_len, "connection refused");
        return -1;
    }
    struct sim_conn *c = &r->amqp;
    c->open = 1;
    c->dead = 0;
    c->chan = CH_OPEN;
    c->next_seq = 1;
    c->last_send = r->clock;
    c->nq = 0;
    c->drop_at = sim_chance(w, w->f_run.drop) ? r->clock + sim_range(w, 0, 4 * w->confirm_ms) : SIM_NEVER;
    return 0;
}

static void amqp_close(void *io)
{
    struct sim_relay *r = io;
    r->amqp.open = 0;
    r->amqp.nq = 0;
}

static int amqp_is_open(void *io)
{
    return ((struct sim_relay *)io)->amqp.open;
}

/* What a consumer makes of the message: the envelope must parse, with the
 * row's id and the payload as data, byte for byte. */
static void check_body(struct sim_world *w, struct sim_row *x, const struct sc_publish *m)
{
    if (x->body_checked)
        return;
    x->body_checked = 1;
    struct sc_parsed_event ev;
    char why[256] = "";
    if (sc_event_parse(m->body.bytes, m->body.len, m->props->message_id.bytes, m->props->message_id.len,
                       &ev, why, sizeof why)) {
        sim_violation(w, "the consumer refuses the message of %s: %s", x->id, why);
        return;
    }
    if (strcmp(ev.ev.id, x->id) != 0 || !ev.ev.data_json || strcmp(ev.ev.data_json, x->payload) != 0 ||
        strcmp(m->routing_key, x->etype) != 0)
        sim_violation(w, "the message of %s differs from its row", x->id);
    sc_event_free(&ev);
}

/* relay.ordering per_aggregate: a relay never publishes an event while an
 * earlier one of its aggregate is not PUBLISHED (a repeat of a row already
 * PUBLISHED included), so the broker's first acked copies of an aggregate
 * come in event_version, created_at, event_id order. */
static void check_order(struct sim_world *w, const struct sim_relay *r, const struct sim_row *x)
{
    w->st.ordered_publishes++;
    for (const struct sim_row *y = w->rows; y < w->rows + w->n_rows; y++)
        if (y != x && sim_before(y, x) && y->visible && same_aggregate(x, y) && y->status != S_PUBLISHED)
            sim_violation(w, "relay %d publishes %s of aggregate %s/%s while the earlier %s is %s", r->idx,
                          x->id, x->atype, x->aid, y->id,
                          y->status == S_PENDING ? "PENDING" : y->status == S_PUBLISHING ? "PUBLISHING" : "FAILED");
}

static int publish(void *io, struct sc_publish *msgs, size_t n, char *err, size_t err_len)
{
    struct sim_relay *r = io;
    struct sim_world *w = r->w;
    struct sim_conn *c = &r->amqp;
    int up = alive(r);
    if (up && c->chan == CH_CLOSED) {
        sim_violation(w, "relay %d published on a channel the broker closed, without opening it again",
                      r->idx);
        c->dead = 1; /* RabbitMQ closes the connection: 504 CHANNEL_ERROR */
        up = 0;
    }
    for (size_t i = 0; i < n; i++) {
        struct sim_row *x = find_row(w, msgs[i].props->message_id.bytes, msgs[i].props->message_id.len);
        if (x && x->kind == K_INVALID)
            sim_violation(w, "relay %d offered the invalid row %s to the broker", r->idx, x->id);
        if (msgs[i].body.len > (size_t)w->max_message_bytes)
            sim_violation(w, "relay %d offered %s, %zu bytes, above relay.max_message_bytes (%d)", r->idx,
                          x ? x->id : "?", msgs[i].body.len, w->max_message_bytes);
        if (msgs[i].body.len > SC_RELAY_LONE_BYTES) {
            int others = n > 1;
            for (int j = 0; j < c->nq; j++)
                others |= c->q[j].awaited;
            if (others && up && c->chan == CH_OPEN)
                sim_violation(w, "relay %d sent %s (%zu bytes, above %d) with other messages unconfirmed "
                              "on its channel: had the broker refused it, they would be in doubt",
                              r->idx, x ? x->id : "?", msgs[i].body.len, SC_RELAY_LONE_BYTES);
        }
        if (!up || !x || strlen(msgs[i].routing_key) > 255 || x->kind == K_POISON) {
            for (size_t j = i; j < n; j++)
                msgs[j].result = SC_PUB_FAILED;
            snprintf(err, err_len, "basic.publish: %s", up ? "invalid AMQP data" : "connection closed");
            if (up)
                w->st.refused++;
            return -1;
        }
        msgs[i].result = SC_PUB_PENDING;
        msgs[i].seq = c->next_seq++;
        c->last_send = r->clock;
        if (w->per_aggregate)
            check_order(w, r, x);
        if (c->chan == CH_CLOSING) { /* the broker drops what comes after on the closed channel */
            sim_trace(w, "r%d   broker: %s dropped, its channel is closed", r->idx, x->id);
            continue;
        }
        if (w->broker_max && msgs[i].body.len > (size_t)w->broker_max) {
            /* 406: the channel closes, and no confirm still owed comes any more, but some may
             * have left before the close */
            c->chan = CH_CLOSING;
            snprintf(c->close_why, sizeof c->close_why, "channel closed by broker: 406 "
                     "PRECONDITION_FAILED - message size %zu is larger than configured max size %d",
                     msgs[i].body.len, w->broker_max);
            w->st.broker_refusals++;
            int kept = 0, awaited = 0;
            for (int j = 0; j < c->nq; j++) {
                struct sim_event *ev = &c->q[j];
                awaited += ev->awaited;
                if (ev->awaited && sim_size_chance(w, 0.5) && !ev->returned) {
                    ev->at = r->clock; /* it left before the close */
                    c->q[kept++] = *ev;
                }
            }
            c->nq = kept;
            w->st.in_doubt += awaited > kept;
            sim_trace(w, "r%d   broker: refuses %s (%zu bytes): channel closed, %d of %d confirms owed "
                      "left before", r->idx, x->id, msgs[i].body.len, kept, awaited);
            continue;
        }
        check_body(w, x, &msgs[i]);
        if (w->n_copies == w->cap_copies) {
            w->cap_copies = w->cap_copies ? w->cap_copies * 2 : 64;
            w->copies = realloc(w->copies, (size_t)w->cap_copies * sizeof *w->copies);
        }
        int row = (int)(x - w->rows);
        w->copies[w->n_copies] = (struct sim_copy){row, r->idx, x->status == S_PUBLISHING && x->owner == r->idx, 0};
        if (c->nq == c->capq) {
            c->capq = c->capq ? c->capq * 2 : 32;
            c->q = realloc(c->q, (size_t)c->capq * sizeof *c->q);
        }
        struct sim_event *ev = &c->q[c->nq++];
        ev->awaited = 1;
        ev->seq = msgs[i].seq;
        ev->copy = w->n_copies++;
        ev->ack = !sim_chance(w, w->f_run.nack);
        ev->returned = sim_chance(w, w->f_run.ret);
        int late = sim_chance(w, w->f_run.late);
        w->st.late += (unsigned)late;
        ev->at = r->clock + (late ? sim_range(w, w->confirm_ms + 1, 3 * w->confirm_ms)
                                  : sim_range(w, 0, w->confirm_ms / 2));
        sim_trace(w, "r%d   broker: publish %s seq %llu%s, confirm %s at %lld", r->idx, x->id,
                  (unsigned long long)ev->seq, w->copies[ev->copy].owned ? "" : " (lease not held)",
                  ev->returned ? "return+ack" : ev->ack ? "ack" : "nack", (long long)ev->at);
    }
    return 0;
}

/* amqp_publish.c's rules: an ack or nack settles the pending message of its
 * sequence number (all up to it with `multiple`); a basic.return makes a
 * pending message RETURNED, and the ack after it settles it. */
static int deliver(struct sim_relay *r, struct sim_event *ev, struct sc_publish *msgs, size_t n)
{
    struct sim_world *w = r->w;
    struct sim_conn *c = &r->amqp;
    int settled = 0;
    const struct sim_copy *cp = &w->copies[ev->copy];
    if (ev->returned)
        for (size_t i = 0; i < n; i++)
            if (msgs[i].result == SC_PUB_PENDING && msgs[i].seq == ev->seq &&
                strcmp(w->rows[cp->row].id, msgs[i].props->message_id.bytes) == 0) {
                msgs[i].result = SC_PUB_RETURNED;
                break;
            }
    int multiple = 0;
    if (ev->ack && c->chan == CH_OPEN && sim_chance(w, w->f_run.multiple)) {
        multiple = 1; /* legal only when nothing below it is still unconfirmed */
        for (int j = 0; j < c->nq; j++)
            multiple &= c->q[j].seq >= ev->seq;
        w->st.multiple += (unsigned)multiple;
    }
    for (size_t i = 0; i < n; i++) {
        if (!(msgs[i].seq == ev->seq || (multiple && msgs[i].seq <= ev->seq)))
            continue;
        if (msgs[i].result == SC_PUB_PENDING) {
            msgs[i].result = ev->ack ? SC_PUB_ACKED : SC_PUB_NACKED;
            settled++;
        } else if (msgs[i].result == SC_PUB_RETURNED && msgs[i].seq != 0) {
            msgs[i].seq = 0;
            settled++;
        }
    }
    if (ev->ack && !ev->returned) /* routed to a queue and confirmed */
        w->copies[ev->copy].acked = 1;
    return settled;
}

/* Takes the earliest event due by `until` off the queue. */
static int next_event(struct sim_conn *c, int64_t until, struct sim_event *out)
{
    int best = -1;
    for (int j = 0; j < c->nq; j++)
        if (c->q[j].at <= until && (best < 0 || c->q[j].at < c->q[best].at))
            best = j;
    if (best < 0)
        return 0;
    *out = c->q[best];
    c->q[best] = c->q[--c->nq];
    return 1;
}

/* The relay waited for these: a confirm arriving later is no longer awaited. */
static void wait_ended(struct sim_conn *c)
{
    for (int j = 0; j < c->nq; j++)
        c->q[j].awaited = 0;
}

static int collect(void *io, struct sc_publish *msgs, size_t n, int timeout_ms,
                   enum sc_amqp_error_class *cls, char *err, size_t err_len)
{
    struct sim_relay *r = io;
    struct sim_conn *c = &r->amqp;
    size_t pending = 0;
    for (size_t i = 0; i < n; i++)
        pending += msgs[i].result == SC_PUB_PENDING;
    int up = alive(r);
    *cls = SC_AMQPERR_CONNECTION;
    if (up && c->chan != CH_OPEN) {
        /* the confirms that left before the close, then channel.close */
        struct sim_event ev;
        while (next_event(c, INT64_MAX, &ev))
            deliver(r, &ev, msgs, n);
        for (size_t i = 0; i < n; i++)
            if (msgs[i].result == SC_PUB_PENDING)
                msgs[i].result = SC_PUB_FAILED;
        if (c->chan == CH_CLOSED)
            sim_violation(r->w, "relay %d waits for confirms on a channel it was told is closed", r->idx);
        c->chan = CH_CLOSED;
        library_heartbeats(r);
        snprintf(err, err_len, "%s", c->close_why);
        *cls = SC_AMQPERR_REFUSED;
        return -1;
    }
    int64_t deadline = r->clock + timeout_ms;
    struct sim_event ev;
    while (up && pending > 0) {
        int64_t until = deadline < c->drop_at ? deadline : c->drop_at - 1;
        if (!next_event(c, until, &ev))
            break;
        r->clock = ev.at > r->clock ? ev.at : r->clock;
        pending -= (size_t)deliver(r, &ev, msgs, n);
    }
    if (up && pending > 0)
        r->clock = deadline < c->drop_at ? deadline : c->drop_at;
    library_heartbeats(r);
    wait_ended(c);
    if (!up || r->clock >= c->drop_at) {
        alive(r);
        for (size_t i = 0; i < n; i++)
            if (msgs[i].result == SC_PUB_PENDING)
                msgs[i].result = SC_PUB_FAILED;
        snprintf(err, err_len, "waiting for publisher confirms: connection reset");
        return -1;
    }
    int acked = 0;
    for (size_t i = 0; i < n; i++) {
        if (msgs[i].result == SC_PUB_PENDING)
            msgs[i].result = SC_PUB_TIMEOUT;
        acked += msgs[i].result == SC_PUB_ACKED;
    }
    return acked;
}

/* Drains what arrived (late confirms of earlier batches: not matched). */
static int service(void *io, char *err, size_t err_len)
{
    struct sim_relay *r = io;
    if (!alive(r)) {
        snprintf(err, err_len, "amqp: connection closed");
        return -1;
    }
    if (r->amqp.chan == CH_CLOSING) { /* sc_amqp_service reads the close: the relay reconnects */
        r->amqp.chan = CH_CLOSED;
        snprintf(err, err_len, "%s", r->amqp.close_why);
        return -1;
    }
    struct sim_event ev;
    while (next_event(&r->amqp, r->clock, &ev))
        deliver(r, &ev, NULL, 0);
    library_heartbeats(r);
    return 0;
}

/* channel.open and confirm.select again, after the broker closed it. */
static int reopen(void *io, char *err, size_t err_len)
{
    struct sim_relay *r = io;
    struct sim_world *w = r->w;
    struct sim_conn *c = &r->amqp;
    if (!alive(r)) {
        snprintf(err, err_len, "amqp channel.open: connection closed");
        return -1;
    }
    if (c->chan != CH_CLOSED)
        sim_violation(w, "relay %d opened its channel again while the broker had not closed it", r->idx);
    if (sim_size_chance(w, w->f_run.amqp_connect)) {
        c->dead = 1;
        snprintf(err, err_len, "amqp channel.open: connection reset");
        return -1;
    }
    c->chan = CH_OPEN;
    c->next_seq = 1;
    c->nq = 0;
    c->last_send = r->clock;
    w->st.reopens++;
    sim_trace(w, "r%d   broker: channel opened again", r->idx);
    return 0;
}

static int heartbeat(void *io)
{
    struct sim_relay *r = io;
    if (!alive(r))
        return -1;
    r->amqp.last_send = r->clock;
    return 0;
}

static int64_t now_ms(void *io)
{
    return ((struct sim_relay *)io)->clock;
}

/* The daemon's backoff shape (doubling, a quarter of jitter) from the
 * schedule's PRNG, capped at 2 s so a schedule stays short. */
static int backoff_ms(void *io, unsigned long long k)
{
    struct sim_relay *r = io;
    int base = 100;
    for (unsigned long long i = 1; i < k && base < 2000; i++)
        base *= 2;
    base = base > 2000 ? 2000 : base;
    return base + (int)sim_range(r->w, 0, base / 4);
}

const struct sc_relay_ops sim_ops = {
    .db_open = db_open,
    .db_close = db_close,
    .db_is_open = db_is_open,
    .claim = claim,
    .mark_published = mark_published,
    .mark_failed = mark_failed,
    .rollback = rollback,
    .amqp_open = amqp_open,
    .amqp_close = amqp_close,
    .amqp_is_open = amqp_is_open,
    .publish = publish,
    .collect = collect,
    .reopen = reopen,
    .service = service,
    .heartbeat = heartbeat,
    .now_ms = now_ms,
    .backoff_ms = backoff_ms,
};
