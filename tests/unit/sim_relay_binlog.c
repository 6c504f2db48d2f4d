/* A deterministic simulation of the binlog relay: the real relay core and
 * the real binlog source core (sidecar/relay/binlog_core.c, with the
 * transaction tracking of binlog_tx.c) against stand-ins of the binary
 * log, the outbox table, the checkpoint row and the broker. One seed draws
 * a configuration, 1-2 relays, a history of producer transactions and
 * which faults this run has until a time when they stop:
 *
 *  - the log: transactions of 1..N outbox inserts (in one or more rows
 *    events, a SAVEPOINT between them), committed in order, with other
 *    tables' transactions, DDL,
 *    rotations and the relay's own checkpoint writes between them; rolled
 *    back transactions are in the table for a while, never in the log;
 *  - faults: the stream cut at any event (inside a transaction too); a
 *    stream that opens failing; a server that, after a reconnect, sends
 *    again from an earlier transaction (saying so in its rotate); a row
 *    read back before InnoDB shows it (a lock wait, or briefly absent); a
 *    read-back failing; a checkpoint write failing (an error, or a lost
 *    connection at its commit: written or not); nacks, confirms too late,
 *    broker connections dropped; a relay killed and started again from
 *    the stored checkpoint; a relay paused past its lease (a standby takes
 *    the lease).
 *
 * Invariants, checked where the state changes and after every step:
 *
 *  - nothing rolled back is ever published;
 *  - a checkpoint written is a transaction's boundary, and never passes a
 *    transaction that holds a row no broker confirmed (and is not FAILED);
 *  - the checkpoint never moves back while one relay holds the lease;
 *  - an aggregate's first publications follow commit order;
 *  - the checkpoint's watermark (binlog_watermark.c, sampled as
 *    binlog_source.c does: the time, the oldest open transaction, the log's
 *    end) never passes the created_at of a row that is neither confirmed
 *    nor FAILED, open transactions held long included;
 *  - faults stop => every committed outbox row is published (a valid one,
 *    confirmed) or FAILED (one that breaks an envelope rule), in bounded
 *    time;
 *  - with relay.ordering per_aggregate (half the seeds) a row that breaks a
 *    rule holds the rest of its aggregate: nothing after it is published
 *    (first copies) until it is repaired (most are, at a drawn time: set
 *    PENDING again, its held mark kept), and the checkpoint never passes a
 *    row that is neither confirmed, FAILED nor held; then the repaired
 *    row and what it held are published, in commit order; without it a
 *    repaired row is published all the same.
 *
 *   sim_relay_binlog                    20,000 schedules from seed 1 (TAP; 4,000
 *                                       under ASan; SC_SIM_SCHEDULES=K for another number)
 *   sim_relay_binlog --seed N --verbose one schedule, traced on stderr
 *   sim_relay_binlog --first N --schedules K
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "relay/binlog_core.h"
#include "relay/binlog_source.h"
#include "relay/binlog_watermark.h"
#include "relay/relay_core.h"
#include "relay/relay_db.h"

#define MAX_RELAYS 2
#define MAX_TX 40
#define MAX_ROWS 256
#define NEVER INT64_MAX
/* The simulation's time 0 as the watermark's microseconds since the epoch. */
#define EPOCH_US 1700000000000000LL
#define WM_EVERY_MS 2000 /* binlog_source.c's sample interval */

/* ---- the world ------------------------------------------------------------------ */

enum ev_kind { EV_FORMAT, EV_ROTATE, EV_GTID, EV_BEGIN, EV_TABLE, EV_ROWS, EV_SAVEPOINT, EV_XID, EV_COMMIT, EV_DDL };

struct ev {
    enum ev_kind kind;
    int file;                    /* bin.%06d */
    unsigned long long pos, next;
    int tx;                      /* producer transaction, -1 for the relay's own writes */
    const char *table;           /* EV_TABLE, EV_ROWS */
    int row0, nrows;             /* EV_ROWS of outbox_event: rows[row0..row0+nrows) */
    int starts;                  /* a stream may start here: a transaction's boundary */
    int standalone;              /* EV_GTID of a DDL */
    unsigned long long seq;      /* EV_GTID */
    int64_t at;                  /* a stream can read it from then on */
};

enum tx_kind { TX_OUTBOX, TX_OTHER, TX_DDL, TX_ROLLBACK };

struct tx {
    enum tx_kind kind;
    int64_t commit_at;
    int row0, nrows, split;      /* rows events: split after row0+split */
    int logged;
    int end_file;                /* where it ends in the log, once logged */
    unsigned long long end_pos;
    int begin_query, commit_query, savepoint;
    int64_t begin_at;            /* its first statement (rows are created from then on) */
    int64_t logged_at;           /* the time of its events in the log, once logged */
};

struct row {
    char id[40];
    const char *atype, *aid, *payload;
    int tx, valid, rolled_back;
    int failed;                  /* status FAILED */
    int held;                    /* lease_until set on it: FAILED, or held behind a FAILED row */
    int marked;                  /* status PUBLISHED (a held row, published after the repair) */
    int64_t repair_at;           /* an invalid row: repaired (valid, PENDING) once FAILED after it; NEVER */
    int repaired;
    int broker_refuses;          /* an invalid row the envelope allows and the broker refuses (406) */
    int64_t visible_at;          /* InnoDB shows it (NEVER: rolled back) */
    int lock_wait;               /* 1: a locking read waits for it; 0: absent until then */
    int64_t lag;                 /* InnoDB shows it this long after its transaction is logged */
    int published, confirmed;    /* copies the broker took, copies it confirmed */
    int64_t created_at;          /* UTC_TIMESTAMP(6) of its insert, in [begin_at, commit_at] */
};

struct pending { uint64_t seq; int row, ack; int64_t at; };

struct conn {
    int open;
    int closing, closed;         /* the broker closed the channel over a message (406): not read yet, read */
    int64_t drop_at;
    uint64_t next_seq;
    struct pending q[64];
    int nq;
};

struct world;

struct relay {
    struct world *w;
    int idx, alive;
    char worker_id[16];
    struct sc_relay_core core;
    struct sc_binlog_core bcore;
    struct sc_relay_metrics m;
    int64_t clock, ready_at;
    int db_open;
    int stream_open;
    int next_ev;                 /* the stream's next event */
    int have_table;              /* outbox_event's TABLE_MAP seen in this file (binlog_stream.c's rule:
                                    rows events without it are another table's) */
    struct sc_binlog_tx tx;
    struct conn amqp;
    struct sc_binlog_wm wm;      /* the watermark's samples (process memory: lost with the relay) */
    int64_t wm_at;               /* the next sample */
};

struct faults {
    double cut, open_fail, dup_stream, read_fail, ckpt_error, ckpt_lost, nack, late, drop, crash, pause,
        invisible;
};

struct stats {
    unsigned long long schedules, steps, txs, rows, rolled_back, published, duplicates, cuts, cuts_mid_tx,
        dup_streams, lock_waits, absent_reads, read_fails, ckpt_writes, ckpt_errors, ckpt_lost_written,
        ckpt_lost_unwritten, nacks, lates, drops, crashes, pauses, takeovers, rotations, rewinds, failed_rows,
        wm_samples, wm_stores, wm_held, per_agg_schedules, repairs, held_marks, released, broker_refusals,
        reopens;
};

struct world {
    uint64_t seed, rng;
    int verbose;
    int n_relays, batch, lease_ms, confirm_ms, poll_ms, lock_wait_ms;
    int per_aggregate;           /* relay.ordering per_aggregate */
    struct faults f, f_run;
    int64_t now, fault_end, deadline;
    int quiet;
    int n_tx, n_rows;
    struct tx txs[MAX_TX];
    struct row rows[MAX_ROWS];
    struct ev *log;
    int n_log, cap_log, file;
    unsigned long long pos, gtid_seq;
    int64_t append_at;           /* the time of what is appended now (never before the last) */
    /* the checkpoint row */
    struct sc_binlog_pos ck;
    int ck_owner;                /* -1 none */
    int64_t ck_until;
    int tenure;                  /* the owner whose lease the positions below were written under */
    int first_pub_next;          /* per aggregate: checked at each first publication */
    int64_t ck_w;                /* the checkpoint's watermark (us since the epoch), 0 none */
    uint64_t rng2;               /* the transactions' start times: apart, so the other draws stay as they were */
    struct relay relays[MAX_RELAYS];
    char violation[700];
    struct stats st;
};

