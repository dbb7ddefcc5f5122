/*
 * refnum.h - the test suite's own reference arithmetic.
 *
 * Written independently of the daemon's reduce kernels so that a test compares
 * the product against a second implementation, never against itself:
 *   - IEEE binary16 and bfloat16 <-> binary32 conversions, round to nearest even;
 *   - element access by dtype, the reference reduction of the documented
 *     semantics (integers wrap, F16/BF16 are accumulated in f32 over the ranks in
 *     rank order and rounded to nearest even once on store), op identities;
 *   - deterministic input patterns per (seed, rank, index) chosen so that every
 *     expected value is exact and comparable bit for bit.
 *
 * dtype and op numbers are nexar.h's (NEXAR_F32 ... NEXAR_U64, NEXAR_SUM ...).
 */
#ifndef TL_REFNUM_H
#define TL_REFNUM_H

#include <stddef.h>
#include <stdint.h>

#include "nexar.h"

/* ---- half precision ----------------------------------------------------------- */

uint16_t tl_f32_to_f16(float f);   /* round to nearest even; NaN stays NaN */
float tl_f16_to_f32(uint16_t h);   /* exact */
uint16_t tl_f32_to_bf16(float f);  /* round to nearest even; NaN stays NaN */
float tl_bf16_to_f32(uint16_t b);  /* exact */

/* ---- elements ------------------------------------------------------------------- */

size_t tl_esize(int dtype);           /* 0 for an unknown dtype */
const char *tl_dtype_name(int dtype); /* "f32" ... */
const char *tl_op_name(int op);       /* "sum" ... */
int tl_dtype_is_float(int dtype);

/* Formats element i of buf for a failure message ("1.5 (0x3e00)"). */
void tl_format_elem(int dtype, const void *buf, size_t i, char *out, size_t outlen);

/* ---- the reference reduction ------------------------------------------------------ */

/*
 * out[i] = op over r = 0..nin-1 of in[r][i], i < count, with the documented
 * semantics.  out may alias in[0].  Integers wrap (two's complement).
 */
void tl_reduce(int dtype, int op, void *out, const void *const *in, int nin, size_t count);

/* Writes the identity of op for dtype into count elements of out (exscan rank 0). */
void tl_fill_identity(int dtype, int op, void *out, size_t count);

/* ---- patterns ------------------------------------------------------------------------ */

/*
 * Fills count elements of out with rank's input for an op whose reduction is `op`
 * (-1: data is only moved, any bit pattern, NaNs included).  The values keep
 * every reduction over up to TL_MAX_RANKS ranks exact:
 *   SUM   integers small enough not to wrap; floats whose f32 (f64) sum is exact,
 *         so the only rounding is the documented one to f16/bf16 on store;
 *   PROD  values from {1, 2, -1, 0.5, 1.5, ...} (unsigned: {1, 2, 3});
 *   MIN, MAX  any finite non-zero values.
 * first is the index of out[0] within the logical buffer (for partial fills).
 */
#define TL_MAX_RANKS 16
/* op value for tl_pattern: any finite non-zero float over the whole exponent range
 * (random bits for integers).  Exact comparison needs a reduction of two ranks
 * (one IEEE operation, the same in any order). */
#define TL_PAT_FULL (-2)
void tl_pattern(int dtype, int op, uint64_t seed, int rank, size_t first, void *out,
                size_t count);

uint64_t tl_mix64(uint64_t x); /* splitmix64 finalizer */

#endif /* TL_REFNUM_H */
