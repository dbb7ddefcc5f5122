/*
 * refnum.c - reference arithmetic for the tests (see refnum.h).  Independent of
 * daemon/adapter/reduce.c on purpose: nothing here is shared with the product.
 */
#include "refnum.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- half precision ----------------------------------------------------------- */

static uint32_t f32_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    return x;
}

static float bits_f32(uint32_t x)
{
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* Shifts m right by sh bits, rounding to nearest, ties to even. */
static uint32_t shift_rne(uint32_t m, int sh)
{
    if (sh <= 0)
        return m;
    if (sh > 31)
        return 0;
    uint32_t q = m >> sh;
    uint32_t rem = m & ((1u << sh) - 1u);
    uint32_t half = 1u << (sh - 1);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    return q;
}

uint16_t tl_f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t man = x & 0x7fffffu;

    if (exp == 0xffu) /* inf stays inf; NaN becomes a quiet NaN with the top payload */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0u));
    if (exp == 0 && man == 0)
        return sign;
    int e = (int)exp - 127 + 15; /* biased f16 exponent of the value */
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        /* an f16 subnormal (or zero): count units of 2^-24.  An f32 subnormal is
         * far below 2^-25 and rounds to zero. */
        if (exp == 0 || e < -10)
            return sign;
        uint32_t m = man | 0x800000u; /* value = m * 2^(e - 15 - 23) */
        return (uint16_t)(sign | shift_rne(m, 14 - e)); /* may carry into 0x400 */
    }
    uint32_t q = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u)))
        q++; /* a carry into the exponent is right, up to 0x7c00 = inf */
    return (uint16_t)(sign | q);
}

float tl_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;

    if (exp == 0x1fu)
        return bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        float v = (float)man * 0x1p-24f; /* exact: man < 2^10 */
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp - 15u + 127u) << 23) | (man << 13));
}

uint16_t tl_f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu))
        return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    uint32_t q = x >> 16;
    uint32_t rem = x & 0xffffu;
    if (rem > 0x8000u || (rem == 0x8000u && (q & 1u)))
        q++; /* carries into the exponent, up to inf */
    return (uint16_t)q;
}

float tl_bf16_to_f32(uint16_t b)
{
    return bits_f32((uint32_t)b << 16);
}

/* ---- elements ------------------------------------------------------------------- */

size_t tl_esize(int dtype)
{
    switch (dtype) {
    case NEXAR_F32: case NEXAR_I32: case NEXAR_U32: return 4;
    case NEXAR_F64: case NEXAR_I64: case NEXAR_U64: return 8;
    case NEXAR_F16: case NEXAR_BF16: return 2;
    case NEXAR_I8: case NEXAR_U8: return 1;
    default: return 0;
    }
}

const char *tl_dtype_name(int dtype)
{
    static const char *const n[] = {"f32", "f64", "f16", "bf16", "i8",
                                    "u8",  "i32", "u32", "i64",  "u64"};
    return dtype >= 0 && dtype < 10 ? n[dtype] : "?";
}

const char *tl_op_name(int op)
{
    static const char *const n[] = {"sum", "prod", "min", "max"};
    return op >= 0 && op < 4 ? n[op] : (op == -1 ? "none" : "?");
}

int tl_dtype_is_float(int dtype)
{
    return dtype == NEXAR_F32 || dtype == NEXAR_F64 || dtype == NEXAR_F16 ||
           dtype == NEXAR_BF16;
}

void tl_format_elem(int dtype, const void *buf, size_t i, char *out, size_t outlen)
{
    const uint8_t *p = (const uint8_t *)buf + i * tl_esize(dtype);
    union { float f; double d; uint16_t h; int8_t i8; uint8_t u8; int32_t i32;
            uint32_t u32; int64_t i64; uint64_t u64; } v;
    memcpy(&v, p, tl_esize(dtype) ? tl_esize(dtype) : 1);
    switch (dtype) {
    case NEXAR_F32: snprintf(out, outlen, "%.9g (0x%08" PRIx32 ")", (double)v.f, v.u32); break;
    case NEXAR_F64: snprintf(out, outlen, "%.17g (0x%016" PRIx64 ")", v.d, v.u64); break;
    case NEXAR_F16:
        snprintf(out, outlen, "%.9g (0x%04x)", (double)tl_f16_to_f32(v.h), v.h); break;
    case NEXAR_BF16:
        snprintf(out, outlen, "%.9g (0x%04x)", (double)tl_bf16_to_f32(v.h), v.h); break;
    case NEXAR_I8: snprintf(out, outlen, "%d", v.i8); break;
    case NEXAR_U8: snprintf(out, outlen, "%u", v.u8); break;
    case NEXAR_I32: snprintf(out, outlen, "%" PRId32, v.i32); break;
    case NEXAR_U32: snprintf(out, outlen, "%" PRIu32, v.u32); break;
    case NEXAR_I64: snprintf(out, outlen, "%" PRId64, v.i64); break;
    case NEXAR_U64: snprintf(out, outlen, "%" PRIu64, v.u64); break;
    default: snprintf(out, outlen, "?");
    }
}

