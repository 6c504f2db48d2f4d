#include "uuid_text.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

int sc_uuid_canonical(const char *s, size_t len, char out[37])
{
    if (len == 45 && strncasecmp(s, "urn:uuid:", 9) == 0)
        s += 9, len -= 9;
    else if (len == 38 && s[0] == '{' && s[37] == '}')
        s += 1, len -= 2;
    if (len != 36)
        return -1;
    for (size_t i = 0; i < 36; i++) {
        char c = s[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-')
                return -1;
        } else if (!isxdigit((unsigned char)c)) {
            return -1;
        }
        out[i] = (char)tolower((unsigned char)c);
    }
    out[36] = 0;
    return 0;
}

int sc_is_canonical_uuid(const char *s, size_t len)
{
    char canon[37];
    return len == 36 && sc_uuid_canonical(s, len, canon) == 0 && memcmp(canon, s, 36) == 0;
}
