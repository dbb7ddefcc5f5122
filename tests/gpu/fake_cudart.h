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
 */
#ifndef FAKE_CUDART_H
#define FAKE_CUDART_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>

/* Calls that fail the next n times (then work again): counters the test sets. */
struct fk_fail {
    int memcpy_async, launch_host_func, malloc_async, event_record;
};
extern struct fk_fail fk_fail;

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
