/* text_escape.c - see text_escape.h. */
#include "text_escape.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The length of the well-formed UTF-8 sequence at s (2..4 bytes), or 0. */
static size_t utf8_len(const unsigned char *s)
{
    size_t n;
    uint32_t cp;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        n = 2, cp = s[0] & 0x1f;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        n = 3, cp = s[0] & 0x0f;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        n = 4, cp = s[0] & 0x07;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0; /* overlong, a surrogate, beyond Unicode */
    return n;
}

size_t nx_text_escape(const char *in, char *out, size_t len)
{
    const unsigned char *s = (const unsigned char *)in;
    size_t o = 0;
    if (len == 0)
        return 0;
    while (*s) {
        size_t n = *s >= 0x80 ? utf8_len(s) : 0;
        char tmp[5];
        const char *put = (const char *)s;
        size_t take = 1;
        if (n) {
            take = n;
        } else if (*s < 0x20 || *s >= 0x7f) {
            snprintf(tmp, sizeof(tmp), "\\x%02x", *s);
            put = tmp;
            take = 4;
        }
        if (o + take >= len)
            break;
        memcpy(out + o, put, take);
        o += take;
        s += put == tmp ? 1 : take;
    }
    out[o] = '\0';
    return o;
}
