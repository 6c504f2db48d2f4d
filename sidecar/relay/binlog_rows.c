#include "binlog_rows.h"

#include <string.h>

/* Column types as the binary log writes them (MySQL's enum_field_types,
 * numbered the same in MariaDB). */
enum {
    T_DECIMAL = 0, T_TINY = 1, T_SHORT = 2, T_LONG = 3, T_FLOAT = 4, T_DOUBLE = 5, T_NULL = 6,
    T_TIMESTAMP = 7, T_LONGLONG = 8, T_INT24 = 9, T_DATE = 10, T_TIME = 11, T_DATETIME = 12,
    T_YEAR = 13, T_NEWDATE = 14, T_VARCHAR = 15, T_BIT = 16, T_TIMESTAMP2 = 17, T_DATETIME2 = 18,
    T_TIME2 = 19, T_JSON = 245, T_NEWDECIMAL = 246, T_ENUM = 247, T_SET = 248, T_TINY_BLOB = 249,
    T_MEDIUM_BLOB = 250, T_LONG_BLOB = 251, T_BLOB = 252, T_VAR_STRING = 253, T_STRING = 254,
    T_GEOMETRY = 255,
};

const char *sc_binlog_decode_name(enum sc_binlog_decode d)
{
    switch (d) {
    case SC_BINLOG_OK: return "ok";
    case SC_BINLOG_TRUNCATED: return "truncated event";
    case SC_BINLOG_UNSUPPORTED: return "unsupported column type";
    case SC_BINLOG_BAD: return "impossible value";
    }
    return "?";
}

struct cur {
    const unsigned char *p, *end;
};

static int take(struct cur *c, size_t n, const unsigned char **out)
{
    if ((size_t)(c->end - c->p) < n)
        return -1;
    if (out)
        *out = c->p;
    c->p += n;
    return 0;
}

