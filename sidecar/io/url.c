#include "url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Percent-decodes s[0..n) into a new string; NULL on a bad escape. */
static char *decode(const char *s, size_t n)
{
    char *out = malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            int hi, lo;
            if (i + 2 >= n || (hi = hexval(s[i + 1])) < 0 || (lo = hexval(s[i + 2])) < 0) {
                free(out);
                return NULL;
            }
            *o++ = (char)(hi * 16 + lo);
            i += 2;
        } else {
            *o++ = s[i];
        }
    }
    *o = 0;
    return out;
}

int sc_mysql_url_parse(const char *url, struct sc_mysql_url *u, char *err, size_t err_len)
{
    memset(u, 0, sizeof *u);
    u->port = 3306;
    if (strncmp(url, "mysql://", 8) != 0) {
        snprintf(err, err_len, "mysql.url: expected mysql://user:password@host:port/database");
        return -1;
    }
    const char *p = url + 8;
    const char *end = p + strcspn(p, "/?");
    const char *at = NULL;
    for (const char *q = p; q < end; q++)
        if (*q == '@')
            at = q; /* the last @ ends the credentials */
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        size_t ulen = colon ? (size_t)(colon - p) : (size_t)(at - p);
        if (!(u->user = decode(p, ulen)))
            goto bad;
        if (colon && !(u->password = decode(colon + 1, (size_t)(at - colon - 1))))
            goto bad;
        p = at + 1;
    }
    const char *colon = memchr(p, ':', (size_t)(end - p));
    size_t hlen = colon ? (size_t)(colon - p) : (size_t)(end - p);
    if (!(u->host = decode(p, hlen)))
        goto bad;
    if (colon) {
        char *e;
        unsigned long port = strtoul(colon + 1, &e, 10);
        if (e != end || port == 0 || port > 65535) {
            snprintf(err, err_len, "mysql.url: bad port");
            sc_mysql_url_free(u);
            return -1;
        }
        u->port = (unsigned)port;
    }
    p = end;
    if (*p == '/') {
        const char *dend = p + 1 + strcspn(p + 1, "?");
        if (dend > p + 1 && !(u->database = decode(p + 1, (size_t)(dend - p - 1))))
            goto bad;
        p = dend;
    }
    if (*p == '?') {
        p++;
        while (*p) {
            size_t n = strcspn(p, "&");
            if (strncmp(p, "socket=", 7) == 0) {
                free(u->socket);
                if (!(u->socket = decode(p + 7, n - 7)))
                    goto bad;
            } else {
                /* its name only: the value is not shown */
                size_t name = strcspn(p, "=&");
                snprintf(err, err_len, "mysql.url: unknown parameter \"%.*s\" (expected socket)",
                         (int)(name > 32 ? 32 : name), p);
                sc_mysql_url_free(u);
                return -1;
            }
            p += n;
            if (*p == '&')
                p++;
        }
    }
    if (!u->host[0] && !u->socket) {
        snprintf(err, err_len, "mysql.url: host is missing");
        sc_mysql_url_free(u);
        return -1;
    }
    return 0;
bad:
    snprintf(err, err_len, "mysql.url: bad percent-escape or out of memory");
    sc_mysql_url_free(u);
    return -1;
}

void sc_mysql_url_free(struct sc_mysql_url *u)
{
    if (u->password)
        memset(u->password, 0, strlen(u->password));
    free(u->user);
    free(u->password);
    free(u->host);
    free(u->socket);
    free(u->database);
    memset(u, 0, sizeof *u);
}

/* Where the authority (user:password@host:port) of url ends: the first
 * character that ends it for the scheme's parser (ours for mysql://,
 * rabbitmq-c's for amqp://). */
static const char *authority_end(const char *url, const char *auth)
{
    int amqp = strncmp(url, "amqp", 4) == 0;
    return auth + strcspn(auth, amqp ? "/?#" : "/?");
}

static const char *authority(const char *url)
{
    const char *scheme = strstr(url, "://");
    return scheme ? scheme + 3 : url;
}

/* 1 when an '@' comes after the authority: credentials holding a
 * character that ended the authority early, the rest of them read as
 * host, path or query. */
static int credentials_cut(const char *url)
{
    const char *end = authority_end(url, authority(url));
    return strchr(end, '@') != NULL;
}

