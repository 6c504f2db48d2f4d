#include "binlog_tx.h"

#include <stdio.h>
#include <string.h>

void sc_binlog_tx_start(struct sc_binlog_tx *t, const struct sc_binlog_pos *start)
{
    int foreign = t->foreign; /* an idle checkpoint's reason outlives a reconnect */
    memset(t, 0, sizeof *t);
    t->foreign = foreign;
    snprintf(t->file, sizeof t->file, "%s", start->file);
    t->committed = *start;
}

void sc_binlog_tx_rotate(struct sc_binlog_tx *t, const char *file, size_t len, unsigned long long at)
{
    snprintf(t->file, sizeof t->file, "%.*s", (int)len, file);
    if (!t->in_tx) { /* the next file's first event is a place to start from */
        snprintf(t->committed.file, sizeof t->committed.file, "%s", t->file);
        t->committed.pos = at;
    }
}

void sc_binlog_tx_gtid(struct sc_binlog_tx *t, const char *gtid, int standalone)
{
    snprintf(t->pending_gtid, sizeof t->pending_gtid, "%s", gtid);
    t->standalone = standalone;
    t->in_tx = !standalone;
}

/* The transaction ends after this event: the next position is a place a
 * stream can start from. */
static void boundary(struct sc_binlog_tx *t, unsigned long long next_pos, unsigned when)
{
    snprintf(t->committed.file, sizeof t->committed.file, "%s", t->file);
    t->committed.pos = next_pos;
    snprintf(t->committed.gtid, sizeof t->committed.gtid, "%s", t->pending_gtid);
    t->committed.when = when;
    t->in_tx = t->standalone = 0;
}

void sc_binlog_tx_xid(struct sc_binlog_tx *t, unsigned long long next_pos, unsigned when)
{
    boundary(t, next_pos, when);
}

void sc_binlog_tx_query(struct sc_binlog_tx *t, const char *q, size_t len, unsigned long long next_pos,
                        unsigned when)
{
    int commit = len == 6 && strncmp(q, "COMMIT", 6) == 0;
    if (len == 5 && strncmp(q, "BEGIN", 5) == 0) {
        t->in_tx = 1;
        return;
    }
    if (!commit)
        t->foreign = 1;
    /* COMMIT, a DDL statement (standalone), or a statement outside any
     * transaction: its group ends here. */
    if (!t->in_tx || t->standalone || commit)
        boundary(t, next_pos, when);
}

void sc_binlog_tx_table(struct sc_binlog_tx *t, const char *name)
{
    if (strcmp(name, "relay_checkpoint") != 0)
        t->foreign = 1;
}
