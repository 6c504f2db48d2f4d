/* The binlog relay's watermark samples (binlog_watermark.c): a sample's W
 * is ready only once a settled position has reached its binary log end,
 * the ready W never moves back, and the text form is the server's. */
#include <stdio.h>
#include <string.h>

#include "sidecar/relay/binlog_watermark.h"
#include "tap.h"

static struct sc_binlog_pos at(const char *file, unsigned long long pos)
{
    struct sc_binlog_pos p = {0};
    snprintf(p.file, sizeof p.file, "%s", file);
    p.pos = pos;
    return p;
}

int main(void)
{
    char t[40];
    int64_t us = sc_binlog_wm_parse("2026-12-03 10:28:35.416427");
    is_int(us, 1796293715416427LL, "parses the server's DATETIME(6) text as UTC microseconds");
    sc_binlog_wm_format(us, t, sizeof t);
    is_str(t, "2026-12-03 10:28:35.416427", "and formats it back");
    is_int(sc_binlog_wm_parse("2026-12-03 10:28:35"), 1796293715000000LL, "no fraction: whole seconds");
    is_int(sc_binlog_wm_parse("not a time"), 0, "anything else: 0");
    is_int(sc_binlog_wm_candidate(us, 7), us - 9000000, "candidate: the oldest age and the 2 s margin off");
    is_int(sc_binlog_wm_candidate(us, -1), us - 2000000, "no open transaction: the margin only");

    struct sc_binlog_wm w = {0};
    struct sc_binlog_pos e1 = at("binlog.000001", 1000), e2 = at("binlog.000001", 5000),
                         e3 = at("binlog.000002", 400);
    sc_binlog_wm_add(&w, &e1, 100);
    sc_binlog_wm_add(&w, &e2, 200);
    sc_binlog_wm_add(&w, &e3, 300);
    struct sc_binlog_pos p = at("binlog.000001", 999);
    is_int(sc_binlog_wm_passed(&w, &p), 0, "a position before the first sample's end: nothing ready");
    p = at("binlog.000001", 1000);
    is_int(sc_binlog_wm_passed(&w, &p), 100, "at the end exactly: that sample's W");
    p = at("binlog.000001", 90000);
    is_int(sc_binlog_wm_passed(&w, &p), 200, "past the second in the same file: the second's");
    is_int(w.n, 1, "one sample left waiting");
    p = at("binlog.000002", 10);
    is_int(sc_binlog_wm_passed(&w, &p), 200, "the next file, before the third's end: still the second's");
    p = at("binlog.000010", 4);
    is_int(sc_binlog_wm_passed(&w, &p), 300, "a later file: the third's");
    sc_binlog_wm_add(&w, &e3, 250);
    is_int(sc_binlog_wm_passed(&w, &p), 300, "a lower W later (an old transaction opened): never back");
    p = at("", 0);
    sc_binlog_wm_add(&w, &e3, 400);
    is_int(sc_binlog_wm_passed(&w, &p), 300, "no position: nothing more ready");
    p = at("binlog.000010", 4);
    is_int(sc_binlog_wm_passed(&w, &p), 400, "then a position past its end: its W");
    for (int i = 0; i < SC_BINLOG_WM_SAMPLES + 3; i++)
        sc_binlog_wm_add(&w, &e3, 500 + i);
    is_int(w.n, SC_BINLOG_WM_SAMPLES, "a full queue drops the newest samples");
    is_int(sc_binlog_wm_passed(&w, &p), 500 + SC_BINLOG_WM_SAMPLES - 1, "the oldest kept are ready first");
    return done();
}
