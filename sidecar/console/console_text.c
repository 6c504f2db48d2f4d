/* Any bytes as a JSON string (console_text.h). jansson refuses a string
 * that is not UTF-8, and a dead letter's body can be anything: each byte
 * that does not start a valid sequence is replaced, not the whole text. */
#include "console_text.h"

#include <stdlib.h>
#include <string.h>

json_t *sc_console_text_json(const unsigned char *s, size_t len)
{
    char *buf = malloc(len * 3 + 1);
    if (!buf)
        return json_null();
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        unsigned char c = s[i];
        size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        int good = n > 0 && i + n <= len;
        for (size_t k = 1; good && k < n; k++)
            good = (s[i + k] & 0xC0) == 0x80;
        if (good && n == 2 && c < 0xC2)
            good = 0; /* overlong */
        if (good && n == 3) {
            unsigned cp = ((c & 0x0Fu) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu);
            good = cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF);
        }
        if (good && n == 4) {
            unsigned cp = ((c & 0x07u) << 18) | ((s[i + 1] & 0x3Fu) << 12) |
                          ((s[i + 2] & 0x3Fu) << 6) | (s[i + 3] & 0x3Fu);
            good = cp >= 0x10000 && cp <= 0x10FFFF;
        }
        if (good) {
            memcpy(buf + o, s + i, n);
            o += n;
            i += n;
        } else {
            memcpy(buf + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    json_t *j = json_stringn(buf, o);
    free(buf);
    return j ? j : json_null();
}
