/* `sidecar try`: the full consume path (parse, claim, handler) for event
 * files, inside a transaction that is always rolled back.
 *
 * Two optional symbols a handler may export besides sc_handler_v1, looked
 * up with dlsym on the loaded handler; sql.so exports both:
 *
 *   int sc_handler_check_v1(void *state, struct st_mysql *conn,
 *                           char *err, size_t err_len);
 *       Validates the handler against the database on conn (sql.so: every
 *       statement of its config prepares and has as many placeholders as
 *       params). 0 when good, else non-zero with a message naming the key.
 *       `sidecar try` calls it before the events, `sidecar check` after it
 *       connects.
 *
 *   void sc_handler_trace_v1(void *state, sc_handler_trace_fn fn, void *ctx);
 *       Sets (fn non-NULL) or clears the callback the handler calls after
 *       each statement it runs, with a label, rows affected and warnings.
 *       Only `sidecar try` sets it, single-threaded.
 */
#ifndef SC_TRY_H
#define SC_TRY_H

#include <stddef.h>

#include "config.h"
#include "sidecar/handler.h"

#define SC_HANDLER_CHECK_SYMBOL "sc_handler_check_v1"
#define SC_HANDLER_TRACE_SYMBOL "sc_handler_trace_v1"

typedef void (*sc_handler_trace_fn)(void *ctx, struct st_mysql *conn, const char *label,
                                    unsigned long long rows_affected, unsigned warnings);
typedef int (*sc_handler_check_v1_fn)(void *state, struct st_mysql *conn, char *err,
                                      size_t err_len);
typedef void (*sc_handler_trace_v1_fn)(void *state, sc_handler_trace_fn fn, void *ctx);

struct sc_plugin;

/* Calls the handler's sc_handler_check_v1 on conn when it exports one.
 * Returns 0 when it passed or there is none (*had_check says which), -1
 * with its message in err. */
int sc_try_check_handler(const struct sc_plugin *p, struct st_mysql *conn, int *had_check,
                         char *err, size_t err_len);

/* try --consumer NAME EVENT.json...: 0 when every event would apply, 1
 * otherwise, 2 on bad usage or a refused handler. */
int sc_try_run(const struct sc_config *cfg, int argc, char **argv);

#endif
