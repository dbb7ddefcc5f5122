/*
 * elem.c - reading and writing one element of any nexar dtype.
 *
 * Check mode computes expected values as integers and stores them in the
 * element type; comparing by decoded value keeps the check independent of how
 * the daemon lays out bits (e.g. -0 versus +0 after a sum).  The f16 and bf16
 * conversions round to nearest even, as the daemon's stores do, although the
 * patterns only ever need exactly representable integers.
 */
#include <math.h>
#include <string.h>

#include "bench.h"

static uint16_t f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t man = x & 0x7fffffu;
    if (exp == 0xff)
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        /* Subnormal: the value is m * 2^-24 with m = man24 >> (14 - e). */
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000u;
        unsigned shift = (unsigned)(14 - e);
        uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = sign | ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
        h++; /* a carry out of the mantissa correctly bumps the exponent */
    return (uint16_t)h;
}

static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, x;
    if (exp == 0x1f) {
        x = sign | 0x7f800000u | (man << 13);
    } else if (exp) {
        x = sign | ((exp + 112) << 23) | (man << 13);
    } else {
        float f = (float)man * 0x1p-24f;
        return sign ? -f : f;
    }
    float f;
    memcpy(&f, &x, sizeof(f));
    return f;
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    if (isnan(f))
        return (uint16_t)((x >> 16) | 0x40u); /* stay a (quiet) NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static float bf16_to_f32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, sizeof(f));
    return f;
}

/* Floating types go through this one path so that every store rounds the same way. */
static void store_double(nexar_dtype_t d, void *buf, size_t i, double v)
{
    switch (d) {
    case NEXAR_F32: ((float *)buf)[i] = (float)v; break;
    case NEXAR_F64: ((double *)buf)[i] = v; break;
    case NEXAR_F16: ((uint16_t *)buf)[i] = f32_to_f16((float)v); break;
    case NEXAR_BF16: ((uint16_t *)buf)[i] = f32_to_bf16((float)v); break;
    default: break;
    }
}

static bool is_float(nexar_dtype_t d)
{
    return d == NEXAR_F32 || d == NEXAR_F64 || d == NEXAR_F16 || d == NEXAR_BF16;
}

void nxb_elem_store(nexar_dtype_t d, void *buf, size_t i, int64_t v)
{
    /* Narrowing through the unsigned type wraps modulo 2^bits (gcc defines the
     * conversion back to the signed type the same way). */
    switch (d) {
    case NEXAR_I8: ((int8_t *)buf)[i] = (int8_t)(uint8_t)v; break;
    case NEXAR_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case NEXAR_I32: ((int32_t *)buf)[i] = (int32_t)(uint32_t)v; break;
    case NEXAR_U32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case NEXAR_I64: ((int64_t *)buf)[i] = v; break;
    case NEXAR_U64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
    default: store_double(d, buf, i, (double)v); break;
    }
}

void nxb_elem_store_identity(nexar_dtype_t d, nexar_op_t op, void *buf, size_t i)
{
    if (op == NEXAR_SUM || op == NEXAR_PROD) {
        nxb_elem_store(d, buf, i, op == NEXAR_PROD);
        return;
    }
    bool lo = op == NEXAR_MAX; /* MAX's identity is the smallest value */
    switch (d) {
    case NEXAR_I8: ((int8_t *)buf)[i] = lo ? INT8_MIN : INT8_MAX; break;
    case NEXAR_U8: ((uint8_t *)buf)[i] = lo ? 0 : UINT8_MAX; break;
    case NEXAR_I32: ((int32_t *)buf)[i] = lo ? INT32_MIN : INT32_MAX; break;
    case NEXAR_U32: ((uint32_t *)buf)[i] = lo ? 0 : UINT32_MAX; break;
    case NEXAR_I64: ((int64_t *)buf)[i] = lo ? INT64_MIN : INT64_MAX; break;
    case NEXAR_U64: ((uint64_t *)buf)[i] = lo ? 0 : UINT64_MAX; break;
    default: store_double(d, buf, i, lo ? -INFINITY : INFINITY); break;
    }
}

void nxb_elem_store_poison(nexar_dtype_t d, void *buf, size_t i)
{
    if (is_float(d))
        store_double(d, buf, i, NAN);
    else
        nxb_elem_store_identity(d, NEXAR_MIN, buf, i); /* the type's maximum */
}

double nxb_elem_get(nexar_dtype_t d, const void *buf, size_t i)
{
    switch (d) {
    case NEXAR_F32: return ((const float *)buf)[i];
    case NEXAR_F64: return ((const double *)buf)[i];
    case NEXAR_F16: return f16_to_f32(((const uint16_t *)buf)[i]);
    case NEXAR_BF16: return bf16_to_f32(((const uint16_t *)buf)[i]);
    case NEXAR_I8: return ((const int8_t *)buf)[i];
    case NEXAR_U8: return ((const uint8_t *)buf)[i];
    case NEXAR_I32: return ((const int32_t *)buf)[i];
    case NEXAR_U32: return ((const uint32_t *)buf)[i];
    case NEXAR_I64: return (double)((const int64_t *)buf)[i];
    case NEXAR_U64: return (double)((const uint64_t *)buf)[i];
    }
    return NAN;
}

bool nxb_elem_equal(nexar_dtype_t d, const void *a, size_t i, const void *b, size_t j)
{
    if (is_float(d))
        return nxb_elem_get(d, a, i) == nxb_elem_get(d, b, j);
    size_t es = nexar_dtype_size(d);
    return memcmp((const char *)a + i * es, (const char *)b + j * es, es) == 0;
}

int64_t nxb_exact_limit(nexar_dtype_t d)
{
    switch (d) {
    case NEXAR_F32: return INT64_C(1) << 24;
    case NEXAR_F64: return INT64_C(1) << 53;
    case NEXAR_F16: return 2048;
    case NEXAR_BF16: return 256;
    case NEXAR_I8: return INT8_MAX;
    case NEXAR_U8: return UINT8_MAX;
    case NEXAR_I32: return INT32_MAX;
    case NEXAR_U32: return UINT32_MAX;
    case NEXAR_I64:
    case NEXAR_U64: return INT64_MAX;
    }
    return 0;
}

bool nxb_dtype_signed(nexar_dtype_t d)
{
    return d != NEXAR_U8 && d != NEXAR_U32 && d != NEXAR_U64;
}
