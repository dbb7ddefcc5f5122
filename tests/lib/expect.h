/*
 * expect.h - the checks of a unit test that is one file: each failure prints where and
 * what, and counts in `failures`, which the test's main returns from.
 */
#ifndef TL_EXPECT_H
#define TL_EXPECT_H

#include <stdio.h>

static int failures;

#define EXPECT(c)                                                                  \
    do {                                                                           \
        if (!(c)) {                                                                \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #c);       \
            failures++;                                                            \
        }                                                                          \
    } while (0)

/* Integers of any width and sign: printed unsigned, and signed beside. */
#define EXPECT_EQ(a, b)                                                            \
    do {                                                                           \
        unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b); \
        if (a_ != b_) {                                                            \
            fprintf(stderr, "%s:%d: %s == %llu (%lld), expected %s == %llu (%lld)\n", \
                    __FILE__, __LINE__, #a, a_, (long long)a_, #b, b_, (long long)b_); \
            failures++;                                                            \
        }                                                                          \
    } while (0)

#endif
