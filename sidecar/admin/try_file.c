#include "try_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envelope/message.h"

/* Reads a whole file (at most SC_TRY_MAX_FILE_BYTES), NUL-terminated. NULL
 * with err set. */
static char *read_all(const char *path, size_t *len, char *err, size_t err_len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        snprintf(err, err_len, "cannot open: %s", strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, fp);
        if (n < cap || cap >= SC_TRY_MAX_FILE_BYTES)
            break;
        char *bigger = realloc(buf, cap * 2 + 1);
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    int bad = ferror(fp) || (buf && n == cap);
    fclose(fp);
    if (!buf || bad) {
        snprintf(err, err_len, "%s", !buf ? "out of memory" : n == cap ? "larger than 16 MiB"
                                                                        : "read error");
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

static amqp_bytes_t bytes(const char *s)
{
    return (amqp_bytes_t){strlen(s), (void *)s};
}

/* One field line (NUL-terminated, without its newline). 0, or -1 with err. */
static int field(struct sc_try_message *m, char *line, int lineno, char *err, size_t err_len)
{
    amqp_basic_properties_t *p = &m->props;
    int is_int = strncmp(line, "int-header ", 11) == 0;
    int is_header = is_int || strncmp(line, "header ", 7) == 0;
    char *name = is_int ? line + 11 : is_header ? line + 7 : line;
    char *sep = strstr(name, ": ");
    char *value;
    if (sep) {
        *sep = 0;
        value = sep + 2;
    } else if ((sep = strrchr(name, ':')) && sep[1] == 0) {
        *sep = 0; /* "name:" with nothing after it: an empty value */
        value = sep + 1;
    } else {
        snprintf(err, err_len, "line %d: expected 'NAME: VALUE'", lineno);
        return -1;
    }
    if (is_header) {
        if (p->headers.num_entries == SC_TRY_MAX_HEADERS) {
            snprintf(err, err_len, "line %d: more than %d headers", lineno, SC_TRY_MAX_HEADERS);
            return -1;
        }
        amqp_table_entry_t *e = &m->headers[p->headers.num_entries++];
        e->key = bytes(name);
        if (is_int) {
            char *end;
            errno = 0;
            long long v = strtoll(value, &end, 10);
            if (!value[0] || *end || errno) {
                snprintf(err, err_len, "line %d: int-header %s: '%s' is not a 64-bit integer",
                         lineno, name, value);
                return -1;
            }
            e->value.kind = AMQP_FIELD_KIND_I64;
            e->value.value.i64 = v;
        } else {
            e->value.kind = AMQP_FIELD_KIND_UTF8;
            e->value.value.bytes = bytes(value);
        }
        p->_flags |= AMQP_BASIC_HEADERS_FLAG;
        p->headers.entries = m->headers;
        return 0;
    }
    if (strcmp(name, "content_type") == 0) {
        p->_flags |= AMQP_BASIC_CONTENT_TYPE_FLAG;
        p->content_type = bytes(value);
    } else if (strcmp(name, "message_id") == 0) {
        p->_flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
        p->message_id = bytes(value);
    } else if (strcmp(name, "type") == 0) {
        p->_flags |= AMQP_BASIC_TYPE_FLAG;
        p->type = bytes(value);
    } else if (strcmp(name, "timestamp") == 0) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(value, &end, 10);
        if (!value[0] || *end || errno || value[0] == '-') {
            snprintf(err, err_len, "line %d: timestamp: '%s' is not seconds since 1970", lineno,
                     value);
            return -1;
        }
        p->_flags |= AMQP_BASIC_TIMESTAMP_FLAG;
        p->timestamp = v;
    } else if (strcmp(name, "exchange") == 0) {
        m->exchange = bytes(value);
    } else if (strcmp(name, "routing_key") == 0) {
        m->routing_key = bytes(value);
    } else {
        snprintf(err, err_len, "line %d: unknown field '%s' (content_type, message_id, type, "
                 "timestamp, exchange, routing_key, header NAME, int-header NAME)", lineno, name);
        return -1;
    }
    return 0;
}

int sc_try_message_read(const char *path, const struct sc_consumer_config *k,
                        struct sc_try_message *m, char *err, size_t err_len)
{
    size_t len;
    char *text = read_all(path, &len, err, err_len);
    if (!text) {
        memset(m, 0, sizeof *m);
        return -1;
    }
    return sc_try_message_parse(text, len, k->n_bindings ? k->bindings[0].exchange : "", m, err,
                                err_len);
}

int sc_try_message_parse(char *text, size_t len, const char *exchange, struct sc_try_message *m,
                         char *err, size_t err_len)
{
    memset(m, 0, sizeof *m);
    m->text = text;
    m->exchange = bytes(exchange);
    m->routing_key = bytes("");
    size_t at = strspn(m->text, " \t\r\n");
    if (m->text[at] == '{' || m->text[at] == '[') {
        m->body = (amqp_bytes_t){len, m->text};
        m->props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG;
        m->props.content_type = bytes(m->text[at] == '{' ? SC_CT_STRUCTURED : SC_CT_BATCH);
        return 0;
    }
    m->fields = 1;
    char *line = m->text, *end = m->text + len;
    for (int lineno = 1; line < end; lineno++) {
        char *nl = memchr(line, '\n', (size_t)(end - line));
        char *next = nl ? nl + 1 : end;
        if (nl)
            *nl = 0;
        size_t n = strlen(line);
        if (n && line[n - 1] == '\r')
            line[--n] = 0;
        if (n == 0) {
            m->body = (amqp_bytes_t){(size_t)(end - next), next};
            return 0;
        }
        if (line[0] != '#' && field(m, line, lineno, err, err_len)) {
            sc_try_message_free(m);
            return -1;
        }
        line = next;
    }
    return 0; /* no blank line: the message has an empty body */
}

void sc_try_message_free(struct sc_try_message *m)
{
    free(m->text);
    m->text = NULL;
}
