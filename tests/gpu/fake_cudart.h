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
 * For the staging copies, copies can take time (a delay, slept on the stream's thread),
 * and each is logged with when it was queued, started and ended.
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

/* Calls that fail the next n times (then work again): counters the test sets.
 * copy_fault: the next copy that a stream runs faults at the end of its delay, as a
 * kernel's illegal address does on a GPU, and breaks the context: no stream runs anything more (no host
 * function, no event record), and cudaStreamQuery, cudaMemcpyAsync, cudaEventRecord and
 * cudaLaunchHostFunc return cudaErrorIllegalAddress until fk_reset. */
struct fk_fail {
    int memcpy_async, launch_host_func, malloc_async, event_record, copy_fault;
};
extern struct fk_fail fk_fail;

/* One cudaMemcpyAsync, as logged (the first FK_COPY_LOG after fk_reset). */
#define FK_COPY_LOG 4096
struct fk_copy {
    enum cudaMemcpyKind kind;
    void *dst;
    const void *src;
    size_t n;
    double t_queued, t_start, t_end; /* seconds on CLOCK_MONOTONIC; t_end 0 while it runs */
};
/* How long each copy of this kind takes from now on, memmove included (0: as long as the
 * memmove). */
void fk_set_copy_delay(enum cudaMemcpyKind kind, unsigned us);
/* Copies the log into out (at most max); returns how many. */
int fk_copies(struct fk_copy *out, int max);
/* Clears the delays, the failure counters and the log. */
void fk_reset(void);

/* Queues on s: wait until *word >= value (the shim's cuStreamWaitValue64). */
void fk_wait_value(cudaStream_t s, const uint64_t *word, uint64_t value);
/* Queues on s: fn(arg), then free(arg) (a kernel). */
void fk_call(cudaStream_t s, void (*fn)(void *), void *arg);
/* Whether every record of ev queued so far has happened. */
bool fk_event_done(cudaEvent_t ev);
/* cudaIpcCloseMemHandle calls that returned so far (each waits for every stream to run
 * dry, as on a GPU). */
int fk_ipc_closes(void);
/* Streams created so far (user streams and exec.c's). */
int fk_streams_created(void);
/* Lets every stream run dry, stops their threads and frees everything. */
void fk_shutdown(void);

#endif
