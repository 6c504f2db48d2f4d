/* The duplicate classifier: only 1062 on uq_consumed_event_identity is
 * "already consumed". */
#include "sidecar/io/db_error.h"
#include "sidecar/handler.h"
#include "tap.h"

int main(void)
{
    char key[128];

    ok(sc_db_is_consumed_duplicate(1062, "Duplicate entry 'np-4dc2061a-8b9e-44fe-b436-3ed01fc9eb6e' for key 'uq_consumed_event_identity'"),
       "MariaDB / MySQL 5.7 form is a duplicate");
    ok(sc_db_is_consumed_duplicate(1062, "Duplicate entry 'np-4dc2061a-8b9e-44fe-b436-3ed01fc9eb6e' for key 'consumed_event.uq_consumed_event_identity'"),
       "MySQL 8.0.19+ form (table prefix) is a duplicate");
    ok(!sc_db_is_consumed_duplicate(1062, "Duplicate entry '17' for key 'PRIMARY'"), "PRIMARY is not");
    ok(!sc_db_is_consumed_duplicate(1062, "Duplicate entry '17' for key 'consumed_event.PRIMARY'"),
       "consumed_event.PRIMARY is not");
    ok(!sc_db_is_consumed_duplicate(1062, "Duplicate entry 't1-r1' for key 'uq_orders_tenant_request'"),
       "another table's unique key is not");
    ok(!sc_db_is_consumed_duplicate(1062, "Duplicate entry 'x' for key 'x_uq_consumed_event_identity'"),
       "a key that merely ends the same is not");
    ok(!sc_db_is_consumed_duplicate(1062, "Duplicate entry 'x' for key 'uq_consumed_event_identity_2'"),
       "a key that merely starts the same is not");
    ok(!sc_db_is_consumed_duplicate(1062, "Duplicate entry 'x' for key 'other.uq_consumed_event_identity'"),
       "the same name on another table is not");
    ok(sc_db_is_consumed_duplicate(1062, "Duplicate entry 'it's a 'quoted' value' for key 'uq_consumed_event_identity'"),
       "an entry value with quotes still finds the key");
    ok(sc_db_is_consumed_duplicate(1062, "Duplicate entry 'x for key 'PRIMARY' y' for key 'uq_consumed_event_identity'"),
       "an entry value containing the marker: the last marker wins");
    ok(!sc_db_is_consumed_duplicate(1062, "Duplicate entry 'a for key 'uq_consumed_event_identity' b' for key 'PRIMARY'"),
       "the target name inside the entry value does not count");
    ok(!sc_db_is_consumed_duplicate(1062, "Duplicate entry 'x' for key 'uq_consumed_event_ident"),
       "a truncated message is not");
    {
        /* A message that filled the client's 512-byte buffer may have been
         * cut anywhere, even right after a marker inside the value. */
        char longmsg[600];
        int n = snprintf(longmsg, sizeof longmsg, "Duplicate entry '");
        while (n < 480)
            longmsg[n++] = 'v';
        snprintf(longmsg + n, sizeof longmsg - (size_t)n, " for key 'uq_consumed_event_identity'");
        ok(strlen(longmsg) >= 511, "long message built (%zu chars)", strlen(longmsg));
        ok(!sc_db_is_consumed_duplicate(1062, longmsg), "a message that may be truncated is not trusted");
    }
    ok(!sc_db_is_consumed_duplicate(1062, "Duplicate entry 'x' for key ''"), "an empty key name is not");
    ok(!sc_db_is_consumed_duplicate(1062, ""), "an empty message is not");
    ok(!sc_db_is_consumed_duplicate(1062, NULL), "no message is not");
    ok(!sc_db_is_consumed_duplicate(1452, "Duplicate entry 'x' for key 'uq_consumed_event_identity'"),
       "a non-1062 error with the same text is not");
    ok(!sc_db_is_consumed_duplicate(1586, "Duplicate entry 'x' for key 'uq_consumed_event_identity'"),
       "1586 (duplicate on another path) is not");

    is_int(sc_db_classify(1062, "Duplicate entry 'x' for key 'uq_consumed_event_identity'"), SC_DBERR_DUPLICATE, "classify: target duplicate");
    is_int(sc_db_classify(1062, "Duplicate entry 'x' for key 'PRIMARY'"), SC_DBERR_FAILURE, "classify: other 1062 is a failure");
    is_int(sc_db_classify(1213, "Deadlock found"), SC_DBERR_DEADLOCK, "classify: deadlock");
    is_int(sc_db_classify(1205, "Lock wait timeout"), SC_DBERR_LOCK_WAIT, "classify: lock wait");
    {
        /* The handler ABI's helper and the sidecar's classes agree on every code. */
        int same = 1;
        unsigned first_diff = 0;
        for (unsigned code = 0; code < 10000; code++) {
            int a = sc_handler_error_is_transient(code);
            int b = code && sc_db_error_is_transient(sc_db_classify(code, ""));
            if (a != b && same) {
                same = 0;
                first_diff = code;
            }
        }
        ok(same, "sc_handler_error_is_transient matches the classifier (first difference: %u)",
           first_diff);
    }
    is_int(sc_db_classify(2013, "Lost connection"), SC_DBERR_CONNECTION, "classify: 2013 is connection");
    is_int(sc_db_classify(2006, "gone away"), SC_DBERR_CONNECTION, "classify: 2006 is connection");
    is_int(sc_db_classify(1406, "Data too long"), SC_DBERR_FAILURE, "classify: data too long is a failure");
    is_int(sc_db_classify(1452, "Cannot add or update a child row"), SC_DBERR_FAILURE, "classify: foreign key is a failure");
    is_int(sc_db_classify(0, NULL), SC_DBERR_NONE, "classify: no error");
    /* A node that cannot take writes is an outage, never the message's fault. */
    is_int(sc_db_classify(1290, "The MariaDB server is running with the --read-only option so it "
                                "cannot execute this statement"),
           SC_DBERR_NOT_WRITABLE, "classify: 1290 read-only (MariaDB) is not writable");
    is_int(sc_db_classify(1290, "The MySQL server is running with the --super-read-only option so "
                                "it cannot execute this statement"),
           SC_DBERR_NOT_WRITABLE, "classify: 1290 super-read-only (MySQL) is not writable");
    is_int(sc_db_classify(1290, "The MySQL server is running with the --secure-file-priv option so "
                                "it cannot execute this statement"),
           SC_DBERR_FAILURE, "classify: 1290 for another option is a failure");
    is_int(sc_db_classify(1836, "Running in read-only mode"), SC_DBERR_NOT_WRITABLE,
           "classify: 1836 read-only mode is not writable");
    is_int(sc_db_classify(1792, "Cannot execute statement in a READ ONLY transaction."),
           SC_DBERR_NOT_WRITABLE, "classify: 1792 read-only transaction is not writable");
    is_int(sc_db_classify(3989, "Schema 'app_t1' is in read only mode."), SC_DBERR_NOT_WRITABLE,
           "classify: 3989 a read-only schema (MySQL) is not writable");
    is_int(sc_db_classify(1047, "WSREP has not yet prepared node for application use"),
           SC_DBERR_NOT_WRITABLE, "classify: 1047 on a Galera non-primary node is not writable");
    is_int(sc_db_classify(1047, "Unknown command"), SC_DBERR_FAILURE,
           "classify: 1047 otherwise is a failure");
    is_int(sc_db_classify(1305, "SAVEPOINT sc_item does not exist"), SC_DBERR_FAILURE,
           "classify: 1305 alone is a failure (it also names a missing procedure)");
    ok(sc_db_error_is_transient(SC_DBERR_NOT_WRITABLE), "not writable is transient");
    is_str(sc_db_error_class_name(SC_DBERR_NOT_WRITABLE), "not writable", "class name: not writable");
    is_str(sc_db_error_class_name(SC_DBERR_SAVEPOINT_GONE), "savepoint gone",
           "class name: savepoint gone");

    ok(sc_db_dup_key_name("Duplicate entry 'a' for key 'consumed_event.uq_consumed_event_identity'", key, sizeof key) == 0,
       "key name extracted");
    is_str(key, "consumed_event.uq_consumed_event_identity", "key name is the qualified name");
    ok(sc_db_dup_key_name("Duplicate entry 'a' for key 'k", key, sizeof key) != 0, "truncated name refused");
    ok(sc_db_dup_key_name("Duplicate entry 'a' for key 'abcdef'", key, 4) != 0, "too long for the buffer refused");
    return done();
}
