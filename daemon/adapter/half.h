/*
 * IEEE binary16 (f16) and bfloat16 (bf16) <-> f32 conversions.
 *
 * Widening is exact.  Narrowing rounds to nearest, ties to even; values too large become
 * +-inf and subnormal results are rounded, not flushed.  A NaN narrows to a quiet NaN of
 * the same sign that keeps the top payload bits.  The f16 pair matches x86 F16C
 * (vcvtph2ps / vcvtps2ph) bit for bit, NaNs included, so a hardware path and this one are
 * interchangeable.  Both narrowings were checked over all 2^32 inputs when written (f16
 * against F16C, bf16 against a double-based reference); tests/unit/test_reduce.c keeps
 * checking every 16-bit input and every rounding tie.
 *
 * Every function is straight-line code ending in selects, so that a loop over it
 * auto-vectorizes.  They assume the default FP environment (round to nearest, no FTZ/DAZ),
 * which the daemon never changes.
 */
#ifndef NX_HALF_H
#define NX_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t nx_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float nx_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float nx_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t em = h & 0x7fff;
    /* Normal: rebias the exponent by 127 - 15 = 112. */
    uint32_t normal = (em << 13) + (112u << 23);
    /* Inf/NaN: exponent all ones, payload moves up; a NaN comes out quiet (as F16C does). */
    uint32_t special = (em << 13) | 0x7f800000 | (em > 0x7c00 ? 0x00400000 : 0);
    /* Zero/subnormal: the mantissa counts units of 2^-24, exact in f32. */
    uint32_t sub = nx_f32_bits((float)(int32_t)em * 0x1p-24f);
    uint32_t r = em >= 0x7c00 ? special : em >= 0x0400 ? normal : sub;
    return nx_bits_f32(r | sign);
}

static inline uint16_t nx_f32_to_f16(float f)
{
    uint32_t x = nx_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t a = x & 0x7fffffff;
    uint32_t nan = 0x7e00 | ((a >> 13) & 0x3ff);
    /* Normal range: rebias, then add half an ulp minus one plus the ulp's low bit, so that
     * the truncating shift rounds ties to even; a carry correctly bumps the exponent. */
    uint32_t normal = (a - (112u << 23) + 0x0fff + ((a >> 13) & 1)) >> 13;
    /* Below 2^-14 the result is subnormal.  Adding 0.5 puts the value where one f32 ulp is
     * 2^-24 (one f16 subnormal unit), so the FPU's own round-to-nearest-even does the work;
     * the low bits are then the f16 encoding (0x400 when it rounds up to the smallest
     * normal). */
    uint32_t sub = nx_f32_bits(nx_bits_f32(a) + 0.5f) - 0x3f000000;
    /* 65520 = 65504 + half an ulp rounds (to even) up to infinity. */
    uint32_t r = a > 0x7f800000  ? nan
                 : a >= 0x477ff000 ? 0x7c00
                 : a >= 0x38800000 ? normal
                                   : sub;
    return (uint16_t)(r | sign);
}

/* A plain shift, as everyone does it: unlike nx_f16_to_f32 it leaves a signaling NaN
 * signaling (narrowing quiets it), which keeps the hot loops a few instructions shorter. */
static inline float nx_bf16_to_f32(uint16_t b)
{
    return nx_bits_f32((uint32_t)b << 16);
}

static inline uint16_t nx_f32_to_bf16(float f)
{
    uint32_t x = nx_f32_bits(f);
    /* Same carry trick as above (the largest finite f32 cannot carry into the sign bit).
     * A NaN gets no rounding addend, only the quiet bit.  Masks rather than a select: gcc
     * vectorizes this form without a detour through 16-bit lanes. */
    uint32_t nan = (int32_t)(x & 0x7fffffff) > 0x7f800000 ? ~0u : 0;
    uint32_t add = (0x7fff + ((x >> 16) & 1)) & ~nan;
    return (uint16_t)(((x | (nan & 0x00400000)) + add) >> 16);
}

#endif /* NX_HALF_H */
