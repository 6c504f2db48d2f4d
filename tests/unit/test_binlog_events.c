/* The binlog relay passes over an event only when it is known to hold no
 * inserted row: every other one stops the stream with an error naming its
 * type and position, never skipped (MySQL's compressed transactions,
 * MariaDB's compressed statements and rows of outbox_event, LOAD DATA
 * logged as a statement, a type newer than the code). The events are fed
 * to the stream's own event handler, with the row events of
 * tests/fuzz/corpus/binlog_rows/seed1 (a MariaDB 10.11's TABLE_MAP of
 * outbox_event and one WRITE_ROWS of three rows). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sidecar/relay/binlog_events.h"
#include "sidecar/relay/binlog_stream.h"
#include "tap.h"

#define HEADER_LEN 19

static unsigned char *read_seed(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static unsigned char buf[4096];
    *len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return buf;
}

/* An event of type with body, ending at next_pos, through the handler. */
static int feed(struct sc_binlog_stream *s, unsigned type, unsigned flags, const unsigned char *body,
                size_t len, unsigned next_pos, char (*ids)[37], int have)
{
    unsigned char *raw = calloc(1, HEADER_LEN + len + 1);
    memcpy(raw + HEADER_LEN, body, len);
    MARIADB_RPL_EVENT ev;
    memset(&ev, 0, sizeof ev);
    ev.raw_data = raw;
    ev.raw_data_size = HEADER_LEN + len;
    ev.event_length = (unsigned)(HEADER_LEN + len);
    ev.event_type = (enum mariadb_rpl_event)type;
    ev.flags = (unsigned short)flags;
    ev.next_event_pos = next_pos;
    int n = sc_binlog_stream_event(s, &ev, ids, have, 8);
    free(raw);
    return n;
}

static void fresh(struct sc_binlog_stream *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->schema, sizeof s->schema, "app");
    snprintf(s->tx.file, sizeof s->tx.file, "binlog.000007");
}

int main(int argc, char **argv)
{
    /* what the classifier says of every type */
    static const unsigned skip[] = {1, 3, 5, 13, 14, 15, 21, 22, 24, 25, 27, 28, 29, 31, 32, 33, 34, 35, 36, 37,
                                    38, 39, 41, 42, 160, 161, 163, 164, 167, 168, 170, 171};
    int wrong = 0;
    for (unsigned t = 0; t < 256; t++) {
        int want_skip = 0;
        for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
            want_skip |= skip[i] == t;
        /* the kinds the stream reads itself: never passed over unread */
        if (t == 2 || t == 4 || t == 16 || t == 19 || t == 162)
            continue;
        if ((sc_binlog_event_kind(t, 0) == SC_BINLOG_EV_SKIP) != want_skip) {
            printf("# type %u (%s): %s\n", t, sc_binlog_event_name(t), want_skip ? "stops" : "is passed over");
            wrong++;
        }
    }
    is_int(wrong, 0, "only events known to hold no inserted row are passed over (every type 0-255)");
    is_int(sc_binlog_event_kind(40, 0), SC_BINLOG_EV_UNREADABLE, "MySQL's TRANSACTION_PAYLOAD_EVENT stops");
    is_int(sc_binlog_event_kind(200, 0), SC_BINLOG_EV_UNREADABLE, "a type newer than the code stops");
    is_int(sc_binlog_event_kind(200, SC_BINLOG_IGNORABLE_F), SC_BINLOG_EV_SKIP,
           "unless the server marked it ignorable");
    is_int(sc_binlog_event_kind(40, SC_BINLOG_IGNORABLE_F), SC_BINLOG_EV_UNREADABLE,
           "a known kind that holds rows stops, whatever its flags");
    is_str(sc_binlog_event_name(40), "TRANSACTION_PAYLOAD_EVENT", "named as the server's source names it");
    ok(strstr(sc_binlog_event_remedy(40), "binlog_transaction_compression") != NULL,
       "the remedy names binlog_transaction_compression");
    ok(strstr(sc_binlog_event_remedy(169), "log_bin_compress") != NULL, "and log_bin_compress");

    /* through the stream's own handler */
    struct sc_binlog_stream s;
    char ids[8][37];
    fresh(&s);
    unsigned char payload[8] = {0};
    is_int(feed(&s, 40, 0, payload, sizeof payload, 5000, ids, 0), -1, "a TRANSACTION_PAYLOAD_EVENT stops the stream");
    ok(s.unreadable, "as unreadable (the relay stops, never reads past it)");
    ok(strstr(s.err, "type 40 (TRANSACTION_PAYLOAD_EVENT)") && strstr(s.err, "binlog.000007:4973") &&
       strstr(s.err, "binlog_transaction_compression"), "naming its type, its position and the setting: %s", s.err);
    fresh(&s);
    is_int(feed(&s, 27, 0, payload, sizeof payload, 0, ids, 0), 0, "a heartbeat is passed over");
    ok(!s.unreadable && !s.err[0], "with no error");
    is_int(feed(&s, 200, SC_BINLOG_IGNORABLE_F, payload, sizeof payload, 6000, ids, 0), 0,
           "an unknown event marked ignorable is passed over");
    is_int(feed(&s, 200, 0, payload, sizeof payload, 6000, ids, 0), -1, "an unknown one not marked stops");
    ok(s.unreadable && strstr(s.err, "type 200 (unknown to the relay)"), "naming it: %s", s.err);
    fresh(&s);
    is_int(feed(&s, 165, 0, payload, sizeof payload, 7000, ids, 0), -1,
           "a QUERY_COMPRESSED_EVENT stops (an INSERT or a COMMIT cannot be told apart)");
    ok(s.unreadable && strstr(s.err, "log_bin_compress"), "naming log_bin_compress: %s", s.err);

    size_t len = 0;
    const unsigned char *seed = argc > 1 ? read_seed(argv[1], &len) : NULL;
    if (!seed || len < 4) {
        ok(0, "the seed %s is read", argc > 1 ? argv[1] : "(no path given)");
        return done();
    }
    size_t map_len = (size_t)(seed[0] | (seed[1] & 0x7f) << 8);
    const unsigned char *map = seed + 2, *rows = seed + 2 + map_len;
    size_t rows_len = len - 2 - map_len;
    fresh(&s);
    is_int(feed(&s, 19, 0, map, map_len, 400, ids, 0), 0, "outbox_event's TABLE_MAP is read");
    ok(s.have_table, "and taken for the outbox");
    is_int(feed(&s, 23, 0, rows, rows_len, 800, ids, 0), 3, "its WRITE_ROWS_EVENT_V1 gives three keys");
    is_int(feed(&s, 166, 0, rows, rows_len, 1200, ids, 0), -1,
           "the same rows compressed (WRITE_ROWS_COMPRESSED_EVENT_V1) stop the stream");
    ok(s.unreadable && strstr(s.err, "type 166 (WRITE_ROWS_COMPRESSED_EVENT_V1)") &&
       strstr(s.err, "binlog.000007:") && strstr(s.err, "log_bin_compress"),
       "naming the type, the position and log_bin_compress: %s", s.err);
    fresh(&s);
    is_int(feed(&s, 19, 0, map, map_len, 400, ids, 0), 0, "the map again, on a fresh stream");
    s.table.table_id++;
    is_int(feed(&s, 169, 0, rows, rows_len, 800, ids, 0), 0, "another table's compressed rows are passed over");
    return done();
}