static int port_ok(const char *p, const char *end)
{
    if (p == end || end - p > 5)
        return 0;
    unsigned long v = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return 0;
        v = v * 10 + (unsigned long)(*p - '0');
    }
    return v >= 1 && v <= 65535;
}

static int why_fail(char *why, size_t len, const char *msg)
{
    snprintf(why, len, "%s", msg);
    return -1;
}

int sc_url_check(const char *url, char *why, size_t why_len)
{
    int mysql = strncmp(url, "mysql://", 8) == 0;
    if (!mysql && strncmp(url, "amqp://", 7) != 0 && strncmp(url, "amqps://", 8) != 0)
        return why_fail(why, why_len, "expected a mysql://, amqp:// or amqps:// URL");
    if (credentials_cut(url))
        return why_fail(why, why_len,
                        "the user name or password holds a '/', '?' or '#' that is not "
                        "percent-encoded (write %2F, %3F, %23; an '@' after the host is %40)");
    const char *auth = authority(url), *end = authority_end(url, auth);
    const char *at = NULL;
    int ats = 0;
    for (const char *q = auth; q < end; q++)
        if (*q == '@') {
            at = q;
            ats++;
        }
    const char *host = at ? at + 1 : auth;
    if (!mysql && at) {
        /* rabbitmq-c ends the user name at the first ':' or '@' and the
         * password at the next: anything more must be encoded. */
        int colons = 0, brackets = 0;
        for (const char *q = auth; q < at; q++) {
            colons += *q == ':';
            brackets |= *q == '[' || *q == ']';
        }
        if (ats > 1 || colons > 1 || brackets)
            return why_fail(why, why_len,
                            "the user name or password holds an '@', ':', '[' or ']' that is not "
                            "percent-encoded (write %40, %3A, %5B, %5D)");
    }
    for (const char *q = auth; q < end; q++)
        if (*q == '%' && (q + 2 >= end || hexval(q[1]) < 0 || hexval(q[2]) < 0))
            return why_fail(why, why_len, "a '%' that does not start a percent-escape (%XX) in the "
                                          "user name, password or host");
    const char *colon = host < end && *host != '[' ? memchr(host, ':', (size_t)(end - host)) : NULL;
    if (host < end && *host == '[') { /* [v6]:port */
        const char *close = memchr(host, ']', (size_t)(end - host));
        if (!close)
            return why_fail(why, why_len, "an IPv6 host without its closing ']'");
        colon = close + 1 < end && close[1] == ':' ? close + 1 : NULL;
    }
    if (colon && !port_ok(colon + 1, end))
        return why_fail(why, why_len, "bad port (expected a number from 1 to 65535)");
    if (mysql) {
        struct sc_mysql_url u;
        char err[256];
        if (sc_mysql_url_parse(url, &u, err, sizeof err)) {
            /* its messages name the key and never the URL's credentials
             * (they are checked above): drop the key, the caller names it */
            const char *m = strncmp(err, "mysql.url: ", 11) == 0 ? err + 11 : err;
            snprintf(why, why_len, "%s", m);
            return -1;
        }
        sc_mysql_url_free(&u);
    }
    return 0;
}

#define HIDDEN "(URL not shown: its credentials are not percent-encoded)"

void sc_url_redact(const char *url, char *out, size_t out_len)
{
    if (credentials_cut(url)) {
        snprintf(out, out_len, "%s", HIDDEN);
        return;
    }
    const char *auth = authority(url);
    const char *end = auth + strcspn(auth, "/?");
    const char *at = NULL;
    for (const char *q = auth; q < end; q++)
        if (*q == '@')
            at = q;
    const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
    if (!colon) {
        snprintf(out, out_len, "%s", url);
        return;
    }
    snprintf(out, out_len, "%.*s:***%s", (int)(colon - url), url, at);
}

void sc_url_endpoint(const char *url, char *out, size_t out_len)
{
    if (credentials_cut(url)) {
        snprintf(out, out_len, "%s", HIDDEN);
        return;
    }
    const char *auth = authority(url);
    const char *end = auth + strcspn(auth, "/?");
    for (const char *q = auth; q < end; q++)
        if (*q == '@')
            auth = q + 1;
    const char *sock = strstr(end, "socket=");
    if (auth == end && sock)
        snprintf(out, out_len, "%.*s", (int)strcspn(sock + 7, "&"), sock + 7);
    else
        snprintf(out, out_len, "%.*s", (int)(end - auth), auth);
}
