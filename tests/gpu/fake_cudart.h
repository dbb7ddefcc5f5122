/*
 * fake_cudart.h - the CUDA runtime calls of cuda/exec.c, served on host threads, so that
 * its logic (what it queues where, when an op completes, what blocks the loop) is tested
 * without a GPU: test_exec_logic.c links exec.c against fake_cudart.c instead of cudart.
 *
 * A stream is a queue that a thread of its own works through in order: waits for an
 * event's record, event records, host functions, copies (memcpy), frees, and calls the
 * test queues (its stand-in for kernels).  cudaStreamSynchronize blocks until the queue
 * is empty, as the real one does.  Events count records: a wait queued by
 * cudaStreamWaitEvent waits for the record that was the last one at that moment.
 * Nothing here is CUDA; it models the ordering rules exec.c relies on.
 *
 * For staging.c (test_staging_logic.c) copies can take time (a delay per direction, slept
 * on the stream's thread), each is logged with when it was queued, started and ended, and
 * one can fail as it runs: the stream then keeps the error, like CUDA's sticky errors, and
 * its later event records and cudaStreamSynchronize report it.  Pinned memory
 * (cudaHostAlloc) is heap memory that cudaFreeHost frees at once, counting frees of
 * memory that a queued copy still uses.
 */
#ifndef FAKE_CUDART_H
#define FAKE_CUDART_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* The checks of the tests against this fake: a failed one is counted in fk_failures and
 * printed with its file, line and the case that ran (fk_case, which the test sets). */
extern int fk_failures;
extern const char *volatile fk_case;
#define FK_EXPECT(c, ...)                                                                  \
    do {                                                                                   \
        if (!(c)) {                                                                        \
            fprintf(stderr, "FAIL %s:%d [%s]: ", __FILE__, __LINE__, fk_case);             \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
            fk_failures++;                                                                 \
        }                                                                                  \
    } while (0)

/* The cases named on the command line (argv[1..]): whether case name runs; every case runs
 * when none is named.  fk_cases keeps argc and argv for it. */
void fk_cases(int argc, char **argv);
bool fk_want_case(const char *name);

/* Calls that fail the next n times (then work again): counters the test sets. */
struct fk_fail {
    int memcpy_async, launch_host_func, malloc_async, event_record;
};
extern struct fk_fail fk_fail;
/* The k-th call from when it is set fails, once (0: off).  copy_exec: the k-th copy that
 * a stream runs fails there (cudaErrorIllegalAddress on the stream). */
struct fk_fail_at {
    int memcpy_async, event_record, copy_exec;
};
extern struct fk_fail_at fk_fail_at;

/* One cudaMemcpyAsync, as logged (the first FK_COPY_LOG after fk_reset). */
#define FK_COPY_LOG 4096
struct fk_copy {
    enum cudaMemcpyKind kind;
    void *dst;
    const void *src;
    size_t n;
    double t_queued, t_start, t_end; /* fk_now(); t_end 0 while it runs or never ran */
    bool failed;
};
/* Seconds on CLOCK_MONOTONIC; sleeps until fk_now() >= t. */
double fk_now(void);
void fk_sleep_until(double t);
/* How long each copy of this kind takes from now on, memmove included (0: as long as the
 * memmove). */
void fk_set_copy_delay(enum cudaMemcpyKind kind, unsigned us);
/* Copies the log into out (at most max); returns how many. */
int fk_copies(struct fk_copy *out, int max);
/* Copies queued or running on any stream. */
int fk_copies_in_flight(void);
/* cudaFreeHost calls that freed memory a queued or running copy still used. */
int fk_host_free_busy(void);
/* Clears the streams' and events' errors, the delays, the failure counters and the log. */
void fk_reset(void);

/* Queues on s: wait until *word >= value (the shim's cuStreamWaitValue64). */
void fk_wait_value(cudaStream_t s, const uint64_t *word, uint64_t value);
/* Queues on s: fn(arg), then free(arg) (a kernel). */
void fk_call(cudaStream_t s, void (*fn)(void *), void *arg);
/* Whether every record of ev queued so far has happened. */
bool fk_event_done(cudaEvent_t ev);
/* Streams created so far (user streams and exec.c's). */
int fk_streams_created(void);
/* Lets every stream run dry, stops their threads and frees everything. */
void fk_shutdown(void);

#endif
