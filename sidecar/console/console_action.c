/* The console's two actions. A replay runs `sidecar dlq replay` itself (this
 * binary, the console's own config file), so it is exactly what the command
 * does, whatever the command comes to do; its output goes back to the page.
 * Setting a FAILED row PENDING is one guarded UPDATE. Both are logged with
 * who asked (the token's name and the peer address) and the outcome. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "console.h"
#include "envelope/uuid_text.h"
#include "io/db_rows.h"
#include "lifecycle.h"
#include "log.h"

#define REPLAY_TIMEOUT_MS 120000
#define OUTPUT_MAX 65536

extern char **environ;

static json_t *refuse(unsigned code, const char *msg, unsigned *status)
{
    *status = code;
    return json_pack("{s:s}", "error", msg);
}

/* Runs argv with stdout and stderr into one pipe, kept up to OUTPUT_MAX
 * bytes; kills it after REPLAY_TIMEOUT_MS. Returns its exit status (128+N
 * for a signal), or -1 when it could not start. */
static int run_captured(char *const argv[], char *out, size_t out_len)
{
    int fd[2];
    out[0] = 0;
    if (pipe2(fd, O_CLOEXEC))
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    /* None of the console's sockets (listener, database, broker) go along. */
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    if (rc) {
        close(fd[0]);
        snprintf(out, out_len, "cannot start %s: %s", argv[0], strerror(rc));
        return -1;
    }
    size_t len = 0;
    int64_t deadline = sc_now_ms() + REPLAY_TIMEOUT_MS;
    int killed = 0;
    for (;;) {
        int64_t left = deadline - sc_now_ms();
        if (left <= 0 && !killed) {
            kill(pid, SIGKILL);
            killed = 1;
        }
        struct pollfd p = {fd[0], POLLIN, 0};
        int pr = poll(&p, 1, left > 0 ? (int)(left > 1000 ? 1000 : left) : 1000);
        if (pr < 0 && errno != EINTR)
            break;
        if (pr <= 0)
            continue;
        char buf[4096];
        ssize_t n = read(fd[0], buf, sizeof buf);
        if (n <= 0)
            break;
        size_t take = (size_t)n < out_len - 1 - len ? (size_t)n : out_len - 1 - len;
        memcpy(out + len, buf, take);
        len += take;
        out[len] = 0;
    }
    close(fd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (killed && len + 64 < out_len)
        snprintf(out + len, out_len - len, "\n(stopped after %d s)\n", REPLAY_TIMEOUT_MS / 1000);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* An id as the page sends it: printable, no spaces, at most 255 bytes. */
static int plain_id(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 255 || s[0] == '-')
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || s[i] == 0x7f)
            return 0;
    return 1;
}

json_t *sc_console_replay(struct sc_console *con, const char *who, const char *tenant,
                          const json_t *req, unsigned *status)
{
    const char *consumer = json_string_value(json_object_get(req, "consumer"));
    const char *id = json_string_value(json_object_get(req, "event_id"));
    int all = json_is_true(json_object_get(req, "all"));
    const struct sc_consumer_config *k = consumer ? sc_config_consumer(con->cfg, consumer) : NULL;
    if (!k)
        return refuse(400, "consumer: not a consumer of the console's config", status);
    if (all == (id != NULL))
        return refuse(400, "say which: \"event_id\": ID or \"all\": true", status);
    if (id && !plain_id(id))
        return refuse(400, "event_id: printable, no spaces, at most 255 bytes", status);
    /* `dlq replay --all` is every tenant's: not what a page showing one
     * tenant's dead letters would mean by it. */
    if (all && tenant)
        return refuse(400, "all: `sidecar dlq replay --all` replays every tenant's dead letters of "
                      "the consumer; use it without ?tenant, or replay this tenant's one by one",
                      status);
    if (pthread_mutex_trylock(&con->action_lock))
        return refuse(409, "another action is running; try again when it has finished", status);
    char *argv[] = {con->exe, "dlq", "-c", con->config_path, "replay", (char *)k->name,
                    all ? "--all" : "--id", all ? NULL : (char *)id, NULL};
    struct sc_log_fields lf = {.consumer = k->name, .event_id = id, .outcome = "replay"};
    sc_log(SC_LOG_INFO, &lf, "console: %s asks to replay %s of %s's dead letters", who,
           all ? "all" : "one", k->name);
    char *out = malloc(OUTPUT_MAX);
    int rc = out ? run_captured(argv, out, OUTPUT_MAX) : -1;
    pthread_mutex_unlock(&con->action_lock);
    /* The command's summary line says how many went back. */
    const char *summary = out ? strstr(out, "replayed ") : NULL;
    const char *last = summary;
    while (last && (summary = strstr(last + 1, "\nreplayed ")))
        last = summary + 1;
    char line[300] = "";
    if (last)
        snprintf(line, sizeof line, "%.*s", (int)strcspn(last, "\n"), last);
    sc_log(rc == 0 ? SC_LOG_INFO : SC_LOG_WARN, &lf,
           "console: replay for %s: `sidecar dlq replay %s %s%s%s` exit %d%s%s", who, k->name,
           all ? "--all" : "--id", all ? "" : " ", all ? "" : id, rc, line[0] ? ": " : "", line);
    json_t *reply = json_pack("{s:b, s:i, s:s, s:s}", "ok", rc == 0, "exit_status", rc, "output",
                              out ? out : "out of memory", "command", all ? "replay --all" : "replay --id");
    free(out);
    /* The command ran and said how it went (ok false: see output). */
    *status = rc < 0 ? 500 : 200;
    return reply;
}

