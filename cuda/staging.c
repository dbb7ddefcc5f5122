/*
 * staging.c - the D2H/H2D staging engine: per device, NBUF pinned host buffers
 * (cudaHostAlloc), one stream for device-to-host copies and one for host-to-device
 * copies, and an event per buffer and direction.  pipeline.c decides the order; this file
 * only starts copies and asks events.  Two streams, because the GPU has a copy engine
 * per direction: D2H of chunk i+1 and H2D of chunk i-1 then run at the same time while
 * the CPU works on chunk i.
 *
 * A run may be on another thread than nx_staging_fini: fini stops the runs in flight (their
 * next stage fails with -ECANCELED, what they started still finishes), waits for them,
 * waits for the streams, and only then frees the buffers.  A failed stage waits for its
 * stream too, so that no copy outlives the run that queued it.  These waits are bounded:
 * the staging streams carry copies and event records only, never a wait on other work.
 * An engine from nx_staging_get is valid until nx_staging_fini begins: a run must have
 * started before that.  tests/gpu/test_staging_logic.c checks this file against a fake
 * runtime.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_int.h"
#include "pipeline.h"

#define NBUF 4
#define CHUNK (4u << 20) /* ~100 us of PCIe per copy: large enough to hide the launch */
#define MAX_DEVICES 64

struct nx_staging {
    int device;
    void *buf[NBUF];
    cudaStream_t d2h, h2d;
    cudaEvent_t in_done[NBUF], out_done[NBUF];
    int runs;      /* nx_staging_run calls in flight (under lock) */
    bool stopping; /* nx_staging_fini has begun: stages fail with -ECANCELED */
};

static struct nx_staging *engines[MAX_DEVICES];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t runs_cv = PTHREAD_COND_INITIALIZER;

static void engine_free(struct nx_staging *st)
{
    cudaSetDevice(st->device);
    /* cudaFreeHost on a buffer that a queued copy still uses is a use after free. */
    if (st->d2h)
        cudaStreamSynchronize(st->d2h);
    if (st->h2d)
        cudaStreamSynchronize(st->h2d);
    for (int b = 0; b < NBUF; b++) {
        if (st->buf[b])
            cudaFreeHost(st->buf[b]);
        if (st->in_done[b])
            cudaEventDestroy(st->in_done[b]);
        if (st->out_done[b])
            cudaEventDestroy(st->out_done[b]);
    }
    if (st->d2h)
        cudaStreamDestroy(st->d2h);
    if (st->h2d)
        cudaStreamDestroy(st->h2d);
    free(st);
}

struct nx_staging *nx_staging_get(int device)
{
    if (device < 0 || device >= MAX_DEVICES)
        return NULL;
    pthread_mutex_lock(&lock);
    struct nx_staging *st = engines[device];
    if (st)
        goto out;
    st = calloc(1, sizeof(*st));
    if (!st)
        goto out;
    st->device = device;
    CU_TRY(cudaSetDevice(device), fail);
    CU_TRY(cudaStreamCreateWithFlags(&st->d2h, cudaStreamNonBlocking), fail);
    CU_TRY(cudaStreamCreateWithFlags(&st->h2d, cudaStreamNonBlocking), fail);
    for (int b = 0; b < NBUF; b++) {
        CU_TRY(cudaHostAlloc(&st->buf[b], CHUNK, cudaHostAllocPortable), fail);
        CU_TRY(cudaEventCreateWithFlags(&st->in_done[b], cudaEventDisableTiming), fail);
        CU_TRY(cudaEventCreateWithFlags(&st->out_done[b], cudaEventDisableTiming), fail);
    }
    engines[device] = st;
out:
    pthread_mutex_unlock(&lock);
    return st;
fail:
    engine_free(st);
    pthread_mutex_unlock(&lock);
    return NULL;
}

size_t nx_staging_chunk(const struct nx_staging *st)
{
    (void)st;
    return CHUNK;
}

struct job {
    struct nx_staging *st;
    const uint8_t *src;
    uint8_t *dst;
    size_t n;
    nx_staging_host_fn host;
    void *arg;
};

static size_t chunk_len(const struct job *j, uint64_t c)
{
    size_t off = (size_t)c * CHUNK;
    return j->n - off < CHUNK ? j->n - off : CHUNK;
}

static int stage_start(void *arg, int stage, uint64_t c, uint32_t b)
{
    struct job *j = arg;
    struct nx_staging *st = j->st;
    size_t off = (size_t)c * CHUNK, len = chunk_len(j, c);
    if (__atomic_load_n(&st->stopping, __ATOMIC_ACQUIRE))
        return -ECANCELED;
    switch (stage) {
    case NX_PIPE_IN:
        CU_TRY(cudaMemcpyAsync(st->buf[b], j->src + off, len, cudaMemcpyDeviceToHost, st->d2h),
               fail);
        CU_TRY(cudaEventRecord(st->in_done[b], st->d2h), fail);
        return 0;
    case NX_PIPE_HOST:
        return j->host ? j->host(j->arg, st->buf[b], off, len) : 0;
    default:
        CU_TRY(cudaMemcpyAsync(j->dst + off, st->buf[b], len, cudaMemcpyHostToDevice, st->h2d),
               fail);
        CU_TRY(cudaEventRecord(st->out_done[b], st->h2d), fail);
        return 0;
    }
fail:
    /* The copy may be queued without its event: the pipeline would not wait for it, and
     * it would outlive the run (and the caller's buffers, or the next run's data). */
    cudaStreamSynchronize(stage == NX_PIPE_IN ? st->d2h : st->h2d);
    return -EIO;
}

static int stage_done(void *arg, int stage, uint64_t c, uint32_t b, bool wait)
{
    struct job *j = arg;
    cudaEvent_t ev = stage == NX_PIPE_IN ? j->st->in_done[b] : j->st->out_done[b];
    (void)c;
    if (wait) {
        CU_TRY(cudaEventSynchronize(ev), fail);
        return 1;
    }
    cudaError_t e = cudaEventQuery(ev);
    if (e == cudaErrorNotReady)
        return 0;
    CU_TRY(e, fail);
    return 1;
fail:
    return -EIO;
}

int nx_staging_run(struct nx_staging *st, const void *dev_src, void *dev_dst, size_t n,
                   nx_staging_host_fn host, void *arg)
{
    struct job j = {.st = st, .src = dev_src, .dst = dev_dst, .n = n, .host = host, .arg = arg};
    struct nx_pipe_ops ops = {
        .arg = &j,
        .has_in = dev_src != NULL,
        .has_out = dev_dst != NULL,
        .start = stage_start,
        .done = stage_done,
    };
    if (n == 0)
        return 0;
    if (cudaSetDevice(st->device) != cudaSuccess)
        return -EIO;
    pthread_mutex_lock(&lock);
    st->runs++;
    pthread_mutex_unlock(&lock);
    int rv = nx_pipe_run(&ops, (n + CHUNK - 1) / CHUNK, NBUF);
    pthread_mutex_lock(&lock);
    st->runs--;
    pthread_cond_broadcast(&runs_cv);
    pthread_mutex_unlock(&lock);
    return rv;
}

void nx_staging_fini(void)
{
    pthread_mutex_lock(&lock);
    for (int d = 0; d < MAX_DEVICES; d++) {
        struct nx_staging *st = engines[d];
        if (!st)
            continue;
        engines[d] = NULL;
        __atomic_store_n(&st->stopping, true, __ATOMIC_RELEASE);
        while (st->runs > 0)
            pthread_cond_wait(&runs_cv, &lock);
        engine_free(st);
    }
    pthread_mutex_unlock(&lock);
}
