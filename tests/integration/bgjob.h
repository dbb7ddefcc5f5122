/*
 * bgjob.h - a healthy job that keeps running checked allreduces on the same daemon
 * while a test does something hostile next to it; it must finish with every result
 * exact.
 */
#ifndef ITEST_BGJOB_H
#define ITEST_BGJOB_H

#include "harness.h"

struct bgjob {
    struct hx_job job;
    struct bg_shared *sh;
};

/* Starts `size` ranks looping allreduce (f32 sum, 1001 and 70001 elements) until
 * bgjob_finish(). */
int bgjob_start(struct bgjob *b, const struct hx_daemon *d, int size);

/* Stops the loop; 0 when every rank ran at least one iteration, every result was
 * exact and every rank exited 0. */
int bgjob_finish(struct bgjob *b);

/* The end of a hostile test: finishes b (the healthy job that ran beside the hostile
 * clients), then runs a new job of `size` ranks on d; the failures among the two, each
 * logged. */
int bgjob_conclude(struct bgjob *b, const struct hx_daemon *d, int size);

#endif /* ITEST_BGJOB_H */