/* ---- the reference reduction ------------------------------------------------------ */

/* Integers: compute in the unsigned type of the same width (wraps), compare in the
 * declared signedness. */
#define RED_INT(T, UT)                                                              \
    static void red_##T(int op, T *out, const void *const *in, int nin, size_t n)   \
    {                                                                               \
        for (size_t i = 0; i < n; i++) {                                            \
            T acc = ((const T *)in[0])[i];                                          \
            for (int r = 1; r < nin; r++) {                                         \
                T v = ((const T *)in[r])[i];                                        \
                switch (op) {                                                       \
                case NEXAR_SUM: acc = (T)(UT)((UT)acc + (UT)v); break;              \
                case NEXAR_PROD: acc = (T)(UT)((UT)acc * (UT)v); break;             \
                case NEXAR_MIN: acc = v < acc ? v : acc; break;                     \
                default: acc = v > acc ? v : acc; break;                            \
                }                                                                   \
            }                                                                       \
            out[i] = acc;                                                           \
        }                                                                           \
    }
RED_INT(int8_t, uint8_t)
RED_INT(uint8_t, uint8_t)
RED_INT(int32_t, uint32_t)
RED_INT(uint32_t, uint32_t)
RED_INT(int64_t, uint64_t)
RED_INT(uint64_t, uint64_t)

static float red_f(int op, float acc, float v)
{
    switch (op) {
    case NEXAR_SUM: return acc + v;
    case NEXAR_PROD: return acc * v;
    case NEXAR_MIN: return v < acc ? v : acc;
    default: return v > acc ? v : acc;
    }
}

static double red_d(int op, double acc, double v)
{
    switch (op) {
    case NEXAR_SUM: return acc + v;
    case NEXAR_PROD: return acc * v;
    case NEXAR_MIN: return v < acc ? v : acc;
    default: return v > acc ? v : acc;
    }
}

void tl_reduce(int dtype, int op, void *out, const void *const *in, int nin, size_t count)
{
    switch (dtype) {
    case NEXAR_I8: red_int8_t(op, out, in, nin, count); return;
    case NEXAR_U8: red_uint8_t(op, out, in, nin, count); return;
    case NEXAR_I32: red_int32_t(op, out, in, nin, count); return;
    case NEXAR_U32: red_uint32_t(op, out, in, nin, count); return;
    case NEXAR_I64: red_int64_t(op, out, in, nin, count); return;
    case NEXAR_U64: red_uint64_t(op, out, in, nin, count); return;
    default: break;
    }
    for (size_t i = 0; i < count; i++) {
        if (dtype == NEXAR_F64) {
            double acc = ((const double *)in[0])[i];
            for (int r = 1; r < nin; r++)
                acc = red_d(op, acc, ((const double *)in[r])[i]);
            ((double *)out)[i] = acc;
        } else if (dtype == NEXAR_F32) {
            float acc = ((const float *)in[0])[i];
            for (int r = 1; r < nin; r++)
                acc = red_f(op, acc, ((const float *)in[r])[i]);
            ((float *)out)[i] = acc;
        } else { /* f16, bf16: f32 accumulation in rank order, one rounding on store */
            int h = dtype == NEXAR_F16;
            float acc = h ? tl_f16_to_f32(((const uint16_t *)in[0])[i])
                          : tl_bf16_to_f32(((const uint16_t *)in[0])[i]);
            for (int r = 1; r < nin; r++) {
                uint16_t b = ((const uint16_t *)in[r])[i];
                acc = red_f(op, acc, h ? tl_f16_to_f32(b) : tl_bf16_to_f32(b));
            }
            ((uint16_t *)out)[i] = h ? tl_f32_to_f16(acc) : tl_f32_to_bf16(acc);
        }
    }
}

