/* Bytes from a server (a payload, a body, a header) as a JSON string the
 * page can show, whatever they hold. */
#ifndef SC_CONSOLE_TEXT_H
#define SC_CONSOLE_TEXT_H

#include <jansson.h>
#include <stddef.h>

/* s[0..len) as a JSON string: invalid UTF-8 becomes U+FFFD. JSON null
 * when out of memory. */
json_t *sc_console_text_json(const unsigned char *s, size_t len);

#endif
