/* Reading a message's header table. */
#include "amqp_conn.h"

#include <string.h>

static const amqp_field_value_t *header(const amqp_table_t *h, const char *key)
{
    if (!h)
        return NULL;
    size_t klen = strlen(key);
    for (int i = 0; i < h->num_entries; i++) {
        const amqp_table_entry_t *e = &h->entries[i];
        if (e->key.len == klen && memcmp(e->key.bytes, key, klen) == 0)
            return &e->value;
    }
    return NULL;
}

int64_t sc_amqp_header_int(const amqp_table_t *h, const char *key, int64_t def)
{
    const amqp_field_value_t *v = header(h, key);
    if (!v)
        return def;
    switch (v->kind) {
    case AMQP_FIELD_KIND_I8: return v->value.i8;
    case AMQP_FIELD_KIND_U8: return v->value.u8;
    case AMQP_FIELD_KIND_I16: return v->value.i16;
    case AMQP_FIELD_KIND_U16: return v->value.u16;
    case AMQP_FIELD_KIND_I32: return v->value.i32;
    case AMQP_FIELD_KIND_U32: return v->value.u32;
    case AMQP_FIELD_KIND_I64: return v->value.i64;
    case AMQP_FIELD_KIND_U64: return (int64_t)v->value.u64;
    default: return def;
    }
}

amqp_bytes_t sc_amqp_header_bytes(const amqp_table_t *h, const char *key)
{
    const amqp_field_value_t *v = header(h, key);
    if (v && (v->kind == AMQP_FIELD_KIND_UTF8 || v->kind == AMQP_FIELD_KIND_BYTES))
        return v->value.bytes;
    return amqp_empty_bytes;
}
