#include "uuid_v5.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "uuid_text.h"

/* SHA-1 (FIPS 180-4): only for UUIDv5, where RFC 4122 names it; nothing
 * here relies on it being collision-resistant against an attacker beyond
 * what a UUID is. */
struct sha1 {
    uint32_t h[5];
    uint64_t bytes;
    unsigned char block[64];
    size_t used;
};

static uint32_t rol(uint32_t x, int n)
{
    return (x << n) | (x >> (32 - n));
}

static void sha1_block(struct sha1 *c, const unsigned char *b)
{
    uint32_t w[80];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
               (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
    for (int i = 16; i < 80; i++)
        w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = c->h[0], bb = c->h[1], cc = c->h[2], d = c->h[3], e = c->h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20)
            f = (bb & cc) | (~bb & d), k = 0x5A827999;
        else if (i < 40)
            f = bb ^ cc ^ d, k = 0x6ED9EBA1;
        else if (i < 60)
            f = (bb & cc) | (bb & d) | (cc & d), k = 0x8F1BBCDC;
        else
            f = bb ^ cc ^ d, k = 0xCA62C1D6;
        uint32_t t = rol(a, 5) + f + e + k + w[i];
        e = d;
        d = cc;
        cc = rol(bb, 30);
        bb = a;
        a = t;
    }
    c->h[0] += a;
    c->h[1] += bb;
    c->h[2] += cc;
    c->h[3] += d;
    c->h[4] += e;
}

static void sha1_init(struct sha1 *c)
{
    static const uint32_t h0[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    memcpy(c->h, h0, sizeof h0);
    c->bytes = 0;
    c->used = 0;
}

static void sha1_add(struct sha1 *c, const unsigned char *p, size_t len)
{
    c->bytes += len;
    while (len) {
        size_t take = 64 - c->used < len ? 64 - c->used : len;
        memcpy(c->block + c->used, p, take);
        c->used += take;
        p += take;
        len -= take;
        if (c->used == 64) {
            sha1_block(c, c->block);
            c->used = 0;
        }
    }
}

static void sha1_end(struct sha1 *c, unsigned char out[20])
{
    uint64_t bits = c->bytes * 8;
    unsigned char pad = 0x80, zero = 0, len[8];
    sha1_add(c, &pad, 1);
    while (c->used != 56)
        sha1_add(c, &zero, 1);
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)(bits >> (56 - 8 * i));
    sha1_add(c, len, 8);
    for (int i = 0; i < 5; i++) {
        out[4 * i] = (unsigned char)(c->h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(c->h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(c->h[i] >> 8);
        out[4 * i + 3] = (unsigned char)c->h[i];
    }
}

static int hexval(char c)
{
    return c <= '9' ? c - '0' : c - 'a' + 10;
}

/* UUIDv5 of a name given in parts, hashed one after the other. */
static int uuid_v5_parts(const char *namespace_uuid, const void *const *part, const size_t *len,
                         int n, char out[37])
{
    char ns[37];
    if (sc_uuid_canonical(namespace_uuid, strlen(namespace_uuid), ns))
        return -1;
    unsigned char nsb[16], digest[20];
    for (int i = 0, j = 0; i < 16; i++, j += 2) {
        if (ns[j] == '-')
            j++;
        nsb[i] = (unsigned char)(hexval(ns[j]) << 4 | hexval(ns[j + 1]));
    }
    struct sha1 c;
    sha1_init(&c);
    sha1_add(&c, nsb, sizeof nsb);
    for (int i = 0; i < n; i++)
        sha1_add(&c, part[i], len[i]);
    sha1_end(&c, digest);
    digest[6] = (unsigned char)((digest[6] & 0x0F) | 0x50); /* version 5 */
    digest[8] = (unsigned char)((digest[8] & 0x3F) | 0x80); /* RFC 4122 variant */
    snprintf(out, 37,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             digest[0], digest[1], digest[2], digest[3], digest[4], digest[5], digest[6],
             digest[7], digest[8], digest[9], digest[10], digest[11], digest[12], digest[13],
             digest[14], digest[15]);
    return 0;
}

int sc_uuid_v5(const char *namespace_uuid, const void *name, size_t len, char out[37])
{
    return uuid_v5_parts(namespace_uuid, &name, &len, 1, out);
}

int sc_uuid_v5_pair(const char *namespace_uuid, const void *a, size_t a_len, const void *b,
                    size_t b_len, char out[37])
{
    const void *part[3] = {a, "", b};
    size_t len[3] = {a_len, 1, b_len};
    return uuid_v5_parts(namespace_uuid, part, len, 3, out);
}

int sc_message_id_to_event_id(const char *message_id, size_t len, char out[37])
{
    if (sc_uuid_canonical(message_id, len, out) == 0)
        return 0;
    sc_uuid_v5(SC_MESSAGE_ID_NAMESPACE, message_id, len, out);
    return 1;
}
