/* mysql:// URL parsing and secret redaction for URLs in log lines. */
#ifndef SC_URL_H
#define SC_URL_H

#include <stddef.h>

struct sc_mysql_url {
    char *user;
    char *password;
    char *host;
    unsigned port;
    char *socket;    /* ?socket=/path, for a local server */
    char *database;
};

/* Parses mysql://[user[:password]@]host[:port][/database][?socket=PATH].
 * User and password are percent-decoded. Returns 0, or -1 with err set. */
int sc_mysql_url_parse(const char *url, struct sc_mysql_url *out, char *err, size_t err_len);
void sc_mysql_url_free(struct sc_mysql_url *u);

/* Copies url into out with any password replaced by "***". */
void sc_url_redact(const char *url, char *out, size_t out_len);

/* Copies the host:port of a URL (no credentials, path or query) into out:
 * "127.0.0.1:3306" from mysql://u:p@127.0.0.1:3306/app. A socket URL gives
 * its socket path. */
void sc_url_endpoint(const char *url, char *out, size_t out_len);

#endif