json_t *sc_console_set_pending(struct sc_console *con, const char *tenant, const char *who,
                               const json_t *req, unsigned *status)
{
    const char *id = json_string_value(json_object_get(req, "event_id"));
    char canon[37];
    if (!id || sc_uuid_canonical(id, strlen(id), canon))
        return refuse(400, "event_id: the UUID of a FAILED outbox row", status);
    int slot;
    json_t *err;
    struct sc_db *db = sc_console_db_get(con, tenant, &slot, &err, status);
    if (!db)
        return err;
    struct sc_log_fields lf = {.event_id = canon, .outcome = "set_pending"};
    /* Only a FAILED row, and only these columns (the admin user's UPDATE
     * grant is on status, lease_owner, lease_until). */
    const char *p[1] = {canon};
    struct sc_db_err e = {0};
    MYSQL_STMT *st = mysql_stmt_init(db->conn);
    MYSQL_BIND b;
    unsigned long len = strlen(canon);
    memset(&b, 0, sizeof b);
    b.buffer_type = MYSQL_TYPE_STRING;
    b.buffer = canon;
    b.buffer_length = len;
    b.length = &len;
    /* The lease is left as the relay marked it: a binlog relay's FAILED
     * row keeps one, so that, PENDING again, it is held and published in
     * its aggregate's order (a poll relay's has none). */
    static const char sql[] = "UPDATE outbox_event SET status = 'PENDING' WHERE event_id = ? "
                              "AND status = 'FAILED'";
    long long changed = -1;
    if (!st || mysql_stmt_prepare(st, sql, sizeof sql - 1) || mysql_stmt_bind_param(st, &b) ||
        mysql_stmt_execute(st)) {
        if (st)
            sc_db_stmt_error(st, &e);
        else
            sc_db_last_error(db, &e);
    } else {
        changed = (long long)mysql_stmt_affected_rows(st);
    }
    if (st)
        mysql_stmt_close(st);
    if (changed >= 0 && sc_db_commit(db, &e))
        changed = -1;
    if (changed < 0) {
        sc_console_db_put(con, slot, sc_console_db_broken(&e));
        sc_log(SC_LOG_WARN, &lf, "console: %s set %s PENDING: error %u: %s", who, canon, e.code, e.msg);
        return sc_console_db_error("set PENDING", &e, status);
    }
    char now_status[32] = "";
    if (changed == 0) {
        struct sc_rows rows;
        if (sc_db_select_params(db, "SELECT status FROM outbox_event WHERE event_id = ?", p, 1, 1,
                                0, &rows, &e) == 0) {
            snprintf(now_status, sizeof now_status, "%s",
                     rows.n_rows && sc_rows_get(&rows, 0, 0) ? sc_rows_get(&rows, 0, 0) : "no row");
            sc_rows_free(&rows);
        }
    }
    sc_console_db_put(con, slot, 0);
    if (changed == 0) {
        sc_log(SC_LOG_WARN, &lf, "console: %s set %s PENDING: not FAILED (%s), unchanged", who,
               canon, now_status[0] ? now_status : "?");
        *status = 409;
        char msg[200];
        snprintf(msg, sizeof msg, "not a FAILED row (now: %s): unchanged", now_status[0] ? now_status : "?");
        return json_pack("{s:s, s:s}", "error", msg, "event_id", canon);
    }
    sc_log(SC_LOG_INFO, &lf, "console: %s set %s from FAILED to PENDING", who, canon);
    *status = 200;
    return json_pack("{s:b, s:s, s:s}", "ok", 1, "event_id", canon, "status", "PENDING");
}