/* splitmix64 */
static uint64_t splitmix(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rnd(struct world *w)
{
    uint64_t z = (w->rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int chance(struct world *w, double p)
{
    return p > 0 && (double)(rnd(w) >> 11) * 0x1.0p-53 < p;
}

static int64_t range(struct world *w, int64_t lo, int64_t hi)
{
    return hi <= lo ? lo : lo + (int64_t)(rnd(w) % (uint64_t)(hi - lo + 1));
}

static void trace(struct world *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void trace(struct world *w, const char *fmt, ...)
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

/* The first violated invariant (later ones are consequences). */
static void violation(struct world *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violation(struct world *w, const char *fmt, ...)
{
    if (w->violation[0])
        return;
    int n = snprintf(w->violation, sizeof w->violation, "t=%lld ms: ", (long long)w->now);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->violation + n, sizeof w->violation - (size_t)n, fmt, ap);
    va_end(ap);
    trace(w, "VIOLATION %s", w->violation);
}

/* ---- the binary log --------------------------------------------------------------- */

static void file_name(int file, char *out, size_t len)
{
    snprintf(out, len, "bin.%06d", file);
}

static int file_of(const char *name)
{
    return name[0] ? atoi(name + 4) : 0;
}

/* Position order: file, then offset. */
static int pos_cmp(int fa, unsigned long long pa, int fb, unsigned long long pb)
{
    return fa != fb ? (fa < fb ? -1 : 1) : pa < pb ? -1 : pa > pb;
}

static struct ev *append(struct world *w, enum ev_kind kind, int tx, unsigned size)
{
    if (w->n_log == w->cap_log) {
        w->cap_log = w->cap_log ? 2 * w->cap_log : 256;
        w->log = realloc(w->log, (size_t)w->cap_log * sizeof *w->log);
        if (!w->log)
            abort();
    }
    struct ev *e = &w->log[w->n_log++];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->tx = tx;
    e->file = w->file;
    e->pos = w->pos;
    e->next = w->pos + size;
    e->at = w->append_at;
    w->pos = e->next;
    return e;
}

/* A new file: the rotate at the old one's end, its format description. */
static void rotate(struct world *w)
{
    append(w, EV_ROTATE, -1, 40)->starts = 1;
    w->file++;
    w->pos = 4;
    append(w, EV_FORMAT, -1, 120)->starts = 1;
    w->st.rotations++;
}

static void gtid(struct world *w, int tx, int standalone)
{
    struct ev *e = append(w, EV_GTID, tx, 40);
    e->starts = 1;
    e->standalone = standalone;
    e->seq = ++w->gtid_seq;
}

static void append_from(struct world *w, int64_t at)
{
    if (at > w->append_at)
        w->append_at = at;
}

/* The relay's own checkpoint write: a transaction of relay_checkpoint. */
static void log_checkpoint_write(struct world *w, int64_t at)
{
    append_from(w, at);
    gtid(w, -1, 0);
    append(w, EV_TABLE, -1, 60)->table = "relay_checkpoint";
    append(w, EV_ROWS, -1, 200)->table = "relay_checkpoint";
    append(w, EV_XID, -1, 31);
}

static void log_tx(struct world *w, int t)
{
    struct tx *x = &w->txs[t];
    append_from(w, x->commit_at);
    for (int k = 0; k < x->nrows; k++)
        w->rows[x->row0 + k].visible_at = w->append_at + w->rows[x->row0 + k].lag;
    if (chance(w, 0.1))
        rotate(w);
    if (x->kind == TX_DDL) {
        gtid(w, t, 1);
        append(w, EV_DDL, t, 90);
    } else {
        gtid(w, t, 0);
        if (x->begin_query)
            append(w, EV_BEGIN, t, 70);
        if (x->kind == TX_OTHER) {
            append(w, EV_TABLE, t, 60)->table = "orders";
            append(w, EV_ROWS, t, 150)->table = "orders";
        } else {
            if (chance(w, 0.3)) { /* the producer's own table in the same transaction */
                append(w, EV_TABLE, t, 60)->table = "orders";
                append(w, EV_ROWS, t, 150)->table = "orders";
            }
            int parts[2] = {x->split, x->nrows - x->split}, at = x->row0;
            for (int k = 0; k < 2; k++) {
                if (!parts[k])
                    continue;
                if (k == 1 && x->savepoint) /* logged as a statement inside the transaction */
                    append(w, EV_SAVEPOINT, t, 60);
                append(w, EV_TABLE, t, 70)->table = "outbox_event";
                struct ev *e = append(w, EV_ROWS, t, 30 + 200 * (unsigned)parts[k]);
                e->table = "outbox_event";
                e->row0 = at;
                e->nrows = parts[k];
                at += parts[k];
            }
        }
        append(w, x->commit_query ? EV_COMMIT : EV_XID, t, 31);
    }
    x->logged = 1;
    x->logged_at = w->append_at;
    x->end_file = w->file;
    x->end_pos = w->pos;
}

/* Transactions whose commit time has come reach the log (and the table). */
static void commit_due(struct world *w, int64_t at)
{
    for (int t = 0; t < w->n_tx; t++)
        if (!w->txs[t].logged && w->txs[t].kind != TX_ROLLBACK && w->txs[t].commit_at <= at)
            log_tx(w, t);
}

static int64_t next_commit(struct world *w)
{
    for (int t = 0; t < w->n_tx; t++)
        if (!w->txs[t].logged && w->txs[t].kind != TX_ROLLBACK)
            return w->txs[t].commit_at;
    return NEVER;
}

/* ---- the binlog source's ops ------------------------------------------------------- */

static enum sc_binlog_open s_stream_open(void *io, const struct sc_binlog_pos *from, struct sc_db_err *e)
{
    struct relay *r = io;
    struct world *w = r->w;
    if (chance(w, w->f_run.open_fail)) {
        snprintf(e->msg, sizeof e->msg, "COM_BINLOG_DUMP: Lost connection to server");
        e->cls = SC_DBERR_FAILURE;
        return SC_BINLOG_OPEN_FAILED;
    }
    struct sc_binlog_pos start = *from;
    if (!start.file[0]) {
        file_name(1, start.file, sizeof start.file);
        start.pos = 4;
    }
    int f = file_of(start.file), i = 0;
    while (i < w->n_log && pos_cmp(w->log[i].file, w->log[i].pos, f, start.pos) < 0)
        i++;
    if (i < w->n_log && pos_cmp(w->log[i].file, w->log[i].pos, f, start.pos) != 0)
        violation(w, "relay %d started its stream at %s:%llu, inside an event", r->idx, start.file, start.pos);
    if (i > 0 && chance(w, w->f_run.dup_stream)) {
        /* The server sends again from an earlier transaction, and its
         * first (fake) rotate says where. */
        int j = (int)range(w, 0, i - 1);
        while (j > 0 && !w->log[j].starts)
            j--;
        i = j;
        file_name(w->log[i].file, start.file, sizeof start.file);
        start.pos = w->log[i].pos;
        start.gtid[0] = 0;
        w->st.dup_streams++;
        trace(w, "r%d   binlog: the server sends again from %s:%llu (asked for %s:%llu)", r->idx, start.file,
              start.pos, from->file, from->pos);
    }
    sc_binlog_tx_start(&r->tx, &start);
    r->have_table = 0;
    r->next_ev = i;
    r->stream_open = 1;
    trace(w, "r%d   binlog: stream open at %s:%llu (event %d of %d)", r->idx, start.file, start.pos, i,
          w->n_log);
    return SC_BINLOG_OPENED;
}

static void s_stream_close(void *io)
{
    ((struct relay *)io)->stream_open = 0;
}

static int s_stream_is_open(void *io)
{
    return ((struct relay *)io)->stream_open;
}

/* One event through the real transaction tracking; outbox ids to ids. */
static void feed(struct relay *r, const struct ev *e, char (*ids)[37], int *n)
{
    struct world *w = r->w;
    char name[32], gt[64];
    switch (e->kind) {
    case EV_ROTATE:
        file_name(e->file + 1, name, sizeof name);
        sc_binlog_tx_rotate(&r->tx, name, strlen(name), 4);
        r->have_table = 0;
        break;
    case EV_GTID:
        snprintf(gt, sizeof gt, "0-1-%llu", e->seq);
        sc_binlog_tx_gtid(&r->tx, gt, e->standalone);
        break;
    case EV_BEGIN:
        sc_binlog_tx_query(&r->tx, "BEGIN", 5, e->next, 0);
        break;
    case EV_COMMIT:
        sc_binlog_tx_query(&r->tx, "COMMIT", 6, e->next, 0);
        break;
    case EV_SAVEPOINT:
        sc_binlog_tx_query(&r->tx, "SAVEPOINT `sp1`", 15, e->next, 0);
        break;
    case EV_DDL:
        sc_binlog_tx_query(&r->tx, "ALTER TABLE orders ADD COLUMN x INT", 35, e->next, 0);
        break;
    case EV_XID:
        sc_binlog_tx_xid(&r->tx, e->next, 0);
        break;
    case EV_TABLE:
        sc_binlog_tx_table(&r->tx, e->table);
        r->have_table |= strcmp(e->table, "outbox_event") == 0;
        break;
    case EV_ROWS:
        if (strcmp(e->table, "outbox_event") == 0 && r->have_table)
            for (int k = 0; k < e->nrows; k++)
                snprintf(ids[(*n)++], 37, "%s", w->rows[e->row0 + k].id);
        break;
    case EV_FORMAT:
        break;
    }
}

static int s_stream_read(void *io, char (*ids)[37], int have, int max, int cap, int wait_ms, char *err,
                         size_t err_len)
{
    struct relay *r = io;
    struct world *w = r->w;
    int n = have;
    if (!r->stream_open) {
        snprintf(err, err_len, "the binary log stream is closed");
        return -1;
    }
    while (n < max) {
        commit_due(w, r->clock);
        if (r->next_ev >= w->n_log || w->log[r->next_ev].at > r->clock) {
            if (n > 0)
                break;
            int64_t t = r->next_ev < w->n_log ? w->log[r->next_ev].at : next_commit(w);
            if (t <= r->clock + wait_ms) {
                r->clock = t > r->clock ? t : r->clock;
                continue;
            }
            r->clock += wait_ms;
            break;
        }
        if (chance(w, w->f_run.cut)) {
            w->st.cuts++;
            w->st.cuts_mid_tx += (unsigned)r->tx.in_tx;
            r->stream_open = 0;
            snprintf(err, err_len, "reading the binary log: Lost connection to server during query");
            trace(w, "r%d   binlog: stream cut before event %d%s", r->idx, r->next_ev,
                  r->tx.in_tx ? " (inside a transaction)" : "");
            return -1;
        }
        const struct ev *e = &w->log[r->next_ev++];
        if (e->kind == EV_ROWS && n + e->nrows > cap) {
            r->stream_open = 0;
            snprintf(err, err_len, "a rows event beyond the cap");
            return -1;
        }
        feed(r, e, ids, &n);
    }
    return n;
}

static struct sc_binlog_tx *s_stream_tx(void *io)
{
    return &((struct relay *)io)->tx;
}

static struct row *find_row(struct world *w, const char *id, size_t len)
{
    for (int i = 0; i < w->n_rows; i++)
        if (strlen(w->rows[i].id) == len && memcmp(w->rows[i].id, id, len) == 0)
            return &w->rows[i];
    return NULL;
}

static int db_lost(struct relay *r, struct sc_db_err *e, const char *what)
{
    r->db_open = 0;
    e->cls = SC_DBERR_CONNECTION;
    e->code = 2013;
    snprintf(e->msg, sizeof e->msg, "%s: Lost connection to server during query", what);
    return -1;
}

/* The row's columns as the read-back gives them: a row that breaks a rule
 * has no event type. */
static void take_row(struct world *w, const struct row *x, struct sc_relay_row *got)
{
    char version[8] = "1", time[40];
    snprintf(time, sizeof time, "2026-12-01T10:00:00.%06dZ", (int)(x - w->rows));
    char *f[10] = {(char *)x->id, (char *)x->atype, (char *)x->aid,
                   x->valid || x->broker_refuses ? "ORDER_ACCEPTED" : "", version,
                   (char *)x->payload, time, NULL, NULL, "PENDING"};
    (void)sc_relay_row_take(got, f);
}

static int s_read_rows(void *io, char (*ids)[37], int n, char *status, struct sc_relay_row *got,
                       struct sc_db_err *e)
{
    struct relay *r = io;
    struct world *w = r->w;
    if (!r->db_open)
        return db_lost(r, e, "read-back");
    if (chance(w, w->f_run.read_fail)) {
        w->st.read_fails++;
        return db_lost(r, e, "read-back");
    }
    int asked = 0;
    for (int i = 0; i < n; i++) {
        if (status[i])
            continue;
        asked++;
        struct row *x = find_row(w, ids[i], strlen(ids[i]));
        if (!x) {
            violation(w, "relay %d read back %s, an id the log does not have", r->idx, ids[i]);
            continue;
        }
        if (x->visible_at > r->clock && x->lock_wait) {
            /* the insert's lock: the shared lock waits for its commit */
            w->st.lock_waits++;
            if (x->visible_at - r->clock > w->lock_wait_ms) {
                r->clock += w->lock_wait_ms;
                e->cls = SC_DBERR_LOCK_WAIT;
                e->code = 1205;
                snprintf(e->msg, sizeof e->msg, "Lock wait timeout exceeded");
                return -1;
            }
            r->clock = x->visible_at;
        }
        if (x->visible_at > r->clock) {
            w->st.absent_reads++;
            trace(w, "r%d   database: %s not there yet (until %lld)", r->idx, x->id, (long long)x->visible_at);
            continue;
        }
        status[i] = x->marked ? SC_FOUND_OTHER : x->failed ? SC_FOUND_FAILED : x->held ? SC_FOUND_HELD
                                                                                 : SC_FOUND_PENDING;
        if (status[i] != SC_FOUND_OTHER)
            take_row(w, x, &got[i]);
        trace(w, "r%d   database: read back %s (%s)", r->idx, x->id,
              (const char *[]){"absent", "PENDING", "published", "FAILED", "held"}[(int)status[i]]);
    }
    return asked;
}

/* The positions a write may store: no transaction before it holds a row
 * the broker has not confirmed (or that is not FAILED). */
static void check_store(struct world *w, struct relay *r, const struct sc_binlog_pos *p)
{
    /* no position yet, the log's end, or where a stream may start */
    int f = file_of(p->file), boundary = !p->file[0] || (f == w->file && p->pos == w->pos);
    for (int i = 0; i < w->n_log && !boundary; i++)
        boundary = w->log[i].starts && w->log[i].file == f && w->log[i].pos == p->pos;
    if (!boundary) {
        violation(w, "relay %d stored the checkpoint %s:%llu, inside a transaction: no stream may start "
                  "there (its rows events would lack their GTID and, cut further on, their table map)", r->idx, p->file, p->pos);
        return;
    }
    for (int i = 0; i < w->n_rows; i++) {
        const struct row *x = &w->rows[i];
        const struct tx *t = &w->txs[x->tx];
        if (x->rolled_back || !t->logged || pos_cmp(t->end_file, t->end_pos, f, p->pos) > 0)
            continue;
        if (!x->confirmed && !x->failed && !x->held) {
            violation(w, "relay %d stored the checkpoint %s:%llu past transaction %d (ends bin.%06d:%llu) "
                      "whose row %s no broker confirmed, not FAILED nor held (%d copies published): a crash "
                      "now skips it",
                      r->idx, p->file, p->pos, x->tx, t->end_file, t->end_pos, x->id, x->published);
            return;
        }
    }
    if (w->tenure == r->idx && pos_cmp(f, p->pos, file_of(w->ck.file), w->ck.pos) < 0)
        violation(w, "relay %d moved the checkpoint back from %s:%llu to %s:%llu under its own lease", r->idx,
                  w->ck.file, w->ck.pos, p->file, p->pos);
}

static int s_ckpt_acquire(void *io, struct sc_binlog_pos *stored, struct sc_db_err *e)
{
    struct relay *r = io;
    struct world *w = r->w;
    if (!r->db_open)
        return db_lost(r, e, "checkpoint");
    if (chance(w, w->f_run.ckpt_error))
        return db_lost(r, e, "lease");
    if (w->ck_owner >= 0 && w->ck_owner != r->idx && w->ck_until >= r->clock)
        return 0;
    if (w->ck_owner != r->idx) {
        w->st.takeovers += (unsigned)(w->ck_owner >= 0);
        trace(w, "r%d   checkpoint: lease taken (was r%d's), at %s:%llu", r->idx, w->ck_owner, w->ck.file,
              w->ck.pos);
    }
    w->ck_owner = w->tenure = r->idx;
    w->ck_until = r->clock + w->lease_ms;
    log_checkpoint_write(w, r->clock);
    *stored = w->ck;
    return 1;
}

static int s_ckpt_store(void *io, const struct sc_binlog_pos *pos, struct sc_db_err *e)
{
    struct relay *r = io;
    struct world *w = r->w;
    if (!r->db_open)
        return db_lost(r, e, "checkpoint");
    if (chance(w, w->f_run.ckpt_error)) {
        w->st.ckpt_errors++;
        e->cls = SC_DBERR_FAILURE;
        e->code = 1290;
        snprintf(e->msg, sizeof e->msg, "The MariaDB server is running with the --read-only option");
        trace(w, "r%d   checkpoint: write fails", r->idx);
        return -1;
    }
    int lost = chance(w, w->f_run.ckpt_lost), written = !lost || chance(w, 0.5);
    if (w->ck_owner != r->idx) {
        if (lost)
            return db_lost(r, e, "checkpoint COMMIT");
        return 0; /* WHERE lease_owner = me: another relay's now */
    }
    if (written) {
        /* no position: the one this relay last stored or read, again */
        const struct sc_binlog_pos *p = pos ? pos : &r->bcore.stored;
        check_store(w, r, p);
        /* binlog_checkpoint.c: the samples this position reaches, in the same UPDATE */
        int64_t wm = sc_binlog_wm_passed(&r->wm, p);
        if (wm > w->ck_w) {
            w->ck_w = wm;
            w->st.wm_stores++;
        }
        w->ck = *p;
        w->ck_until = r->clock + w->lease_ms;
        w->st.ckpt_writes++;
        log_checkpoint_write(w, r->clock);
        if (pos)
            trace(w, "r%d   checkpoint: %s:%llu%s", r->idx, p->file, p->pos, lost ? " (then the connection is lost)" : "");
    }
    if (lost) {
        if (written)
            w->st.ckpt_lost_written++;
        else
            w->st.ckpt_lost_unwritten++;
        return db_lost(r, e, "checkpoint COMMIT");
    }
    return 1;
}

static void s_db_close(void *io)
{
    ((struct relay *)io)->db_open = 0;
}

static int64_t s_now_ms(void *io)
{
    return ((struct relay *)io)->clock;
}

static void s_sleep_ms(void *io, int ms)
{
    ((struct relay *)io)->clock += ms;
}

static void s_gone(void *io, const struct sc_db_err *e)
{
    struct relay *r = io;
    violation(r->w, "relay %d found its position gone (%s): the simulation purges nothing", r->idx, e->msg);
}

/* binlog_source.c's sample at the relay's clock c: a transaction is open
 * from begin_at until its events are in the log (a rolled back one until
 * its rollback); the server reports trx_started in whole seconds; E is the
 * end of what the log holds at c. */
static void s_watermark(void *io, const struct sc_binlog_pos *at)
{
    struct relay *r = io;
    struct world *w = r->w;
    sc_binlog_wm_passed(&r->wm, at);
    int64_t c = r->clock;
    if (c < r->wm_at)
        return;
    r->wm_at = c + WM_EVERY_MS;
    int64_t oldest = NEVER;
    for (int t = 0; t < w->n_tx; t++) {
        const struct tx *x = &w->txs[t];
        int open = x->begin_at <= c && (x->kind == TX_ROLLBACK ? c < x->commit_at : !x->logged || x->logged_at > c);
        if (open && x->begin_at < oldest)
            oldest = x->begin_at;
    }
    struct sc_binlog_pos end = {0};
    for (int i = w->n_log - 1; i >= 0; i--)
        if (w->log[i].at <= c) {
            file_name(w->log[i].file, end.file, sizeof end.file);
            end.pos = w->log[i].next;
            break;
        }
    long long age = oldest == NEVER ? -1 : c / 1000 - oldest / 1000;
    w->st.wm_held += (unsigned)(age > 0);
    w->st.wm_samples++;
    sc_binlog_wm_add(&r->wm, &end, sc_binlog_wm_candidate(EPOCH_US + c * 1000, age));
}

/* ---- the held aggregates' statements ------------------------------------------------ */

static int same_agg(const struct row *x, const char *type, const char *id)
{
    return strcmp(x->atype, type) == 0 && strcmp(x->aid, id) == 0;
}

/* A FAILED row's aggregate into h, with its created_at (take_row's). */
static void add_failed(struct world *w, struct sc_binlog_held *h, const struct row *x)
{
    char time[40];
    snprintf(time, sizeof time, "2026-12-01T10:00:00.%06dZ", (int)(x - w->rows));
    struct sc_binlog_held_agg *a = sc_binlog_held_add(h, x->atype, x->aid, 1);
    if (a)
        sc_binlog_held_failed_at(a, time, 0);
}

static int s_hold_rows(void *io, char (*ids)[37], int n, struct sc_db_err *e)
{
    struct relay *r = io;
    struct world *w = r->w;
    if (!r->db_open || chance(w, w->f_run.read_fail))
        return db_lost(r, e, "hold rows");
    if (w->ck_owner != r->idx) /* the statements' guard: this relay owns the checkpoint's lease */
        return 0;
    for (int i = 0; i < n; i++) {
        struct row *x = find_row(w, ids[i], strlen(ids[i]));
        if (x && !x->failed && !x->marked && !x->held) {
            x->held = 1;
            w->st.held_marks++;
        }
    }
    return 0;
}

static int s_held_load(void *io, struct sc_binlog_held *h, struct sc_db_err *e)
{
    struct relay *r = io;
    struct world *w = r->w;
    if (!r->db_open || chance(w, w->f_run.read_fail))
        return db_lost(r, e, "held aggregates");
    for (int i = 0; i < w->n_rows; i++) {
        const struct row *x = &w->rows[i];
        if (!x->rolled_back && w->txs[x->tx].logged && x->failed)
            add_failed(w, h, x);
        else if (!x->rolled_back && w->txs[x->tx].logged && x->held && !x->marked)
            sc_binlog_held_add(h, x->atype, x->aid, 0);
    }
    return 0;
}

static int s_held_failed(void *io, struct sc_binlog_held *h, struct sc_db_err *e)
{
    struct relay *r = io;
    struct world *w = r->w;
    if (!r->db_open || chance(w, w->f_run.read_fail))
        return db_lost(r, e, "FAILED aggregates");
    struct sc_binlog_held_agg *list[MAX_ROWS + 8];
    size_t n = sc_binlog_held_list(h, list, sizeof list / sizeof *list);
    for (size_t k = 0; k < n; k++) {
        list[k]->failed = 0;
        list[k]->first_time[0] = 0;
    }
    for (int i = 0; i < w->n_rows; i++)
        if (w->rows[i].failed)
            add_failed(w, h, &w->rows[i]);
    return 0;
}

static int s_log_end(void *io, struct sc_binlog_pos *end, struct sc_db_err *e)
{
    struct relay *r = io;
    struct world *w = r->w;
    if (!r->db_open)
        return db_lost(r, e, "SHOW BINARY LOGS");
    memset(end, 0, sizeof *end);
    file_name(w->file, end->file, sizeof end->file);
    end->pos = w->pos;
    return 0;
}

/* In row order: commit order, which the statement's created_at order is
 * for a producer whose writes to one aggregate are serial. */
static int s_held_rows(void *io, const char *type, const char *id, const char *before,
                       struct sc_relay_row *rows, int max, struct sc_db_err *e)
{
    struct relay *r = io;
    struct world *w = r->w;
    if (!r->db_open || chance(w, w->f_run.read_fail))
        return db_lost(r, e, "held rows");
    int n = 0;
    for (int i = 0; i < w->n_rows && n < max; i++) {
        const struct row *x = &w->rows[i];
        char time[40];
        snprintf(time, sizeof time, "2026-12-01T10:00:00.%06dZ", i);
        if (x->held && !x->failed && !x->marked && !x->rolled_back && (!type || same_agg(x, type, id)) &&
            (!before || strcmp(time, before) < 0))
            take_row(w, x, &rows[n++]);
    }
    return n;
}

static const struct sc_binlog_ops sim_binlog_ops = {
    .stream_open = s_stream_open,
    .stream_close = s_stream_close,
    .stream_is_open = s_stream_is_open,
    .stream_read = s_stream_read,
    .stream_tx = s_stream_tx,
    .read_rows = s_read_rows,
    .hold_rows = s_hold_rows,
    .held_load = s_held_load,
    .held_failed = s_held_failed,
    .held_rows = s_held_rows,
    .log_end = s_log_end,
    .ckpt_acquire = s_ckpt_acquire,
    .ckpt_store = s_ckpt_store,
    .db_close = s_db_close,
    .now_ms = s_now_ms,
    .sleep_ms = s_sleep_ms,
    .gone = s_gone,
    .watermark = s_watermark,
};

/* ---- the relay's ops: the database ------------------------------------------------- */

static int r_db_open(void *io, struct sc_db_err *e)
{
    struct relay *r = io;
    if (chance(r->w, r->w->f_run.open_fail)) {
        e->cls = SC_DBERR_CONNECTION;
        snprintf(e->msg, sizeof e->msg, "Can't connect to server");
        return -1;
    }
    r->db_open = 1;
    return 0;
}

static void r_db_close(void *io)
{
    struct relay *r = io;
    sc_binlog_core_db_closed(&r->bcore);
    r->db_open = 0;
}

static int r_db_is_open(void *io)
{
    return ((struct relay *)io)->db_open;
}

static int r_claim(void *io, struct sc_relay_row *rows, int max, struct sc_db_err *e)
{
    struct relay *r = io;
    return sc_binlog_core_claim(&r->bcore, rows, max, e);
}

/* As sc_binlog_mark_published: only held rows published after a repair
 * are written (PUBLISHED, their mark cleared). */
static int r_mark_published(void *io, struct sc_relay_row *const *rows, int n, unsigned char *marked,
                            struct sc_db_err *e)
{
    struct relay *r = io;
    struct world *w = r->w;
    memset(marked, 1, (size_t)n);
    int any = 0;
    for (int i = 0; i < n; i++)
        any |= rows[i]->released;
    if (!any)
        return 0;
    if (!r->db_open || chance(w, w->f_run.read_fail))
        return db_lost(r, e, "mark PUBLISHED");
    if (w->ck_owner != r->idx)
        return 0;
    for (int i = 0; i < n; i++) {
        struct row *x = rows[i]->released ? find_row(w, rows[i]->event_id, strlen(rows[i]->event_id)) : NULL;
        if (x && !x->failed && !x->marked) {
            x->marked = 1;
            x->held = 0;
        }
    }
    return 0;
}

static int r_held(void *io, const struct sc_relay_row *row)
{
    return sc_binlog_core_held(&((struct relay *)io)->bcore, row);
}

static void r_hold(void *io, const struct sc_relay_row *row)
{
    sc_binlog_core_hold(&((struct relay *)io)->bcore, row);
}

static int r_stale(void *io, const struct sc_relay_batch *b)
{
    return sc_binlog_core_stale(&((struct relay *)io)->bcore, b);
}

static int r_mark_held(void *io, struct sc_relay_row *const *rows, int n, struct sc_db_err *e)
{
    char (*ids)[37] = calloc((size_t)n, sizeof *ids);
    for (int i = 0; ids && i < n; i++)
        memcpy(ids[i], rows[i]->event_id, sizeof ids[0]);
    int rc = ids ? s_hold_rows(io, ids, n, e) : -1;
    free(ids);
    return rc;
}

static int r_mark_failed(void *io, const struct sc_relay_row *row, struct sc_db_err *e)
{
    struct relay *r = io;
    struct world *w = r->w;
    if (!r->db_open)
        return db_lost(r, e, "mark FAILED");
    struct row *x = find_row(w, row->event_id, strlen(row->event_id));
    if (!x)
        return 1;
    /* the guard: its lease, a row still PENDING, without the held mark unless it was released */
    if (w->ck_owner != r->idx || x->failed || x->marked || (row->released ? !x->held : x->held))
        return 0;
    if (x->valid)
        violation(w, "relay %d marked the valid row %s FAILED", r->idx, x->id);
    if (!x->failed)
        w->st.failed_rows++;
    x->failed = 1;
    x->held = 1; /* the mark a repair keeps */
    return 1;
}

static int r_rollback(void *io, struct sc_db_err *e)
{
    (void)io;
    (void)e;
    return 0;
}

static void r_batch_done(void *io, const struct sc_relay_batch *b)
{
    struct relay *r = io;
    for (int i = 0; i < b->n && r->w->verbose; i++)
        trace(r->w, "r%d   batch done: %s %s", r->idx, b->rows[i].event_id, sc_relay_row_state_name(b->rows[i].state));
    sc_binlog_core_batch_done(&r->bcore, b);
}

/* ---- the relay's ops: the broker ----------------------------------------------------- */

static int up(struct relay *r)
{
    struct conn *c = &r->amqp;
    if (c->open && r->clock >= c->drop_at) {
        c->open = 0;
        c->nq = 0;
        r->w->st.drops++;
        trace(r->w, "r%d   broker: connection dropped", r->idx);
    }
    return c->open;
}

static int r_amqp_open(void *io, char *err, size_t err_len)
{
    struct relay *r = io;
    struct world *w = r->w;
    if (chance(w, w->f_run.open_fail)) {
        snprintf(err, err_len, "amqp: connection refused");
        return -1;
    }
    r->amqp.open = 1;
    r->amqp.closing = r->amqp.closed = 0;
    r->amqp.nq = 0;
    r->amqp.next_seq = 1;
    r->amqp.drop_at = chance(w, w->f_run.drop) ? r->clock + range(w, 1, 3000) : NEVER;
    return 0;
}

static void r_amqp_close(void *io)
{
    struct relay *r = io;
    r->amqp.open = 0;
    r->amqp.nq = 0;
}

static int r_amqp_is_open(void *io)
{
    return ((struct relay *)io)->amqp.open;
}

/* An aggregate's first publications follow commit order (row order). */
static void check_first(struct world *w, struct relay *r, const struct row *x)
{
    /* with per_aggregate a row that breaks a rule holds the rest until
     * repaired; without it, it and its repair are out of the order */
    for (const struct row *y = w->rows; y < x && (w->per_aggregate || !x->repaired); y++)
        if ((w->per_aggregate || (y->valid && !y->repaired)) && !y->rolled_back && !y->published &&
            strcmp(y->atype, x->atype) == 0 && strcmp(y->aid, x->aid) == 0) {
            violation(w, "relay %d published %s before %s, committed before it in aggregate %s/%s", r->idx,
                      x->id, y->id, x->atype, x->aid);
            return;
        }
}

static int r_publish(void *io, struct sc_publish *msgs, size_t n, char *err, size_t err_len)
{
    struct relay *r = io;
    struct world *w = r->w;
    struct conn *c = &r->amqp;
    for (size_t i = 0; i < n; i++) {
        if (!up(r) || c->nq == (int)(sizeof c->q / sizeof c->q[0])) {
            for (size_t j = i; j < n; j++)
                msgs[j].result = SC_PUB_FAILED;
            snprintf(err, err_len, "basic.publish: connection closed");
            return -1;
        }
        struct row *x = find_row(w, msgs[i].props->message_id.bytes, msgs[i].props->message_id.len);
        if (!x) {
            violation(w, "relay %d published a message of no row", r->idx);
            continue;
        }
        if (x->rolled_back)
            violation(w, "relay %d published %s, a row of a transaction that rolled back", r->idx, x->id);
        if (!x->valid && !x->broker_refuses)
            violation(w, "relay %d published %s, a row that breaks an envelope rule", r->idx, x->id);
        if (c->closed)
            violation(w, "relay %d published on a channel the broker closed, without opening it again", r->idx);
        msgs[i].result = SC_PUB_PENDING;
        msgs[i].seq = c->next_seq++;
        if (c->closing) { /* the broker drops what comes after on the closed channel */
            trace(w, "r%d   broker: %s dropped, its channel is closed", r->idx, x->id);
            continue;
        }
        if (x->broker_refuses) {
            /* 406: the channel closes; some confirms still owed left before */
            c->closing = 1;
            w->st.broker_refusals++;
            int kept = 0;
            for (int j = 0; j < c->nq; j++)
                if (chance(w, 0.5)) {
                    c->q[j].at = r->clock;
                    c->q[kept++] = c->q[j];
                }
            trace(w, "r%d   broker: refuses %s: channel closed, %d of %d confirms owed left before", r->idx,
                  x->id, kept, c->nq);
            c->nq = kept;
            continue;
        }
        if (!x->published)
            check_first(w, r, x);
        else
            w->st.duplicates++;
        x->published++;
        w->st.published++;
        struct pending *p = &c->q[c->nq++];
        p->seq = msgs[i].seq;
        p->row = (int)(x - w->rows);
        p->ack = !chance(w, w->f_run.nack);
        int late = chance(w, w->f_run.late);
        w->st.lates += (unsigned)late;
        w->st.nacks += (unsigned)!p->ack;
        p->at = r->clock + (late ? range(w, w->confirm_ms + 1, 3 * w->confirm_ms) : range(w, 0, w->confirm_ms / 2));
        trace(w, "r%d   broker: publish %s seq %llu, %s at %lld", r->idx, x->id, (unsigned long long)p->seq,
              p->ack ? "ack" : "nack", (long long)p->at);
    }
    return 0;
}

static int take_due(struct conn *c, int64_t until, struct pending *out)
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

static int settle(struct world *w, const struct pending *p, struct sc_publish *msgs, size_t n)
{
    if (p->ack)
        w->rows[p->row].confirmed++;
    for (size_t i = 0; i < n; i++)
        if (msgs[i].seq == p->seq && msgs[i].result == SC_PUB_PENDING) {
            msgs[i].result = p->ack ? SC_PUB_ACKED : SC_PUB_NACKED;
            return 1;
        }
    return 0;
}

static int r_collect(void *io, struct sc_publish *msgs, size_t n, int timeout_ms, enum sc_amqp_error_class *cls,
                     char *err, size_t err_len)
{
    struct relay *r = io;
    struct conn *c = &r->amqp;
    *cls = SC_AMQPERR_CONNECTION;
    size_t pending = 0;
    for (size_t i = 0; i < n; i++)
        pending += msgs[i].result == SC_PUB_PENDING;
    struct pending p;
    if (up(r) && (c->closing || c->closed)) {
        /* the confirms that left before the close, then channel.close */
        while (take_due(c, INT64_MAX, &p)) {
            r->clock = p.at > r->clock ? p.at : r->clock;
            settle(r->w, &p, msgs, n);
        }
        for (size_t i = 0; i < n; i++)
            if (msgs[i].result == SC_PUB_PENDING)
                msgs[i].result = SC_PUB_FAILED;
        if (c->closed)
            violation(r->w, "relay %d waits for confirms on a channel it was told is closed", r->idx);
        c->closing = 0;
        c->closed = 1;
        *cls = SC_AMQPERR_REFUSED;
        snprintf(err, err_len, "channel closed by broker: 406 PRECONDITION_FAILED - message refused");
        return -1;
    }
    int64_t deadline = r->clock + timeout_ms;
    while (up(r) && pending > 0) {
        int64_t until = deadline < c->drop_at ? deadline : c->drop_at - 1;
        if (!take_due(c, until, &p))
            break;
        r->clock = p.at > r->clock ? p.at : r->clock;
        pending -= (size_t)settle(r->w, &p, msgs, n);
    }
    int64_t end = deadline < c->drop_at ? deadline : c->drop_at;
    if (pending > 0 && end > r->clock) /* the wait ends at the deadline, or at the drop */
        r->clock = end;
    if (!up(r)) {
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

/* channel.open and confirm.select again, after the broker closed it. */
static int r_reopen(void *io, char *err, size_t err_len)
{
    struct relay *r = io;
    struct conn *c = &r->amqp;
    if (!up(r)) {
        snprintf(err, err_len, "amqp channel.open: connection closed");
        return -1;
    }
    if (!c->closed)
        violation(r->w, "relay %d opened its channel again while the broker had not closed it", r->idx);
    c->closed = c->closing = 0;
    c->next_seq = 1;
    c->nq = 0;
    r->w->st.reopens++;
    trace(r->w, "r%d   broker: channel opened again", r->idx);
    return 0;
}

static int r_service(void *io, char *err, size_t err_len)
{
    struct relay *r = io;
    if (!up(r)) {
        snprintf(err, err_len, "amqp: connection closed");
        return -1;
    }
    if (r->amqp.closing || r->amqp.closed) { /* sc_amqp_service reads the close: the relay reconnects */
        r->amqp.closing = 0;
        r->amqp.closed = 1;
        snprintf(err, err_len, "channel closed by broker: 406 PRECONDITION_FAILED - message refused");
        return -1;
    }
    struct pending p;
    while (take_due(&r->amqp, r->clock, &p))
        settle(r->w, &p, NULL, 0); /* a late confirm: the broker has the message all the same */
    return 0;
}

static int r_heartbeat(void *io)
{
    return up(io) ? 0 : -1;
}

static int64_t r_now_ms(void *io)
{
    return ((struct relay *)io)->clock;
}

static int r_backoff_ms(void *io, unsigned long long k)
{
    struct relay *r = io;
    int base = 100;
    for (unsigned long long i = 1; i < k && base < 2000; i++)
        base *= 2;
    base = base > 2000 ? 2000 : base;
    return base + (int)range(r->w, 0, base / 4);
}

static const struct sc_relay_ops sim_ops = {
    .db_open = r_db_open,
    .db_close = r_db_close,
    .db_is_open = r_db_is_open,
    .claim = r_claim,
    .mark_published = r_mark_published,
    .mark_failed = r_mark_failed,
    .rollback = r_rollback,
    .amqp_open = r_amqp_open,
    .amqp_close = r_amqp_close,
    .amqp_is_open = r_amqp_is_open,
    .publish = r_publish,
    .collect = r_collect,
    .reopen = r_reopen,
    .service = r_service,
    .heartbeat = r_heartbeat,
    .now_ms = r_now_ms,
    .backoff_ms = r_backoff_ms,
    .batch_done = r_batch_done,
    .held = r_held,
    .hold = r_hold,
    .mark_held = r_mark_held,
    .stale = r_stale,
};

/* ---- one schedule ------------------------------------------------------------------- */

static int relay_start(struct world *w, struct relay *r)
{
    struct sc_relay_params p = {
        .worker_id = r->worker_id, .exchange = "sim", .batch = w->batch, .lease_ms = w->lease_ms,
        .confirm_timeout_ms = w->confirm_ms, .poll_ms = w->poll_ms, .max_message_bytes = 1 << 20,
        .claim_waits = 1, .checkpointed = 1, .per_aggregate = w->per_aggregate,
    };
    r->db_open = r->stream_open = 0;
    r->amqp.open = 0;
    r->amqp.nq = 0;
    memset(&r->tx, 0, sizeof r->tx);
    memset(&r->wm, 0, sizeof r->wm);
    r->wm_at = 0;
    sc_relay_metrics_init(&r->m, r->worker_id);
    if (sc_binlog_core_init(&r->bcore, &sim_binlog_ops, r, r->worker_id, w->batch, w->lease_ms, w->poll_ms, w->per_aggregate))
        return -1;
    if (sc_relay_core_init(&r->core, &p, &sim_ops, r, &r->m))
        return -1;
    r->alive = 1;
    return 0;
}

static void relay_stop(struct world *w, struct relay *r)
{
    if (!r->alive)
        return;
    w->st.rewinds += r->bcore.rewinds;
    sc_relay_core_free(&r->core);
    sc_binlog_core_free(&r->bcore);
    r->alive = 0;
}

static void make_id(struct world *w, char *out, size_t len)
{
    uint64_t a = rnd(w), b = rnd(w);
    snprintf(out, len, "%08x-%04x-4%03x-8%03x-%012llx", (unsigned)(a >> 32), (unsigned)(a >> 16) & 0xffff,
             (unsigned)a & 0xfff, (unsigned)(b >> 52) & 0xfff, (unsigned long long)(b & 0xffffffffffffULL));
}

static void draw_faults(struct world *w)
{
    struct faults *f = &w->f;
    memset(f, 0, sizeof *f);
    /* each fault on in about half the runs (BUGGIFY), at a drawn rate */
    f->cut = chance(w, 0.6) ? 0.002 * (double)range(w, 1, 30) : 0;
    f->open_fail = chance(w, 0.4) ? 0.05 * (double)range(w, 1, 6) : 0;
    f->dup_stream = chance(w, 0.5) ? 0.1 * (double)range(w, 1, 8) : 0;
    f->read_fail = chance(w, 0.3) ? 0.01 * (double)range(w, 1, 10) : 0;
    f->ckpt_error = chance(w, 0.5) ? 0.02 * (double)range(w, 1, 10) : 0;
    f->ckpt_lost = chance(w, 0.5) ? 0.02 * (double)range(w, 1, 10) : 0;
    f->nack = chance(w, 0.5) ? 0.02 * (double)range(w, 1, 10) : 0;
    f->late = chance(w, 0.4) ? 0.02 * (double)range(w, 1, 10) : 0;
    f->drop = chance(w, 0.3) ? 0.1 * (double)range(w, 1, 5) : 0;
    f->crash = chance(w, 0.4) ? 0.002 * (double)range(w, 1, 10) : 0;
    f->pause = chance(w, 0.3) ? 0.002 * (double)range(w, 1, 10) : 0;
    f->invisible = chance(w, 0.5) ? 0.05 * (double)range(w, 1, 8) : 0;
    w->f_run = *f;
}

static int setup(struct world *w, uint64_t seed, int verbose)
{
    struct stats st = w->st;
    free(w->log);
    memset(w, 0, sizeof *w);
    w->st = st;
    w->seed = seed;
    w->rng = seed * 0x2545f4914f6cdd1dULL + 0x62696e6c6f67ULL;
    w->rng2 = seed * 0x9e3779b97f4a7c15ULL + 0x77617465726dULL;
    w->verbose = verbose;
    w->confirm_ms = (int)range(w, 30, 400);
    w->lease_ms = (int)range(w, w->confirm_ms + 100, 4 * w->confirm_ms + 200);
    w->batch = (int)range(w, 1, 8);
    w->poll_ms = (int)range(w, 20, 500);
    w->lock_wait_ms = (int)range(w, 200, 3000);
    w->fault_end = range(w, 0, 8000);
    draw_faults(w);
    w->per_aggregate = (int)(splitmix(&w->rng2) % 2);
    w->st.per_agg_schedules += (unsigned)w->per_aggregate;
    w->file = 1;
    w->pos = 4;
    append(w, EV_FORMAT, -1, 120)->starts = 1;
    w->ck_owner = w->tenure = -1;
    static const char *const aggs[] = {"1001", "1002", "1003"};
    w->n_tx = (int)range(w, 1, MAX_TX);
    int64_t at = 0;
    for (int t = 0; t < w->n_tx; t++) {
        struct tx *x = &w->txs[t];
        at += chance(w, 0.6) ? 0 : range(w, 0, (w->fault_end + 2000) / 8);
        x->commit_at = at;
        x->begin_at = at;
        int pick = (int)range(w, 0, 99);
        x->kind = pick < 65 ? TX_OUTBOX : pick < 78 ? TX_OTHER : pick < 85 ? TX_DDL : TX_ROLLBACK;
        x->begin_query = chance(w, 0.3);
        x->commit_query = chance(w, 0.2);
        x->savepoint = chance(w, 0.3);
        if (x->kind != TX_OUTBOX && x->kind != TX_ROLLBACK)
            continue;
        int big = chance(w, 0.1);
        x->nrows = (int)range(w, 1, big ? 20 : 4);
        if (w->n_rows + x->nrows > MAX_ROWS)
            x->nrows = MAX_ROWS - w->n_rows;
        x->row0 = w->n_rows;
        x->split = chance(w, 0.3) ? (int)range(w, 0, x->nrows) : x->nrows;
        /* a producer transaction open from a little to several seconds before
         * its commit, its rows created in between (drawn apart: rng2) */
        uint64_t d = splitmix(&w->rng2);
        int64_t open_ms = d % 4 == 0 ? (int64_t)(d >> 8) % 6000 : (int64_t)(d >> 8) % 50;
        x->begin_at = at > open_ms ? at - open_ms : 0;
        for (int k = 0; k < x->nrows; k++) {
            struct row *y = &w->rows[w->n_rows++];
            y->created_at = x->begin_at + (int64_t)(splitmix(&w->rng2) % (uint64_t)(at - x->begin_at + 1));
            make_id(w, y->id, sizeof y->id);
            y->tx = t;
            y->atype = "ORDER";
            y->aid = aggs[range(w, 0, 2)];
            y->payload = "{\"orderId\":1001}";
            y->valid = !chance(w, 0.04); /* (no event type: an envelope rule) */
            y->repair_at = NEVER;
            uint64_t d2 = splitmix(&w->rng2);
            y->broker_refuses = !y->valid && (d2 >> 60) % 2; /* or one the broker refuses (406) */
            if (!y->valid && d2 % 4 != 0) /* three in four are repaired */
                y->repair_at = (int64_t)((d2 >> 8) % (uint64_t)(w->fault_end + 2000));
            y->rolled_back = x->kind == TX_ROLLBACK;
            y->visible_at = NEVER; /* until its transaction is logged */
            if (!y->rolled_back && chance(w, w->f.invisible)) {
                /* logged before InnoDB shows it: a lock to wait for, or (no
                 * lock) absent for less than the read-back's retries */
                y->lock_wait = chance(w, 0.6);
                y->lag = y->lock_wait ? range(w, 1, 400) : range(w, 1, 140);
            }
        }
        w->st.rolled_back += (unsigned)(x->kind == TX_ROLLBACK ? x->nrows : 0);
    }
    w->st.txs += (unsigned)w->n_tx;
    w->n_relays = (int)range(w, 1, MAX_RELAYS);
    for (int i = 0; i < w->n_relays; i++) {
        struct relay *r = &w->relays[i];
        r->w = w;
        r->idx = i;
        snprintf(r->worker_id, sizeof r->worker_id, "sim-b%d", i);
        if (relay_start(w, r))
            return -1;
        r->ready_at = range(w, 0, 100);
    }
    w->deadline = w->fault_end + 30LL * (w->lease_ms + w->confirm_ms) + 20000;
    trace(w, "seed %llu: %d relays, %d transactions, %d rows, batch %d, lease %d ms, confirm %d ms, poll %d ms, "
          "lock wait %d ms; faults until %lld ms: cut %.3f open %.3f dup %.2f read %.2f ckpt %.2f/%.2f nack %.2f "
          "late %.2f drop %.2f crash %.3f pause %.3f invisible %.2f", (unsigned long long)seed, w->n_relays,
          w->n_tx, w->n_rows, w->batch, w->lease_ms, w->confirm_ms, w->poll_ms, w->lock_wait_ms,
          (long long)w->fault_end, w->f.cut, w->f.open_fail, w->f.dup_stream, w->f.read_fail, w->f.ckpt_error,
          w->f.ckpt_lost, w->f.nack, w->f.late, w->f.drop, w->f.crash, w->f.pause, w->f.invisible);
    return 0;
}

/* With per_aggregate: an earlier row of its aggregate breaks a rule and is
 * never repaired, so the row is held for good. */
static int blocked(const struct world *w, const struct row *x)
{
    for (const struct row *y = w->rows; w->per_aggregate && y < x; y++)
        if (!y->valid && !y->rolled_back && y->repair_at == NEVER && same_agg(y, x->atype, x->aid))
            return 1;
    return 0;
}

/* Every committed row published and confirmed (valid) or FAILED (not), or,
 * held for good behind one, marked held. */
static int settled(const struct world *w, int *first)
{
    int left = 0;
    for (int i = 0; i < w->n_rows; i++) {
        const struct row *x = &w->rows[i];
        if (x->rolled_back || (x->valid ? x->confirmed > 0 : x->failed) || (x->held && blocked(w, x)))
            continue;
        if (!left++)
            *first = i;
    }
    return left == 0 && next_commit((struct world *)w) == NEVER;
}

/* An operator repairs the FAILED rows whose time has come: valid, PENDING
 * again, the held mark kept (UPDATE ... SET status = 'PENDING'). */
static void repair_due(struct world *w)
{
    for (int i = 0; i < w->n_rows; i++) {
        struct row *x = &w->rows[i];
        if (!x->valid && x->failed && x->repair_at <= w->now) {
            x->valid = 1;
            x->failed = 0;
            x->repaired = 1;
            x->broker_refuses = 0;
            w->st.repairs++;
            trace(w, "operator: %s repaired, PENDING again", x->id);
        }
    }
}

static void after_step(struct world *w, struct relay *r)
{
    if (r->core.bad_transitions)
        violation(w, "relay %d made a row transition its state machine does not have", r->idx);
    for (int i = 0; i < w->n_rows; i++)
        if (w->rows[i].rolled_back && w->rows[i].published)
            violation(w, "row %s of a rolled back transaction was published", w->rows[i].id);
    for (int i = 0; i < w->n_rows; i++) {
        const struct row *x = &w->rows[i];
        if (!x->rolled_back && !x->confirmed && !x->failed && !x->held && EPOCH_US + x->created_at * 1000 < w->ck_w)
            violation(w, "the checkpoint's watermark passed row %s (transaction %d, created at %lld ms, %s), "
                      "which is neither confirmed nor FAILED: inspect and purge take it for published",
                      x->id, x->tx, (long long)x->created_at, w->txs[x->tx].logged ? "committed" : "not committed");
    }
}

static int run(struct world *w, uint64_t seed, int verbose)
{
    if (setup(w, seed, verbose)) {
        snprintf(w->violation, sizeof w->violation, "out of memory");
        return -1;
    }
    unsigned long long steps = 0;
    for (;;) {
        struct relay *r = NULL;
        for (int i = 0; i < w->n_relays; i++) {
            struct relay *c = &w->relays[i];
            if (!r || c->ready_at < r->ready_at || (c->ready_at == r->ready_at && chance(w, 0.5)))
                r = c;
        }
        w->now = r->ready_at;
        if (!w->quiet && w->now >= w->fault_end) {
            w->quiet = 1;
            memset(&w->f_run, 0, sizeof w->f_run);
            trace(w, "faults stop");
        }
        commit_due(w, w->now);
        repair_due(w);
        int first = -1;
        if (w->quiet && settled(w, &first))
            break;
        if (w->now > w->deadline || ++steps > 1000000) {
            const struct row *x = &w->rows[first < 0 ? 0 : first];
            violation(w, "faults stopped at %lld ms, and row %s (transaction %d, %s) is still %s: %d copies "
                      "published, %d confirmed; checkpoint %s:%llu held by r%d", (long long)w->fault_end, x->id,
                      x->tx, x->valid ? "valid" : "breaks a rule", x->failed ? "FAILED" : "not published",
                      x->published, x->confirmed, w->ck.file, w->ck.pos, w->ck_owner);
            break;
        }
        if (!r->alive) {
            if (relay_start(w, r)) {
                violation(w, "out of memory");
                break;
            }
            trace(w, "r%d starts again", r->idx);
        }
        r->clock = w->now;
        int phase = (int)r->core.phase;
        int wait = sc_relay_step(&r->core);
        r->ready_at = r->clock + wait;
        trace(w, "r%d step (phase %d -> %d) ends at %lld, next in %d ms", r->idx, phase, (int)r->core.phase,
              (long long)r->clock, wait);
        after_step(w, r);
        if (w->violation[0])
            break;
        if (chance(w, w->f_run.crash)) { /* kill -9: only the database's state remains */
            w->st.crashes++;
            relay_stop(w, r);
            r->ready_at += range(w, 1, 2000);
            trace(w, "r%d killed", r->idx);
        } else if (chance(w, w->f_run.pause)) { /* a pause past the lease: a standby may take it */
            w->st.pauses++;
            r->ready_at += range(w, w->lease_ms, 3LL * w->lease_ms);
            trace(w, "r%d paused until %lld", r->idx, (long long)r->ready_at);
        }
    }
    w->st.schedules++;
    w->st.steps += steps;
    for (int i = 0; i < w->n_relays; i++)
        w->st.released += w->relays[i].bcore.released;
    w->st.rows += (unsigned)w->n_rows;
    for (int i = 0; i < w->n_relays; i++)
        relay_stop(w, &w->relays[i]);
    return w->violation[0] ? -1 : 0;
}

static int n_tap;

static void tap(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tap(int cond, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%sok %d - ", cond ? "" : "not ", ++n_tap);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
}

int main(int argc, char **argv)
{
#if defined(__SANITIZE_ADDRESS__)
    unsigned long long first = 1, count = 4000;
#else
    unsigned long long first = 1, count = 20000;
#endif
    if (getenv("SC_SIM_SCHEDULES"))
        count = strtoull(getenv("SC_SIM_SCHEDULES"), NULL, 10);
    int verbose = 0, single = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            first = strtoull(argv[++i], NULL, 10);
            count = 1;
            single = 1;
        } else if (strcmp(argv[i], "--first") == 0 && i + 1 < argc) {
            first = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--schedules") == 0 && i + 1 < argc) {
            count = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--verbose") == 0) {
            verbose = 1;
        } else {
            fprintf(stderr, "usage: %s [--seed N [--verbose]] [--first N] [--schedules K]\n", argv[0]);
            return 2;
        }
    }
    sc_log_min_level = verbose ? SC_LOG_DEBUG : SC_LOG_ERROR + 1;
    static struct world w;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int failures = 0;
    for (unsigned long long s = first; s < first + count && failures < 5; s++) {
        if (run(&w, s, verbose) == 0)
            continue;
        failures++;
        tap(0, "seed %llu: %s", s, w.violation);
        printf("# replay: %s --seed %llu --verbose\n", argv[0], s);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    free(w.log);
    w.log = NULL;
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    const struct stats *st = &w.st;
    if (!failures)
        tap(1, "%llu schedules (seeds %llu..%llu): every invariant held after every step", st->schedules, first,
            first + count - 1);
    printf("# %.1f s, %.0f schedules/s, %llu steps, %llu transactions, %llu rows (%llu rolled back), %llu "
           "copies published (%llu again), %llu rows FAILED\n", secs, (double)st->schedules / secs, st->steps,
           st->txs, st->rows, st->rolled_back, st->published, st->duplicates, st->failed_rows);
    printf("# faults: %llu stream cuts (%llu inside a transaction), %llu streams sent again from earlier, "
           "%llu lock waits and %llu absent reads of rows not yet shown, %llu read-backs failed, %llu "
           "checkpoint writes failed, %llu lost (%llu written, %llu not), %llu nacks, %llu late confirms, "
           "%llu broker drops, %llu relays killed, %llu paused, %llu leases taken over, %llu rotations; "
           "%llu checkpoints written, %llu rewinds\n", st->cuts, st->cuts_mid_tx, st->dup_streams, st->lock_waits,
           st->absent_reads, st->read_fails, st->ckpt_errors, st->ckpt_lost_written + st->ckpt_lost_unwritten,
           st->ckpt_lost_written, st->ckpt_lost_unwritten, st->nacks, st->lates, st->drops, st->crashes,
           st->pauses, st->takeovers, st->rotations, st->ckpt_writes, st->rewinds);
    printf("# watermark: %llu samples (%llu held back by an open transaction), %llu checkpoint writes "
           "moved it\n", st->wm_samples, st->wm_held, st->wm_stores);
    printf("# held: %llu per_aggregate schedules, %llu rows marked held, %llu FAILED rows repaired, %llu "
           "held rows sent after a repair; %llu messages refused by the broker, %llu channels opened again\n",
           st->per_agg_schedules, st->held_marks, st->repairs, st->released, st->broker_refusals, st->reopens);
    if (!single && count >= 1000) {
        /* A simulation that stopped exercising a fault proves nothing about it. */
        tap(st->cuts_mid_tx > 0 && st->dup_streams > 0 && st->rotations > 0,
            "streams cut inside transactions, sent again from earlier, rotated");
        tap(st->ckpt_errors > 0 && st->ckpt_lost_written > 0 && st->ckpt_lost_unwritten > 0,
            "checkpoint writes failed, and lost both written and not");
        tap(st->lock_waits > 0 && st->absent_reads > 0 && st->read_fails > 0,
            "rows read back before InnoDB showed them, read-backs failed");
        tap(st->nacks > 0 && st->lates > 0 && st->drops > 0, "confirms nacked and late, connections dropped");
        tap(st->crashes > 0 && st->takeovers > 0 && st->rolled_back > 0 && st->failed_rows > 0,
            "relays killed, leases taken over, rolled back rows, rows FAILED");
        tap(st->wm_held > 0 && st->wm_stores > 0,
            "watermark samples held back by open transactions, and stored by checkpoints");
        tap(st->per_agg_schedules > 0 && st->held_marks > 0 && st->repairs > 0 && st->released > 0,
            "per_aggregate schedules, rows held behind FAILED ones, repairs, held rows published after them");
        tap(st->broker_refusals > 0 && st->reopens > 0, "messages the broker refused, channels opened again");
    }
    printf("1..%d\n", n_tap);
    return failures ? 1 : 0;
}