void tl_fill_identity(int dtype, int op, void *out, size_t count)
{
    size_t es = tl_esize(dtype);
    uint8_t e[8] = {0};
    int mx = op == NEXAR_MIN; /* identity of MIN is the largest value */
    switch (dtype) {
    case NEXAR_F32: { float v = op == NEXAR_SUM ? 0.0f : op == NEXAR_PROD ? 1.0f
                                : mx ? INFINITY : -INFINITY; memcpy(e, &v, 4); break; }
    case NEXAR_F64: { double v = op == NEXAR_SUM ? 0.0 : op == NEXAR_PROD ? 1.0
                                 : mx ? INFINITY : -INFINITY; memcpy(e, &v, 8); break; }
    case NEXAR_F16: { uint16_t v = op == NEXAR_SUM ? 0 : op == NEXAR_PROD ? 0x3c00
                                   : mx ? 0x7c00 : 0xfc00; memcpy(e, &v, 2); break; }
    case NEXAR_BF16: { uint16_t v = op == NEXAR_SUM ? 0 : op == NEXAR_PROD ? 0x3f80
                                    : mx ? 0x7f80 : 0xff80; memcpy(e, &v, 2); break; }
    case NEXAR_I8: { int8_t v = op == NEXAR_SUM ? 0 : op == NEXAR_PROD ? 1
                                : mx ? INT8_MAX : INT8_MIN; memcpy(e, &v, 1); break; }
    case NEXAR_U8: { uint8_t v = op == NEXAR_SUM ? 0 : op == NEXAR_PROD ? 1
                                 : mx ? UINT8_MAX : 0; memcpy(e, &v, 1); break; }
    case NEXAR_I32: { int32_t v = op == NEXAR_SUM ? 0 : op == NEXAR_PROD ? 1
                                  : mx ? INT32_MAX : INT32_MIN; memcpy(e, &v, 4); break; }
    case NEXAR_U32: { uint32_t v = op == NEXAR_SUM ? 0 : op == NEXAR_PROD ? 1
                                   : mx ? UINT32_MAX : 0; memcpy(e, &v, 4); break; }
    case NEXAR_I64: { int64_t v = op == NEXAR_SUM ? 0 : op == NEXAR_PROD ? 1
                                  : mx ? INT64_MAX : INT64_MIN; memcpy(e, &v, 8); break; }
    case NEXAR_U64: { uint64_t v = op == NEXAR_SUM ? 0 : op == NEXAR_PROD ? 1
                                   : mx ? UINT64_MAX : 0; memcpy(e, &v, 8); break; }
    default: return;
    }
    for (size_t i = 0; i < count; i++)
        memcpy((uint8_t *)out + i * es, e, es);
}

/* ---- patterns ------------------------------------------------------------------------ */

uint64_t tl_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A half-precision value in [2^-4, 2^6) with random sign and mantissa:
 * man_bits = 10 (f16) or 7 (bf16); returns the f32 value. */
static float small_half(uint64_t h, int man_bits)
{
    int e = (int)(h % 10) - 4;                           /* -4 .. 5 */
    uint32_t m = (uint32_t)(h >> 8) & ((1u << man_bits) - 1u);
    float v = ldexpf(1.0f + (float)m / (float)(1u << man_bits), e);
    return (h >> 40) & 1 ? -v : v;
}

static void put(void *out, size_t i, size_t es, const void *v)
{
    memcpy((uint8_t *)out + i * es, v, es);
}

