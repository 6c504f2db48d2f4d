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

/* Checks that url reads back as the parts it was written with, before
 * anything connects or logs: the user name and password end at the '@'
 * before the host, so a '/', '?' or '#' in them (common in base64 secrets)
 * must be percent-encoded, as must an '@', ':', '[' or ']' in an amqp://
 * password (rabbitmq-c splits on them); ports are numbers in 1..65535, and
 * a mysql:// URL parses whole. Returns 0, or -1 with why: a reason that
 * never quotes any part of the URL (it may hold a secret). */
int sc_url_check(const char *url, char *why, size_t why_len);

/* Copies url into out with any password replaced by "***" (a URL that
 * fails sc_url_check is not shown at all). */
void sc_url_redact(const char *url, char *out, size_t out_len);

/* Copies the host:port of a URL (no credentials, path or query) into out:
 * "127.0.0.1:3306" from mysql://u:p@127.0.0.1:3306/app. A socket URL gives
 * its socket path; a URL that fails sc_url_check gives a placeholder, never
 * a part of it. */
void sc_url_endpoint(const char *url, char *out, size_t out_len);

#endif