static uint64_t le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* A length-encoded integer (the client protocol's). */
static int lenenc(struct cur *c, uint64_t *v)
{
    const unsigned char *p;
    if (take(c, 1, &p))
        return -1;
    int n = *p < 251 ? 0 : *p == 252 ? 2 : *p == 253 ? 3 : *p == 254 ? 8 : -1;
    if (n < 0)
        return -1;
    if (n == 0) {
        *v = *p;
        return 0;
    }
    if (take(c, (size_t)n, &p))
        return -1;
    *v = le(p, n);
    return 0;
}

/* Bytes of metadata each type has in TABLE_MAP. */
static int meta_len(unsigned char type)
{
    switch (type) {
    case T_FLOAT: case T_DOUBLE: case T_BLOB: case T_TINY_BLOB: case T_MEDIUM_BLOB: case T_LONG_BLOB:
    case T_JSON: case T_GEOMETRY: case T_TIMESTAMP2: case T_DATETIME2: case T_TIME2:
        return 1;
    case T_VARCHAR: case T_VAR_STRING: case T_STRING: case T_NEWDECIMAL: case T_BIT: case T_ENUM:
    case T_SET:
        return 2;
    default:
        return 0;
    }
}

enum sc_binlog_decode sc_binlog_table_map(const unsigned char *body, size_t len, int id_len,
                                          struct sc_binlog_table *t)
{
    struct cur c = {body, body + len};
    const unsigned char *p;
    memset(t, 0, sizeof *t);
    if (take(&c, (size_t)id_len, &p))
        return SC_BINLOG_TRUNCATED;
    t->table_id = le(p, id_len);
    if (take(&c, 2, NULL)) /* flags */
        return SC_BINLOG_TRUNCATED;
    char *names[2] = {t->db, t->name};
    for (int k = 0; k < 2; k++) {
        if (take(&c, 1, &p))
            return SC_BINLOG_TRUNCATED;
        size_t n = *p;
        if (take(&c, n + 1, &p)) /* the name and its terminating 0 */
            return SC_BINLOG_TRUNCATED;
        if (n > SC_BINLOG_NAME_MAX || p[n] != 0)
            return SC_BINLOG_BAD;
        memcpy(names[k], p, n);
        names[k][n] = 0;
    }
    uint64_t ncols, mlen;
    if (lenenc(&c, &ncols))
        return SC_BINLOG_TRUNCATED;
    if (ncols > SC_BINLOG_MAX_COLS)
        return SC_BINLOG_UNSUPPORTED;
    t->ncols = (int)ncols;
    if (take(&c, (size_t)ncols, &p))
        return SC_BINLOG_TRUNCATED;
    memcpy(t->type, p, (size_t)ncols);
    if (lenenc(&c, &mlen))
        return SC_BINLOG_TRUNCATED;
    struct cur m;
    if (mlen > (uint64_t)len || take(&c, (size_t)mlen, &m.p))
        return SC_BINLOG_TRUNCATED;
    m.end = m.p + mlen;
    for (int i = 0; i < t->ncols; i++) {
        int n = meta_len(t->type[i]);
        if (take(&m, (size_t)n, &p))
            return SC_BINLOG_TRUNCATED;
        /* STRING's two bytes are (real type, length), in that order; the
         * others are little-endian. */
        t->meta[i] = (uint16_t)(n == 0 ? 0 : n == 1 ? p[0]
                                : t->type[i] == T_STRING ? (p[0] << 8 | p[1])
                                : (p[0] | p[1] << 8));
    }
    return SC_BINLOG_OK; /* the null bitmap and optional metadata are not needed */
}

/* NEWDECIMAL's stored size: digits packed nine to four bytes. */
static size_t decimal_size(int precision, int scale)
{
    static const int dig2bytes[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};
    int intg = precision - scale;
    return (size_t)((intg / 9) * 4 + dig2bytes[intg % 9] + (scale / 9) * 4 + dig2bytes[scale % 9]);
}

/* Skips (or returns, for a string type) one column's value. Sets *v and *n
 * to the value's bytes for strings. */
static enum sc_binlog_decode field(struct cur *c, unsigned char type, uint16_t meta,
                                   const unsigned char **v, size_t *n)
{
    const unsigned char *p;
    size_t fixed = 0, prefix = 0;
    switch (type) {
    case T_TINY: case T_YEAR: fixed = 1; break;
    case T_SHORT: fixed = 2; break;
    case T_INT24: case T_DATE: case T_NEWDATE: case T_TIME: fixed = 3; break;
    case T_LONG: case T_TIMESTAMP: fixed = 4; break;
    case T_LONGLONG: case T_DATETIME: fixed = 8; break;
    case T_FLOAT: fixed = 4; break;
    case T_DOUBLE: fixed = 8; break;
    case T_TIMESTAMP2: fixed = 4 + (size_t)(meta + 1) / 2; break;
    case T_DATETIME2: fixed = 5 + (size_t)(meta + 1) / 2; break;
    case T_TIME2: fixed = 3 + (size_t)(meta + 1) / 2; break;
    case T_NEWDECIMAL: {
        int precision = meta & 0xff, scale = meta >> 8;
        if (precision < 1 || precision > 65 || scale > precision)
            return SC_BINLOG_BAD;
        fixed = decimal_size(precision, scale);
        break;
    }
    case T_BIT: fixed = (size_t)((meta >> 8) & 0xff) + (size_t)((meta & 0xff) + 7) / 8; break;
    case T_VARCHAR: case T_VAR_STRING: prefix = meta < 256 ? 1 : 2; break;
    case T_BLOB: case T_TINY_BLOB: case T_MEDIUM_BLOB: case T_LONG_BLOB: case T_JSON: case T_GEOMETRY:
        if (meta < 1 || meta > 4)
            return SC_BINLOG_BAD;
        prefix = meta;
        break;
    case T_STRING: {
        unsigned real = meta >> 8, length = meta & 0xff;
        if ((real & 0x30) != 0x30) { /* lengths above 255 borrow two bits of the type */
            length |= ((real & 0x30) ^ 0x30) << 4;
            real |= 0x30;
        }
        if (real == T_ENUM || real == T_SET) {
            fixed = length;
            break;
        }
        if (real != T_STRING)
            return SC_BINLOG_UNSUPPORTED;
        prefix = length > 255 ? 2 : 1;
        break;
    }
    default:
        return SC_BINLOG_UNSUPPORTED;
    }
    if (fixed) {
        if (take(c, fixed, &p))
            return SC_BINLOG_TRUNCATED;
        return SC_BINLOG_OK;
    }
    if (take(c, prefix, &p))
        return SC_BINLOG_TRUNCATED;
    size_t l = (size_t)le(p, (int)prefix);
    if (take(c, l, &p))
        return SC_BINLOG_TRUNCATED;
    if (v) {
        *v = p;
        *n = l;
    }
    return SC_BINLOG_OK;
}

static int bit(const unsigned char *map, int i)
{
    return map[i / 8] >> (i % 8) & 1;
}

enum sc_binlog_decode sc_binlog_rows_table(const unsigned char *body, size_t len, int id_len,
                                           uint64_t *table_id)
{
    if (len < (size_t)id_len)
        return SC_BINLOG_TRUNCATED;
    *table_id = le(body, id_len);
    return SC_BINLOG_OK;
}

enum sc_binlog_decode sc_binlog_write_rows(const unsigned char *body, size_t len, int id_len, int v2,
                                           const struct sc_binlog_table *t, int key_col,
                                           int (*on_key)(void *ctx, const char *v, size_t n),
                                           void *ctx)
{
    struct cur c = {body, body + len};
    const unsigned char *p, *present;
    if (take(&c, (size_t)id_len + 2, NULL)) /* table id, flags */
        return SC_BINLOG_TRUNCATED;
    if (v2) {
        if (take(&c, 2, &p))
            return SC_BINLOG_TRUNCATED;
        size_t extra = (size_t)le(p, 2); /* counts its own two bytes */
        if (extra < 2)
            return SC_BINLOG_BAD;
        if (take(&c, extra - 2, NULL))
            return SC_BINLOG_TRUNCATED;
    }
    uint64_t ncols;
    if (lenenc(&c, &ncols))
        return SC_BINLOG_TRUNCATED;
    if ((int64_t)ncols != t->ncols)
        return SC_BINLOG_BAD;
    if (key_col < 0 || key_col >= t->ncols)
        return SC_BINLOG_UNSUPPORTED;
    size_t map_len = ((size_t)ncols + 7) / 8;
    if (take(&c, map_len, &present))
        return SC_BINLOG_TRUNCATED;
    int npresent = 0;
    for (int i = 0; i < t->ncols; i++)
        npresent += bit(present, i);
    if (!bit(present, key_col))
        return SC_BINLOG_BAD; /* a MINIMAL row image would leave it out */
    size_t null_len = ((size_t)npresent + 7) / 8;
    while (c.p < c.end) {
        const unsigned char *nulls;
        if (take(&c, null_len, &nulls))
            return SC_BINLOG_TRUNCATED;
        const unsigned char *key = NULL;
        size_t key_n = 0;
        for (int i = 0, k = 0; i < t->ncols; i++) {
            if (!bit(present, i))
                continue;
            int is_null = bit(nulls, k++);
            if (is_null) {
                if (i == key_col)
                    return SC_BINLOG_BAD;
                continue;
            }
            const unsigned char *v = NULL;
            size_t n = 0;
            enum sc_binlog_decode d = field(&c, t->type[i], t->meta[i], &v, &n);
            if (d != SC_BINLOG_OK)
                return d;
            if (i == key_col) {
                if (!v)
                    return SC_BINLOG_UNSUPPORTED; /* the key must be a string column */
                key = v;
                key_n = n;
            }
        }
        if (on_key(ctx, (const char *)key, key_n))
            return SC_BINLOG_BAD;
    }
    return SC_BINLOG_OK;
}
