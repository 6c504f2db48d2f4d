/* sidecar console: start-up, the wait for a stop signal, shutdown. */
#include "console.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lifecycle.h"
#include "log.h"

#define TOKEN_MIN 16

static int name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           strchr("._@-", c);
}

/* Reads console.token_file: one token per line, "name:token" to name its
 * holder (else "operator"), blank lines and # comments skipped. Returns 0,
 * or -1 with err naming the line. */
static int load_tokens(struct sc_console *con, const char *path, char *err, size_t err_len)
{
    FILE *fp = fopen(path, "r");
    if (!fp) {
        snprintf(err, err_len, "console.token_file: cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(fp), &st) == 0 && (st.st_mode & 0007))
        sc_warn("console.token_file: %s can be read by every user (mode %03o): its tokens allow "
                "replays and outbox changes", path, (unsigned)(st.st_mode & 0777));
    char line[512];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof line, fp)) {
        lineno++;
        size_t n = strcspn(line, "\r\n");
        line[n] = 0;
        while (n && (line[n - 1] == ' ' || line[n - 1] == '\t'))
            line[--n] = 0;
        char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s || *s == '#')
            continue;
        const char *name = "operator", *tok = s;
        char *colon = strchr(s, ':');
        if (colon && colon > s && colon - s < 64) {
            int all = 1;
            for (char *p = s; p < colon; p++)
                all &= name_char(*p);
            if (all) {
                *colon = 0;
                name = s;
                tok = colon + 1;
            }
        }
        size_t tn = strlen(tok);
        int printable = 1;
        for (size_t i = 0; i < tn; i++)
            printable &= (unsigned char)tok[i] > 0x20 && tok[i] != 0x7f;
        if (tn < TOKEN_MIN || tn >= sizeof con->tokens[0].token || !printable) {
            snprintf(err, err_len, "console.token_file: %s line %d: a token is %d to 255 printable "
                     "characters without spaces", path, lineno, TOKEN_MIN);
            rc = -1;
            break;
        }
        if (con->n_tokens == SC_CONSOLE_TOKENS_MAX) {
            snprintf(err, err_len, "console.token_file: %s: more than %d tokens", path,
                     SC_CONSOLE_TOKENS_MAX);
            rc = -1;
            break;
        }
        struct sc_console_token *t = &con->tokens[con->n_tokens++];
        snprintf(t->name, sizeof t->name, "%.63s", name);
        snprintf(t->token, sizeof t->token, "%.255s", tok);
    }
    memset(line, 0, sizeof line);
    fclose(fp);
    if (!rc && con->n_tokens == 0) {
        snprintf(err, err_len, "console.token_file: %s holds no token (leave the key out for a "
                 "read-only console)", path);
        rc = -1;
    }
    return rc;
}

/* The -c FILE this process was started with, from /proc/self/cmdline (the
 * same rule as the command line parser: the argument after -c/--config),
 * as an absolute path: a replay runs `sidecar dlq` with the same file. */
static int own_config_path(char *out, size_t len)
{
    FILE *fp = fopen("/proc/self/cmdline", "rb");
    if (!fp)
        return -1;
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = 0;
    const char *found = NULL;
    int argi = 0;
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1, argi++)
        if (argi >= 2 && (strcmp(buf + i, "-c") == 0 || strcmp(buf + i, "--config") == 0) &&
            i + strlen(buf + i) + 1 < n)
            found = buf + i + strlen(buf + i) + 1;
    char real[PATH_MAX];
    if (!found || !realpath(found, real) || strlen(real) >= len)
        return -1;
    snprintf(out, len, "%s", real);
    return 0;
}

int sc_console_run(const struct sc_config *cfg, int argc, char **argv)
{
    if (argc > 0) {
        fprintf(stderr, "sidecar console: unexpected argument '%s'\n", argv[0]);
        return 2;
    }
    struct sc_console *con = calloc(1, sizeof *con);
    if (!con)
        return 1;
    con->cfg = cfg;
    /* The console never waits long for a server: it says the server does
     * not answer instead. Its sessions use shorter bounds than the
     * daemon's. */
    con->cfg_short = *cfg;
    if (con->cfg_short.mysql_connect_timeout_s > 3)
        con->cfg_short.mysql_connect_timeout_s = 3;
    if (con->cfg_short.mysql_lock_wait_timeout_s > 2)
        con->cfg_short.mysql_lock_wait_timeout_s = 2;
    if (con->cfg_short.amqp_connect_timeout_ms > 3000)
        con->cfg_short.amqp_connect_timeout_ms = 3000;
    sc_console_pool_init(&con->pool);
    pthread_mutex_init(&con->action_lock, NULL);
    int rc = 0;
    char err[600];
    if (cfg->console_token_file && load_tokens(con, cfg->console_token_file, err, sizeof err)) {
        fprintf(stderr, "sidecar console: %s\n", err);
        rc = 2;
        goto out;
    }
    ssize_t n = readlink("/proc/self/exe", con->exe, sizeof con->exe - 1);
    if (n <= 0 || own_config_path(con->config_path, sizeof con->config_path)) {
        fprintf(stderr, "sidecar console: cannot tell this binary's path or its -c FILE "
                        "(/proc/self is needed for replays)\n");
        rc = 1;
        goto out;
    }
    con->exe[n] = 0;
    if (!(con->sampler = sc_console_sampler_start(con))) {
        fprintf(stderr, "sidecar console: cannot start the samplers\n");
        rc = 1;
        goto out;
    }
    struct sc_console_http *http = sc_console_http_start(con, err, sizeof err);
    if (!http) {
        sc_error("%s", err);
        rc = 1;
        goto out_sampler;
    }
    while (!sc_stop_requested())
        sc_sleep_ms(1000);
    sc_info("console: stopping");
    sc_console_http_stop(http);
out_sampler:
    sc_console_sampler_stop(con->sampler);
out:
    sc_console_pool_close(&con->pool);
    memset(con->tokens, 0, sizeof con->tokens);
    pthread_mutex_destroy(&con->action_lock);
    free(con);
    return rc;
}
