/*
 * CPU reduction kernels: the daemon's hot loop for every reduction.
 *
 * dtype and op carry nexar.h's values (NEXAR_F32..NEXAR_U64 = 0..9, NEXAR_SUM..NEXAR_MAX =
 * 0..3).  Every function returns 0, or -EINVAL for an unknown dtype or op, a NULL array or
 * element pointer, a zero nsrc/ndst/nranks, or a byte size that overflows size_t; on
 * -EINVAL nothing was written.  With n == 0 nothing is read or written.
 *
 * Buffers hold n elements each and must be aligned to the element size.  Buffers may be
 * exactly equal to each other where a prototype says so; partial overlaps are undefined.
 * The functions are thread-safe and reentrant and never allocate; they use about 17 KiB of
 * stack.
 *
 * Semantics, identical on every code path (the AVX2/F16C kernels and the portable ones
 * give the same bits; NEXAR_REDUCE_ISA=generic in the environment forces the portable ones,
 * for tests):
 *
 *   Integers wrap (two's complement) for SUM and PROD; MIN/MAX compare signed or unsigned
 *   by dtype.
 *
 *   F32/F64 SUM/PROD are a left fold in source order (((s0 op s1) op s2) ...) in the
 *   dtype's precision.  A NaN result is the canonical quiet NaN (below), so that any
 *   grouping of the elements into calls gives the same bits.
 *
 *   F16/BF16 are widened exactly to f32, folded there as F32 is (but a NaN result keeps
 *   some operand's payload, unspecified which), and rounded to nearest even once per
 *   output element (overflow gives inf, subnormals are kept, a NaN comes out quiet).  See
 *   half.h.
 *
 *   Float MIN/MAX propagate NaN and order -0 below +0 (IEEE 754-2019 minimum/maximum): if
 *   either operand is NaN the result is the canonical quiet NaN (f32 0x7fc00000, f64
 *   0x7ff8000000000000, hence f16 0x7e00 and bf16 0x7fc0); min(-0, +0) = -0 and
 *   max(-0, +0) = +0 in either order.  That makes MIN/MAX commutative and associative to
 *   the bit, so ring, tree and local reductions agree whatever order they combine in.
 *   With a single operand (nsrc == 1, rank 0 of a scan) the value is copied (half types:
 *   rounded), not canonicalized.
 */
#ifndef NX_REDUCE_H
#define NX_REDUCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* dsts[0..ndst) = op over srcs[0..nsrc) elementwise, n elements each. nsrc >= 1, ndst >= 1.
 * A dst may be exactly equal to a src (in-place); no partial overlaps. Half types: sum
 * in f32 over all srcs, round once. Implementation: blocked (e.g. 4-16 KiB blocks):
 * compute a block into dsts[0], then copy that block to dsts[1..] while it is in cache.
 * (As written: 8 KiB blocks, folded four sources per pass; the block is computed into the
 * first dst that is not also srcs[1..], or into scratch.  srcs may repeat, so may dsts.) */
int nx_reduce_fanout(void *const *dsts, size_t ndst, const void *const *srcs, size_t nsrc,
                     size_t n, uint8_t dtype, uint8_t op);

/* dst[i] = dst[i] op src[i] (dst may equal src).  Except for half types (2-byte aligned),
 * src may lie at any address, as a received payload does. */
int nx_reduce_inplace(void *dst, const void *src, size_t n, uint8_t dtype, uint8_t op);

/* Prefix over ranks: dsts[r] = op over srcs[0..r] (inclusive) or srcs[0..r-1]
 * (exclusive; dsts[0] = identity). dsts[r] may equal srcs[r] exactly. Half types
 * accumulate in f32 and round each output once. dsts[r] may be NULL: skip that output. */
int nx_scan_fanout(void *const *dsts, const void *const *srcs, size_t nranks, size_t n,
                   uint8_t dtype, uint8_t op, bool exclusive);

/* Fills n elements with the identity of op: 0 / 1 / largest (MIN) / smallest (MAX);
 * +inf / -inf for float MIN / MAX.  The SUM identity of floats is +0.0. */
int nx_fill_identity(void *dst, size_t n, uint8_t dtype, uint8_t op);

/* F16/BF16 <-> f32, n elements: widening is exact, narrowing rounds to nearest even as
 * every kernel here does.  dtype must be NEXAR_F16 or NEXAR_BF16; no overlap. */
int nx_half_widen(float *dst, const void *src, size_t n, uint8_t dtype);
int nx_half_narrow(void *dst, const float *src, size_t n, uint8_t dtype);

#endif /* NX_REDUCE_H */
