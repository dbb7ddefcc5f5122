/*
 * fuzz_lanes_hello.c - libFuzzer target for the lanes hello (daemon/transport/lanes/
 * lanes_hello.c): the bytes another daemon sends on lane 0 to say its lane count.
 *
 * Whatever the bytes, the parser reads only them, and accepts exactly what the writer
 * makes: an accepted count is 1..NX_LANES_MAX and writing it back gives the same bytes;
 * and for every count the writer's output parses back to it.
 */
#include <string.h>

#include "fuzz.h"
#include "transport_lanes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly size bytes, so that ASan sees any read past them. */
    uint8_t *copy = malloc(size ? size : 1);
    memcpy(copy, data, size);
    unsigned n = 0;
    if (nx_lanes_hello_parse(copy, size, &n) == 0) {
        char back[32];
        CHECK(n >= 1 && n <= NX_LANES_MAX);
        CHECK(nx_lanes_hello_put(back, sizeof(back), n) == size);
        CHECK(memcmp(back, copy, size) == 0);
    }
    free(copy);
    for (unsigned k = 1; k <= NX_LANES_MAX; k++) {
        char b[32];
        size_t l = nx_lanes_hello_put(b, sizeof(b), k);
        CHECK(l > 0 && nx_lanes_hello_parse(b, l, &n) == 0 && n == k);
    }
    return 0;
}
