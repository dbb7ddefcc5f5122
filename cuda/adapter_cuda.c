/*
 * adapter_cuda.c - the adapter ops table (adapter.h) for device memory, in its stream
 * form only: exec.c binds an op's stream (use_stream) and runs the node-local algorithm
 * of coll_local.c through it.  Every op is queued on that stream and returns at once;
 * copies are cudaMemcpyAsync with cudaMemcpyDefault (the pointers are device memory of
 * the op's device, or scratch there), reductions are the kernels of kernels.cu.
 *
 * There is no synchronous form: nothing in nexard may wait for the GPU on the loop
 * thread (exec.c says why), and device buffers cross nodes through the backend's copy
 * op (node/devstage.c), not through the algorithms.  An op called with no stream bound
 * fails with -EINVAL.
 */
#include <errno.h>
#include <string.h>

#include "cuda_int.h"
#include "kernels.h"

static __thread cudaStream_t bound;

/* The bound stream, or NULL (noted as the error) when there is none. */
static cudaStream_t stream(void)
{
    if (!bound)
        nx_cuda_note_error("the CUDA adapter called with no stream bound", cudaErrorInvalidValue,
                           __FILE__, __LINE__);
    return bound;
}

static int kernel_rc(int rv)
{
    if (rv == -EIO)
        nx_cuda_note_error("a reduction kernel launch", cudaGetLastError(), __FILE__, __LINE__);
    return rv;
}

/* ---- copies ------------------------------------------------------------------------ */

/* dst <- src, bytes, on the bound stream. */
static int copy(void *dst, const void *src, size_t bytes)
{
    if (bytes == 0 || dst == src)
        return 0;
    cudaStream_t s = stream();
    if (!s)
        return -EINVAL;
    CU_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s), fail);
    return 0;
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
    if (n == 0)
        return 0;
    cudaStream_t s = stream();
    return s ? kernel_rc(nx_cuk_reduce(dsts, ndst, srcs, nsrc, n, dtype, op, s)) : -EINVAL;
}

static int cu_reduce_inplace(void *dst, const void *src, size_t n, uint8_t dtype, uint8_t op)
{
    const void *srcs[2] = {dst, src};
    return cu_reduce_fanout(&dst, 1, srcs, 2, n, dtype, op);
}

static int cu_scan_fanout(void *const *dsts, const void *const *srcs, size_t nranks, size_t n,
                          uint8_t dtype, uint8_t op, int exclusive)
{
    if (n == 0)
        return 0;
    cudaStream_t s = stream();
    return s ? kernel_rc(nx_cuk_scan(dsts, srcs, nranks, n, dtype, op, exclusive, s)) : -EINVAL;
}

static int cu_fill_identity(void *dst, size_t n, uint8_t dtype, uint8_t op)
{
    if (n == 0)
        return 0;
    cudaStream_t s = stream();
    return s ? kernel_rc(nx_cuk_fill_identity(dst, n, dtype, op, s)) : -EINVAL;
}

/* ---- stream forms ------------------------------------------------------------------------ */

static void *cu_use_stream(void *s)
{
    void *prev = bound;
    bound = s;
    return prev;
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
};
