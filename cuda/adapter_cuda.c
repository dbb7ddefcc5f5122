/*
 * adapter_cuda.c - the adapter ops table (adapter.h) for device memory.
 *
 * Stream form (use_stream(s), what exec.c does for a node-local device op): every op is
 * queued on s and returns at once; copies are cudaMemcpyAsync with cudaMemcpyDefault
 * (the pointers are device memory of the op's device, or scratch there), reductions are
 * the kernels of kernels.cu.
 *
 * Synchronous form (no stream bound; what a network algorithm gets): each op is done
 * when it returns.  Between device and host memory the data goes through the staging
 * engine, pipelined in chunks: stage_for_send is D2H then a CPU copy out of the pinned
 * buffer; receive_to_device a CPU copy into it then H2D; reduce_inplace with a host
 * source is D2H of the destination, the CPU reduce kernels (the same bits as the GPU's)
 * in the pinned buffer and H2D back - D2H of chunk i+1 overlapping the reduce of chunk i
 * overlapping H2D of chunk i-1.  Device-only ops run on a per-device stream and wait.
 */
#include <errno.h>
#include <string.h>

#include "cuda_int.h"
#include "kernels.h"
#include "reduce.h"
#include "shm_abi.h"

#define MAX_DEVICES 64

static __thread cudaStream_t bound;
static cudaStream_t sync_streams[MAX_DEVICES];

/* The device that holds p, or -1 for host memory. */
static int device_of(const void *p)
{
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError(); /* an unknown pointer is host memory, not an error */
        return -1;
    }
    return a.type == cudaMemoryTypeDevice ? a.device : -1;
}

/* The stream an op queues on: the bound one, or the synchronous stream of p's device
 * (made current).  NULL on failure. */
static cudaStream_t stream_for(const void *p, bool *sync)
{
    *sync = bound == NULL;
    if (bound)
        return bound;
    int d = device_of(p);
    if (d < 0 || d >= MAX_DEVICES || cudaSetDevice(d) != cudaSuccess)
        return NULL;
    if (!sync_streams[d])
        CU_TRY(cudaStreamCreateWithFlags(&sync_streams[d], cudaStreamNonBlocking), fail);
    return sync_streams[d];
fail:
    return NULL;
}

static int finish(cudaStream_t s, bool sync)
{
    if (sync)
        CU_TRY(cudaStreamSynchronize(s), fail);
    return 0;
fail:
    return -EIO;
}

static int kernel_rc(int rv)
{
    if (rv == -EIO)
        nx_cuda_note_error("a reduction kernel launch", cudaGetLastError(), __FILE__, __LINE__);
    return rv;
}

/* ---- copies ------------------------------------------------------------------------ */

struct hcopy {
    uint8_t *host;
    bool to_buf; /* host -> pinned buffer (else buffer -> host) */
};

static int host_copy(void *arg, void *buf, size_t off, size_t len)
{
    struct hcopy *h = arg;
    if (h->to_buf)
        memcpy(buf, h->host + off, len);
    else
        memcpy(h->host + off, buf, len);
    return 0;
}

/* dst <- src, bytes; any mix of host and device memory. */
static int copy(void *dst, const void *src, size_t bytes)
{
    if (bytes == 0 || dst == src)
        return 0;
    if (bound) {
        CU_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, bound), fail);
        return 0;
    }
    int ds = device_of(src), dd = device_of(dst);
    if (ds < 0 && dd < 0) {
        memmove(dst, src, bytes);
        return 0;
    }
    if (ds >= 0 && dd >= 0) {
        bool sync;
        cudaStream_t s = stream_for(dst, &sync);
        if (!s)
            return -EIO;
        CU_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s), fail);
        return finish(s, sync);
    }
    struct nx_staging *st = nx_staging_get(ds >= 0 ? ds : dd);
    if (!st)
        return -EIO;
    if (ds >= 0) {
        struct hcopy h = {.host = dst, .to_buf = false};
        return nx_staging_run(st, src, NULL, bytes, host_copy, &h);
    }
    struct hcopy h = {.host = (uint8_t *)src, .to_buf = true};
    return nx_staging_run(st, NULL, dst, bytes, host_copy, &h);
fail:
    return -EIO;
}

static int cu_stage_for_send(void *host_dst, const void *src, size_t bytes)
{
    return copy(host_dst, src, bytes);
}

