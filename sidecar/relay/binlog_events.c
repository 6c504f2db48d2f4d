#include "binlog_events.h"

#include <stddef.h>

/* The kinds of event, numbered as MySQL's and MariaDB's binlog_event.h
 * and log_event.h number them. */
static const struct {
    unsigned type;
    const char *name;
    enum sc_binlog_event_kind kind;
} known[] = {
    {0, "UNKNOWN_EVENT", SC_BINLOG_EV_UNREADABLE},
    {1, "START_EVENT_V3", SC_BINLOG_EV_SKIP},
    {2, "QUERY_EVENT", SC_BINLOG_EV_SKIP}, /* read by the stream; a statement under ROW is DDL or BEGIN/COMMIT */
    {3, "STOP_EVENT", SC_BINLOG_EV_SKIP},
    {4, "ROTATE_EVENT", SC_BINLOG_EV_SKIP},
    {5, "INTVAR_EVENT", SC_BINLOG_EV_SKIP},
    /* LOAD DATA logged as a statement (binlog_format not ROW): rows the
     * reader never sees */
    {6, "LOAD_EVENT", SC_BINLOG_EV_UNREADABLE},
    {7, "SLAVE_EVENT", SC_BINLOG_EV_UNREADABLE},
    {8, "CREATE_FILE_EVENT", SC_BINLOG_EV_UNREADABLE},
    {9, "APPEND_BLOCK_EVENT", SC_BINLOG_EV_UNREADABLE},
    {10, "EXEC_LOAD_EVENT", SC_BINLOG_EV_UNREADABLE},
    {11, "DELETE_FILE_EVENT", SC_BINLOG_EV_UNREADABLE},
    {12, "NEW_LOAD_EVENT", SC_BINLOG_EV_UNREADABLE},
    {13, "RAND_EVENT", SC_BINLOG_EV_SKIP},
    {14, "USER_VAR_EVENT", SC_BINLOG_EV_SKIP},
    {15, "FORMAT_DESCRIPTION_EVENT", SC_BINLOG_EV_SKIP},
    {16, "XID_EVENT", SC_BINLOG_EV_SKIP},
    {17, "BEGIN_LOAD_QUERY_EVENT", SC_BINLOG_EV_UNREADABLE},
    {18, "EXECUTE_LOAD_QUERY_EVENT", SC_BINLOG_EV_UNREADABLE},
    {19, "TABLE_MAP_EVENT", SC_BINLOG_EV_SKIP},
    {20, "PRE_GA_WRITE_ROWS_EVENT", SC_BINLOG_EV_UNREADABLE},
    {21, "PRE_GA_UPDATE_ROWS_EVENT", SC_BINLOG_EV_SKIP},
    {22, "PRE_GA_DELETE_ROWS_EVENT", SC_BINLOG_EV_SKIP},
    {23, "WRITE_ROWS_EVENT_V1", SC_BINLOG_EV_UNREADABLE},
    {24, "UPDATE_ROWS_EVENT_V1", SC_BINLOG_EV_SKIP},      /* updates and deletes insert nothing */
    {25, "DELETE_ROWS_EVENT_V1", SC_BINLOG_EV_SKIP},
    /* the source lost events of its own (a replica stops on it too) */
    {26, "INCIDENT_EVENT", SC_BINLOG_EV_UNREADABLE},
    {27, "HEARTBEAT_LOG_EVENT", SC_BINLOG_EV_SKIP},
    {28, "IGNORABLE_LOG_EVENT", SC_BINLOG_EV_SKIP},
    {29, "ROWS_QUERY_LOG_EVENT", SC_BINLOG_EV_SKIP},
    {30, "WRITE_ROWS_EVENT", SC_BINLOG_EV_UNREADABLE},
    {31, "UPDATE_ROWS_EVENT", SC_BINLOG_EV_SKIP},
    {32, "DELETE_ROWS_EVENT", SC_BINLOG_EV_SKIP},
    {33, "GTID_LOG_EVENT", SC_BINLOG_EV_SKIP},
    {34, "ANONYMOUS_GTID_LOG_EVENT", SC_BINLOG_EV_SKIP},
    {35, "PREVIOUS_GTIDS_LOG_EVENT", SC_BINLOG_EV_SKIP},
    {36, "TRANSACTION_CONTEXT_EVENT", SC_BINLOG_EV_SKIP},
    {37, "VIEW_CHANGE_EVENT", SC_BINLOG_EV_SKIP},
    {38, "XA_PREPARE_LOG_EVENT", SC_BINLOG_EV_SKIP},
    {39, "PARTIAL_UPDATE_ROWS_EVENT", SC_BINLOG_EV_SKIP},
    /* a whole transaction, its row events inside, compressed */
    {SC_BINLOG_TRANSACTION_PAYLOAD, "TRANSACTION_PAYLOAD_EVENT", SC_BINLOG_EV_UNREADABLE},
    {SC_BINLOG_HEARTBEAT_V2, "HEARTBEAT_LOG_EVENT_V2", SC_BINLOG_EV_SKIP},
    {SC_BINLOG_GTID_TAGGED, "GTID_TAGGED_LOG_EVENT", SC_BINLOG_EV_SKIP},
    {160, "ANNOTATE_ROWS_EVENT", SC_BINLOG_EV_SKIP},
    {161, "BINLOG_CHECKPOINT_EVENT", SC_BINLOG_EV_SKIP},
    {162, "GTID_EVENT", SC_BINLOG_EV_SKIP},
    {163, "GTID_LIST_EVENT", SC_BINLOG_EV_SKIP},
    {164, "START_ENCRYPTION_EVENT", SC_BINLOG_EV_SKIP}, /* the server decrypts what it sends */
    /* MariaDB's log_bin_compress: a statement whose text is compressed
     * cannot be told from an INSERT, nor a COMMIT from a DDL statement */
    {165, "QUERY_COMPRESSED_EVENT", SC_BINLOG_EV_UNREADABLE},
    {166, "WRITE_ROWS_COMPRESSED_EVENT_V1", SC_BINLOG_EV_UNREADABLE},
    {167, "UPDATE_ROWS_COMPRESSED_EVENT_V1", SC_BINLOG_EV_SKIP},
    {168, "DELETE_ROWS_COMPRESSED_EVENT_V1", SC_BINLOG_EV_SKIP},
    {169, "WRITE_ROWS_COMPRESSED_EVENT", SC_BINLOG_EV_UNREADABLE},
    {170, "UPDATE_ROWS_COMPRESSED_EVENT", SC_BINLOG_EV_SKIP},
    {171, "DELETE_ROWS_COMPRESSED_EVENT", SC_BINLOG_EV_SKIP},
};

enum sc_binlog_event_kind sc_binlog_event_kind(unsigned type, unsigned flags)
{
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (known[i].type == type)
            return known[i].kind;
    /* A type newer than this code: the server marks one a replica may
     * pass over; any other may hold rows. */
    return flags & SC_BINLOG_IGNORABLE_F ? SC_BINLOG_EV_SKIP : SC_BINLOG_EV_UNREADABLE;
}

const char *sc_binlog_event_name(unsigned type)
{
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (known[i].type == type)
            return known[i].name;
    return "unknown to the relay";
}

const char *sc_binlog_event_remedy(unsigned type)
{
    switch (type) {
    case SC_BINLOG_TRANSACTION_PAYLOAD:
        return "MySQL's binlog_transaction_compression is on: set it OFF (globally, and in no session)";
    case 165: case 166: case 169:
        return "MariaDB's log_bin_compress is on: set it OFF";
    case 6: case 7: case 8: case 9: case 10: case 11: case 12: case 17: case 18:
        return "LOAD DATA was logged as a statement: binlog_format must be ROW (globally, and in no session)";
    case 26:
        return "the server logged an incident: it lost events of its own binary log";
    default:
        return "the relay does not know what it holds";
    }
}
