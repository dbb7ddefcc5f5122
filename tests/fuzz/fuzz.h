/*
 * fuzz.h - what every libFuzzer target here shares: the entry point's prototype and
 * CHECK, which aborts (a finding) when a promise of the code under test is broken.
 */
#ifndef NX_FUZZ_H
#define NX_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                   \
    do {                                                                           \
        if (!(c)) {                                                                \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);  \
            abort();                                                               \
        }                                                                          \
    } while (0)

#endif