static int cu_receive_to_device(void *dst, const void *host_src, size_t bytes)
{
    return copy(dst, host_src, bytes);
}

static int cu_gather_iov(void *dst, const struct nx_iov *src, size_t n)
{
    uint8_t *d = dst;
    for (size_t i = 0; i < n; i++) {
        int rv = copy(d, src[i].ptr, src[i].bytes);
        if (rv < 0)
            return rv;
        d += src[i].bytes;
    }
    return 0;
}

static int cu_scatter_iov(const struct nx_iov *dst, size_t n, const void *src)
{
    const uint8_t *s = src;
    for (size_t i = 0; i < n; i++) {
        int rv = copy(dst[i].ptr, s, dst[i].bytes);
        if (rv < 0)
            return rv;
        s += dst[i].bytes;
    }
    return 0;
}

/* ---- reductions ----------------------------------------------------------------------- */

static int cu_reduce_fanout(void *const *dsts, size_t ndst, const void *const *srcs,
                            size_t nsrc, size_t n, uint8_t dtype, uint8_t op)
{
    bool sync;
    if (n == 0)
        return 0;
    cudaStream_t s = stream_for(dsts[0], &sync);
    if (!s)
        return -EIO;
    int rv = kernel_rc(nx_cuk_reduce(dsts, ndst, srcs, nsrc, n, dtype, op, s));
    return rv < 0 ? rv : finish(s, sync);
}

struct hreduce {
    const uint8_t *src;
    uint8_t dtype, op;
};

static int host_reduce(void *arg, void *buf, size_t off, size_t len)
{
    struct hreduce *h = arg;
    return nx_reduce_inplace(buf, h->src + off, len / nx_dtype_size(h->dtype), h->dtype, h->op);
}

static int cu_reduce_inplace(void *dst, const void *src, size_t n, uint8_t dtype, uint8_t op)
{
    if (bound || device_of(src) >= 0) {
        const void *srcs[2] = {dst, src};
        return cu_reduce_fanout(&dst, 1, srcs, 2, n, dtype, op);
    }
    /* A host source (the network's data): through the staging pipeline. */
    int d = device_of(dst);
    if (d < 0)
        return nx_reduce_inplace(dst, src, n, dtype, op);
    struct nx_staging *st = nx_staging_get(d);
    struct hreduce h = {.src = src, .dtype = dtype, .op = op};
    uint32_t es = nx_dtype_size(dtype);
    if (!st || es == 0)
        return st ? -EINVAL : -EIO;
    return nx_staging_run(st, dst, dst, n * es, host_reduce, &h);
}

static int cu_scan_fanout(void *const *dsts, const void *const *srcs, size_t nranks, size_t n,
                          uint8_t dtype, uint8_t op, int exclusive)
{
    bool sync;
    if (n == 0)
        return 0;
    cudaStream_t s = stream_for(srcs[0], &sync);
    if (!s)
        return -EIO;
    int rv = kernel_rc(nx_cuk_scan(dsts, srcs, nranks, n, dtype, op, exclusive, s));
    return rv < 0 ? rv : finish(s, sync);
}

static int cu_fill_identity(void *dst, size_t n, uint8_t dtype, uint8_t op)
{
    bool sync;
    if (n == 0)
        return 0;
    cudaStream_t s = stream_for(dst, &sync);
    if (!s)
        return -EIO;
    int rv = kernel_rc(nx_cuk_fill_identity(dst, n, dtype, op, s));
    return rv < 0 ? rv : finish(s, sync);
}

/* ---- stream forms ------------------------------------------------------------------------ */

static void *cu_use_stream(void *stream)
{
    void *prev = bound;
    bound = stream;
    return prev;
}

static int cu_sync_stream(void *stream)
{
    CU_TRY(cudaStreamSynchronize(stream), fail);
    return 0;
fail:
    return -EIO;
}

const struct nx_adapter nx_adapter_cuda = {
    .name = "cuda",
    .stage_for_send = cu_stage_for_send,
    .receive_to_device = cu_receive_to_device,
    .reduce_inplace = cu_reduce_inplace,
    .reduce_fanout = cu_reduce_fanout,
    .scan_fanout = cu_scan_fanout,
    .fill_identity = cu_fill_identity,
    .stage_for_send_iov = cu_gather_iov,
    .receive_to_device_iov = cu_scatter_iov,
    .use_stream = cu_use_stream,
    .sync_stream = cu_sync_stream,
};
