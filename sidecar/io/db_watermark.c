#include "io/db_watermark.h"

#include <stdio.h>

#define ER_TABLEACCESS_DENIED 1142
#define ER_BAD_FIELD 1054
#define ER_NO_SUCH_TABLE 1146

int sc_db_outbox_watermark(struct sc_db *db, char *out, size_t len, struct sc_db_err *e)
{
    out[0] = 0;
    MYSQL_RES *res = sc_db_select(db, "SELECT DATE_FORMAT(published_created_before, '%Y-%m-%d %H:%i:%s.%f') "
                                      "FROM relay_checkpoint WHERE outbox = 'outbox_event'", e);
    if (!res) {
        if (e->code == ER_NO_SUCH_TABLE || e->code == ER_BAD_FIELD || e->code == ER_TABLEACCESS_DENIED) {
            *e = (struct sc_db_err){0};
            return 0;
        }
        return -1;
    }
    MYSQL_ROW row = mysql_fetch_row(res);
    if (row && row[0])
        snprintf(out, len, "%s", row[0]);
    mysql_free_result(res);
    return out[0] ? 1 : 0;
}

int sc_db_outbox_watermark_iso(struct sc_db *db, char *out, size_t len, struct sc_db_err *e)
{
    char w[SC_DB_WATERMARK_LEN];
    int rc = sc_db_outbox_watermark(db, w, sizeof w, e);
    if (rc == 1)
        snprintf(out, len, "%.10sT%sZ", w, w + 11);
    else
        out[0] = 0;
    return rc;
}
