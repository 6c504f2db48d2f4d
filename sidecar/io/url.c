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
                snprintf(err, err_len, "mysql.url: unknown parameter \"%.*s\"", (int)n, p);
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

void sc_url_redact(const char *url, char *out, size_t out_len)
{
    const char *scheme = strstr(url, "://");
    const char *auth = scheme ? scheme + 3 : url;
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
    const char *scheme = strstr(url, "://");
    const char *auth = scheme ? scheme + 3 : url;
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
