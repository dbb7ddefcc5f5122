/*
 * kernels.h - the reduction kernels on the GPU (kernels.cu), callable from C.
 *
 * Same semantics as the CPU kernels to the bit (daemon/adapter/reduce.h): a left fold over the
 * sources in order; integers wrap; F16/BF16 are widened to f32, folded there and rounded
 * to nearest even once per output; float MIN/MAX are IEEE 754-2019 minimum/maximum with
 * the canonical quiet NaN and -0 < +0; one source is copied (half types: rounded).  Code
 * is built with --fmad=false so that nothing is contracted.
 *
 * Every launcher queues on stream (a cudaStream_t) on the current device and returns at
 * once: 0, -EINVAL (bad dtype, op, count of pointers or a NULL one), -E2BIG (more than
 * NX_CUK_MAX_PTRS sources or destinations) or -EIO (the launch failed).  All pointers
 * must be device memory of the current device (or reachable from it), aligned to the
 * element size.  A destination may equal a source exactly; nothing else may overlap.
 */
#ifndef NX_CUDA_KERNELS_H
#define NX_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NX_CUK_MAX_PTRS 32

/* dsts[0..ndst) = op over srcs[0..nsrc), n elements each. */
int nx_cuk_reduce(void *const *dsts, size_t ndst, const void *const *srcs, size_t nsrc,
                  size_t n, uint8_t dtype, uint8_t op, void *stream);

/* dsts[r] = op over srcs[0..r] (inclusive) or srcs[0..r-1] (exclusive; dsts[0] gets the
 * identity).  dsts[r] may be NULL (no output for r) or equal srcs[r]. */
int nx_cuk_scan(void *const *dsts, const void *const *srcs, size_t nranks, size_t n,
                uint8_t dtype, uint8_t op, int exclusive, void *stream);

/* n elements of the identity of op (reduce.h). */
int nx_cuk_fill_identity(void *dst, size_t n, uint8_t dtype, uint8_t op, void *stream);

#ifdef __cplusplus
}
#endif

#endif
