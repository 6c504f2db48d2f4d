/* Fuzz target: the sample handler's handle_batch with hostile events (anyone
 * who can publish to the queue chooses them). The handler's source is
 * compiled in and the few MySQL client calls it makes are replaced here, so
 * the statement it would send is read in full (an over-read or overflow is
 * an ASan report) and checked: one row per accepted event, nothing else. */
#include <mysql.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../handlers/notification_job/notification_job.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t rows_sent;
static int queried;

/* Stand-ins for the client library: the statement is read byte by byte. */
int STDCALL mysql_real_query(MYSQL *mysql, const char *q, unsigned long length)
{
    (void)mysql;
    size_t rows = 0;
    for (unsigned long i = 0; i < length; i++) {
        if (q[i] == '\0')
            __builtin_trap(); /* the statement is text */
        if (q[i] == '(' && i + 1 < length && q[i + 1] == '\'')
            rows++;
    }
    if (length < 12 || memcmp(q, "INSERT INTO ", 12) != 0)
        __builtin_trap();
    rows_sent = rows;
    queried = 1;
    return 0;
}
unsigned int STDCALL mysql_errno(MYSQL *mysql)
{
    (void)mysql;
    return 0;
}
const char *STDCALL mysql_sqlstate(MYSQL *mysql)
{
    (void)mysql;
    return "00000";
}
const char *STDCALL mysql_error(MYSQL *mysql)
{
    (void)mysql;
    return "";
}

#define MAX_EVENTS 200
#define REASON_LEN 128

/* Takes n bytes of the input (fewer at the end). */
static const uint8_t *take(const uint8_t **p, const uint8_t *end, size_t n, size_t *got)
{
    const uint8_t *s = *p;
    *got = (size_t)(end - *p) < n ? (size_t)(end - *p) : n;
    *p += *got;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct sc_event evs[MAX_EVENTS];
    static const struct sc_event *ptrs[MAX_EVENTS];
    static char subjects[MAX_EVENTS][40];
    static char reasons[MAX_EVENTS * REASON_LEN];
    sc_handler_status st[MAX_EVENTS];
    const uint8_t *p = data, *end = data + size;
    size_t got;
    if (size < 1)
        return 0;
    /* The first byte: how many events (up to MAX_EVENTS, so a batch limit
     * of the sidecar's size and beyond). */
    size_t n = 1 + (size_t)(*take(&p, end, 1, &got) % MAX_EVENTS);
    size_t expect_rows = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *b = take(&p, end, 10, &got);
        uint8_t kind = got ? b[0] : 0;
        int64_t version = 0;
        if (got > 1)
            memcpy(&version, b + 1, got - 1 < 8 ? got - 1 : 8);
        /* Widest rows by default: 19-digit subjects and INT32_MIN versions. */
        if (got < 9)
            version = INT32_MIN;
        char *subj = subjects[i];
        switch (kind & 3) {
        case 0:
            snprintf(subj, 40, "%lld", (long long)INT64_MAX - (long long)(kind >> 2));
            break;
        case 1: {
            size_t len = (size_t)(kind >> 2) % 39;
            const uint8_t *s = take(&p, end, len, &got);
            memcpy(subj, s, got);
            subj[got] = 0;
            break;
        }
        case 2:
            snprintf(subj, 40, "%u", (unsigned)(kind >> 2) + 1);
            break;
        default:
            subj[0] = 0;
        }
        evs[i] = (struct sc_event){
            .id = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
            .type = (kind & 0x80) && (kind & 3) != 0 ? "OTHER" : "ORDER_ACCEPTED",
            .source = "ORDER",
            .subject = (kind & 3) == 3 && (kind & 4) ? NULL : subj,
            .eventversion = version,
            .has_eventversion = !((kind & 3) == 3 && (kind & 8)),
        };
        ptrs[i] = &evs[i];
        long long oid;
        if (strcmp(evs[i].type, "ORDER_ACCEPTED") == 0 && parse_order_id(evs[i].subject, &oid) == 0 &&
            evs[i].has_eventversion && version >= INT32_MIN && version <= INT32_MAX)
            expect_rows++;
    }
    queried = 0;
    rows_sent = 0;
    int dummy;
    int rc = handle_batch(NULL, (struct st_mysql *)&dummy, ptrs, n, st, reasons, REASON_LEN);
    if (rc != 0)
        __builtin_trap(); /* only out-of-memory may fail, and nothing here is that big */
    if ((expect_rows > 0) != queried || rows_sent != expect_rows)
        __builtin_trap();
    size_t ok = 0;
    for (size_t i = 0; i < n; i++) {
        if (st[i] == SC_HANDLER_OK)
            ok++;
        else if (st[i] != SC_HANDLER_REJECT || !reasons[i * REASON_LEN])
            __builtin_trap(); /* a refusal says why */
    }
    (void)ok;
    return 0;
}
