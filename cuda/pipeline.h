/*
 * pipeline.h - the schedule of a three-stage chunk pipeline through staging buffers:
 *
 *   IN   (asynchronous, e.g. D2H of chunk i into staging buffer i % nbuf)
 *   HOST (synchronous on the calling thread: the network step or a CPU reduce)
 *   OUT  (asynchronous, e.g. H2D of the buffer back to device memory)
 *
 * so that IN of chunk i+1 and OUT of chunk i-1 run on the copy engines while HOST works
 * on chunk i.  Rules: each stage takes the chunks in order; HOST(i) after IN(i) has
 * finished; OUT(i) right after HOST(i); IN(i) only once buffer i % nbuf is free, i.e.
 * OUT(i - nbuf) has finished.  Three buffers give the full overlap; more absorb jitter.
 * A missing IN or OUT stage is a no-op that finishes at once.
 *
 * Plain C: the CUDA side (staging.c) supplies the stages, and tests/unit/test_pipeline.c
 * checks the schedule with simulated copies.
 */
#ifndef NX_CUDA_PIPELINE_H
#define NX_CUDA_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>

enum { NX_PIPE_IN = 0, NX_PIPE_HOST = 1, NX_PIPE_OUT = 2 };

struct nx_pipe_ops {
    void *arg;
    bool has_in, has_out;
    /* Starts IN/OUT of chunk on buffer buf and returns, or runs HOST to completion.
     * 0, or a negative error. */
    int (*start)(void *arg, int stage, uint64_t chunk, uint32_t buf);
    /* IN/OUT: 1 once that stage of chunk has finished, 0 while it has not; with wait it
     * blocks until it has.  A negative error. */
    int (*done)(void *arg, int stage, uint64_t chunk, uint32_t buf, bool wait);
};

/* Runs every stage of chunks [0, nchunks) through nbuf (>= 1) buffers.  Returns 0, or
 * the first error after every stage already started has finished. */
int nx_pipe_run(const struct nx_pipe_ops *ops, uint64_t nchunks, uint32_t nbuf);

#endif
