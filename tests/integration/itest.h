/*
 * itest.h - small helpers shared by the integration test programs.
 */
#ifndef ITEST_H
#define ITEST_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "collref.h"
#include "harness.h"

/* Counts a failure when the call does not return want; evaluates to 0 or -1. */
#define EXPECT_ST(fails, want, what, call)                                   \
    ({                                                                        \
        nexar_status_t st__ = (call);                                         \
        int r__ = tl_check_status((what), (want), st__);                      \
        if (r__)                                                              \
            (fails)++;                                                        \
        r__;                                                                  \
    })

#define EXPECT_OK(fails, what, call) EXPECT_ST(fails, NEXAR_OK, what, call)

#define EXPECT_TRUE(fails, cond, ...)                                        \
    do {                                                                      \
        if (!(cond)) {                                                        \
            tl_log("FAIL " __VA_ARGS__);                                      \
            (fails)++;                                                        \
        }                                                                     \
    } while (0)

/* One rank's contribution to a small deterministic f32/int check: exact in every type. */
static inline double itest_val(int rank, size_t i)
{
    return (double)((int)((i * 31u + (size_t)rank * 7u) % 97u) - 48);
}

/* Runs `size` ranks of fn on a daemon with nexar_timeout_s, limit_s hard limit. */
static inline int itest_run(const struct hx_daemon *d, int size, hx_rank_fn fn, void *arg,
                            int nexar_timeout_s, double limit_s)
{
    struct hx_job_opts o = {.sock = d->sock, .size = size, .fn = fn, .arg = arg,
                            .nexar_timeout_s = nexar_timeout_s};
    return hx_run(&o, limit_s);
}

#endif /* ITEST_H */