void tl_pattern(int dtype, int op, uint64_t seed, int rank, size_t first, void *out,
                size_t count)
{
    size_t es = tl_esize(dtype);
    static const float fprod[] = {1.0f, -1.0f, 2.0f, 0.5f, 1.5f, -0.75f};
    for (size_t k = 0; k < count; k++) {
        uint64_t h = tl_mix64(seed ^ tl_mix64(((uint64_t)rank << 40) ^ (first + k)));
        uint64_t sel = h % 6;
        if (rank >= 4)
            sel &= 1; /* PROD: only +-1 beyond rank 3, so nothing overflows */
        int8_t i8; uint8_t u8; int32_t i32; uint32_t u32; int64_t i64; uint64_t u64;
        float f; double d; uint16_t hv;
        if (op == TL_PAT_FULL && tl_dtype_is_float(dtype)) {
            /* any finite non-zero value of the type: exponents over the whole range */
            uint64_t b = h;
            if (dtype == NEXAR_F16 || dtype == NEXAR_BF16) {
                uint16_t e = dtype == NEXAR_F16 ? 0x7c00 : 0x7f80;
                uint16_t v16 = (uint16_t)b;
                if ((v16 & e) == e)
                    v16 &= 0xbfff; /* clear the top exponent bit: finite */
                if ((v16 & 0x7fff) == 0)
                    v16 |= 1;
                put(out, k, es, &v16);
            } else if (dtype == NEXAR_F32) {
                uint32_t v32 = (uint32_t)b;
                if ((v32 & 0x7f800000u) == 0x7f800000u)
                    v32 &= ~0x40000000u;
                if ((v32 & 0x7fffffffu) == 0)
                    v32 |= 1;
                put(out, k, es, &v32);
            } else {
                if ((b & 0x7ff0000000000000ull) == 0x7ff0000000000000ull)
                    b &= ~0x4000000000000000ull;
                if ((b & 0x7fffffffffffffffull) == 0)
                    b |= 1;
                put(out, k, es, &b);
            }
            continue;
        }
        if (op < 0) { /* data is only moved: any bits */
            put(out, k, es, &h);
            continue;
        }
        switch (dtype) {
        case NEXAR_I8:
            i8 = op == NEXAR_SUM ? (int8_t)((int)(h % 31) - 15)
               : op == NEXAR_PROD ? (int8_t)(sel % 3 == 0 ? 1 : sel % 3 == 1 ? -1 : (rank < 4 ? 2 : 1))
               : (int8_t)h;
            put(out, k, es, &i8); break;
        case NEXAR_U8:
            u8 = op == NEXAR_SUM ? (uint8_t)(h % 32)
               : op == NEXAR_PROD ? (uint8_t)(rank < 4 ? 1 + h % 3 : 1) : (uint8_t)h;
            put(out, k, es, &u8); break;
        case NEXAR_I32:
            i32 = op == NEXAR_SUM ? (int32_t)(h % (1u << 29)) - (1 << 28)
                : op == NEXAR_PROD ? (sel % 3 == 0 ? 1 : sel % 3 == 1 ? -1 : 2) : (int32_t)h;
            put(out, k, es, &i32); break;
        case NEXAR_U32:
            u32 = op == NEXAR_SUM ? (uint32_t)(h % (1u << 29))
                : op == NEXAR_PROD ? (uint32_t)(1 + h % 3) : (uint32_t)h;
            put(out, k, es, &u32); break;
        case NEXAR_I64:
            i64 = op == NEXAR_SUM ? (int64_t)(h % (1ull << 60)) - (1ll << 59)
                : op == NEXAR_PROD ? (sel % 3 == 0 ? 1 : sel % 3 == 1 ? -1 : 2) : (int64_t)h;
            put(out, k, es, &i64); break;
        case NEXAR_U64:
            u64 = op == NEXAR_SUM ? h % (1ull << 60) : op == NEXAR_PROD ? 1 + h % 3 : h;
            put(out, k, es, &u64); break;
        case NEXAR_F32:
            if (op == NEXAR_SUM)
                f = (float)((int64_t)(h % (1u << 20)) - (1 << 19)) * 0.0625f;
            else if (op == NEXAR_PROD)
                f = fprod[sel];
            else { /* any finite non-zero f32, subnormals included */
                uint32_t b = (uint32_t)h;
                if ((b & 0x7f800000u) == 0x7f800000u)
                    b &= ~0x00800000u;
                if ((b & 0x7fffffffu) == 0)
                    b = 0x3f800000u;
                memcpy(&f, &b, 4);
            }
            put(out, k, es, &f); break;
        case NEXAR_F64:
            if (op == NEXAR_SUM)
                d = (double)((int64_t)(h % (1ull << 49)) - (1ll << 48)) * 0.00390625;
            else if (op == NEXAR_PROD)
                d = fprod[sel];
            else {
                uint64_t b = h;
                if ((b & 0x7ff0000000000000ull) == 0x7ff0000000000000ull)
                    b &= ~0x0010000000000000ull;
                if ((b & 0x7fffffffffffffffull) == 0)
                    b = 0x3ff0000000000000ull;
                memcpy(&d, &b, 8);
            }
            put(out, k, es, &d); break;
        case NEXAR_F16:
        case NEXAR_BF16: {
            int half = dtype == NEXAR_F16;
            if (op == NEXAR_SUM) {
                f = small_half(h, half ? 10 : 7);
                hv = half ? tl_f32_to_f16(f) : tl_f32_to_bf16(f); /* exact */
            } else if (op == NEXAR_PROD) {
                hv = half ? tl_f32_to_f16(fprod[sel]) : tl_f32_to_bf16(fprod[sel]);
            } else { /* any non-NaN, non-zero bits; infinities allowed */
                hv = (uint16_t)h;
                uint16_t expmask = half ? 0x7c00 : 0x7f80;
                if ((hv & expmask) == expmask && (hv & (uint16_t)~(expmask | 0x8000)))
                    hv &= (uint16_t)~(half ? 0x0400 : 0x0080); /* NaN -> finite */
                if ((hv & 0x7fff) == 0)
                    hv = half ? 0x3c00 : 0x3f80;
            }
            put(out, k, es, &hv);
            break;
        }
        default: break;
        }
    }
}
