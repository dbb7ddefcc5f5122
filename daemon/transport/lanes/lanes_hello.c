/*
 * lanes_hello.c - the lanes hello: what a peer says about its lane count on lane 0.
 *
 * The bytes come from another daemon (after mutual TLS), so they are parsed strictly:
 * exactly "nexar-lanes N", N a decimal from 1 to NX_LANES_MAX without leading zeros,
 * nothing before or after.  Fuzzed on its own (tests/fuzz/fuzz_lanes_hello.c).
 */
#include <stdio.h>
#include <string.h>

#include "transport_lanes.h"

#define PREFIX "nexar-lanes "

size_t nx_lanes_hello_put(char *buf, size_t cap, unsigned n)
{
    int len = snprintf(buf, cap, PREFIX "%u", n);
    return len < 0 || (size_t)len >= cap ? 0 : (size_t)len;
}

int nx_lanes_hello_parse(const void *data, size_t len, unsigned *n)
{
    const char *s = data;
    size_t pl = sizeof(PREFIX) - 1;
    if (len <= pl || len > pl + 2 || memcmp(s, PREFIX, pl) != 0)
        return -1;
    unsigned v = 0;
    for (size_t i = pl; i < len; i++) {
        if (s[i] < '0' || s[i] > '9' || (i == pl && s[i] == '0'))
            return -1;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > NX_LANES_MAX)
        return -1;
    *n = v;
    return 0;
}
