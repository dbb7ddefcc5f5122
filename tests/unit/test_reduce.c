/*
 * Unit test of daemon/adapter/reduce.c and daemon/adapter/half.h against references written
 * here, from scratch and without cleverness: half conversions via double arithmetic and
 * rint(), reductions as scalar left folds, the MIN/MAX rule as explicit branches.  Every
 * mismatch names dtype, op, case, index, expected and got; the exit status is 1 on any
 * failure.
 *
 * Run it with NEXAR_REDUCE_ISA=generic as well (meson does) so that both the portable and
 * the AVX2/F16C kernels are held to the same reference.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "nexar.h"
#include "reduce.h"

#define NDT 10
#define NOP 4

static const char *const dt_name[NDT] = { "F32", "F64", "F16", "BF16", "I8",
                                          "U8",  "I32", "U32", "I64",  "U64" };
static const char *const op_name[NOP] = { "SUM", "PROD", "MIN", "MAX" };
static const size_t dt_size[NDT] = { 4, 8, 2, 2, 1, 1, 4, 4, 8, 8 };

static long failures;

static void fail(const char *fmt, ...)
{
    if (++failures > 40)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- random inputs -------------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static float f32_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static double f64_of(uint64_t u)
{
    double d;
    memcpy(&d, &u, 8);
    return d;
}

static uint64_t bits64_of(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

/* Mostly values of moderate magnitude with random mantissas (so sums and products round
 * in interesting ways), plus specials (zeros, infinities, NaNs with payloads, signaling
 * NaNs, subnormals, extremes) and fully random bit patterns. */
static uint64_t gen(uint8_t dt)
{
    static const uint32_t sp32[] = { 0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000,
                                     0x7f800001, 0xffc12345, 0x7f7fffff, 0xff7fffff, 1,
                                     0x807fffff, 0x00800000 };
    static const uint64_t sp64[] = { 0, 0x8000000000000000, 0x7ff0000000000000,
                                     0xfff0000000000000, 0x7ff8000000000000,
                                     0x7ff0000000000001, 0xfff8000000abcdef,
                                     0x7fefffffffffffff, 1, 0x800fffffffffffff };
    static const uint16_t sp16[] = { 0, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7d01, 0xfe01,
                                     0x7bff, 0xfbff, 0x0001, 0x83ff, 0x0400 };
    static const uint16_t spb16[] = { 0, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0xffc1,
                                      0x7f7f, 0xff7f, 0x0001, 0x807f, 0x0080 };
    uint64_t r = rnd(), k = r & 15, sign = (r >> 4) & 1;
    r >>= 5;
    switch (dt) {
    case NEXAR_F32:
        if (k == 0)
            return sp32[r % 12];
        if (k == 1)
            return (uint32_t)r;
        return sign << 31 | (uint64_t)(127 - 20 + r % 40) << 23 | ((r >> 8) & 0x7fffff);
    case NEXAR_F64:
        if (k == 0)
            return sp64[r % 10];
        if (k == 1)
            return rnd();
        return sign << 63 | (uint64_t)(1023 - 20 + r % 40) << 52 | ((r >> 8) & 0xfffffffffffffu);
    case NEXAR_F16:
        if (k == 0)
            return sp16[r % 12];
        if (k == 1)
            return (uint16_t)r;
        if (k == 2) /* tiny: products and sums land among the subnormals */
            return sign << 15 | (r % 3) << 10 | ((r >> 8) & 0x3ff);
        return sign << 15 | (uint64_t)(15 - 5 + r % 10) << 10 | ((r >> 8) & 0x3ff);
    case NEXAR_BF16:
        if (k == 0)
            return spb16[r % 12];
        if (k == 1)
            return (uint16_t)r;
        if (k == 2)
            return sign << 15 | (r % 3) << 7 | ((r >> 8) & 0x7f);
        return sign << 15 | (uint64_t)(127 - 10 + r % 20) << 7 | ((r >> 8) & 0x7f);
    default: {
        uint64_t mask = dt_size[dt] == 8 ? UINT64_MAX : (1ull << (8 * dt_size[dt])) - 1;
        static const uint64_t ext[] = { 0, 1, UINT64_MAX, 2, 0x7fffffffffffffff,
                                        0x8000000000000000 };
        if (k == 0) {
            uint64_t e = ext[r % 6];
            /* Map the 64-bit extremes to this width's MIN/MAX. */
            if (e == 0x7fffffffffffffff)
                e = mask >> 1;
            else if (e == 0x8000000000000000)
                e = (mask >> 1) + 1;
            return e & mask;
        }
        if (k < 4) /* small values make PROD chains interesting instead of mostly 0 */
            return (r % 7 - 3) & mask;
        return rnd() & mask;
    }
    }
}

/* ---- reference half conversions --------------------------------------------------------- */

/* f16/bf16 bits -> f32 bits. NaN: the payload moves up; f16 comes out quiet (as F16C
 * does), bf16 is a plain shift. */
static uint32_t ref_widen(uint16_t h, bool bf)
{
    int mbits = bf ? 7 : 10, emax = bf ? 255 : 31, bias = bf ? 127 : 15;
    uint32_t sign = h >> 15, e = (h >> mbits) & emax, m = h & ((1u << mbits) - 1);
    if (e == (uint32_t)emax) {
        if (m == 0)
            return sign << 31 | 0x7f800000;
        return sign << 31 | 0x7f800000 | (bf ? 0 : 0x400000) | m << (23 - mbits);
    }
    double v = e == 0 ? ldexp(m, 1 - bias - mbits) : ldexp(m + (1u << mbits), (int)e - bias - mbits);
    return bits_of((float)(sign ? -v : v));
}

/* f32 bits -> f16/bf16 bits, round to nearest even, done on magnitudes in double. */
static uint16_t ref_narrow(uint32_t f, bool bf)
{
    int mbits = bf ? 7 : 10, emax = bf ? 255 : 31, bias = bf ? 127 : 15;
    uint16_t sign = (uint16_t)((f >> 31) << 15);
    uint16_t inf = (uint16_t)(sign | emax << mbits);
    double a = fabs((double)f32_of(f));
    if (isnan(a))
        return (uint16_t)(inf | 1u << (mbits - 1) | ((f & 0x7fffff) >> (23 - mbits)));
    if (isinf(a))
        return inf;
    int emin = 1 - bias; /* exponent of the smallest normal */
    if (a < ldexp(1, emin)) {
        /* Subnormal: count units of 2^(emin - mbits); 1 << mbits means "rounded up to the
         * smallest normal", whose encoding is exactly that number. */
        double q = rint(ldexp(a, mbits - emin));
        return (uint16_t)(sign | (uint16_t)q);
    }
    int e;
    frexp(a, &e);
    e -= 1; /* a in [2^e, 2^(e+1)) */
    double q = rint(ldexp(a, mbits - e));
    if (q == ldexp(1, mbits + 1)) {
        q /= 2;
        e++;
    }
    if (e + bias >= emax)
        return inf;
    return (uint16_t)(sign | (e + bias) << mbits | ((uint32_t)q - (1u << mbits)));
}

/* ---- reference reduction ------------------------------------------------------------ */

static bool is_signed(uint8_t dt)
{
    return dt == NEXAR_I8 || dt == NEXAR_I32 || dt == NEXAR_I64;
}

/* Raw bits of element i, zero-extended. */
static uint64_t get(const void *buf, size_t i, uint8_t dt)
{
    switch (dt_size[dt]) {
    case 1:
        return ((const uint8_t *)buf)[i];
    case 2:
        return ((const uint16_t *)buf)[i];
    case 4:
        return ((const uint32_t *)buf)[i];
    default:
        return ((const uint64_t *)buf)[i];
    }
}

static void put(void *buf, size_t i, uint8_t dt, uint64_t v)
{
    switch (dt_size[dt]) {
    case 1:
        ((uint8_t *)buf)[i] = (uint8_t)v;
        break;
    case 2:
        ((uint16_t *)buf)[i] = (uint16_t)v;
        break;
    case 4:
        ((uint32_t *)buf)[i] = (uint32_t)v;
        break;
    default:
        ((uint64_t *)buf)[i] = v;
        break;
    }
}

static uint64_t ref_int(uint8_t dt, uint8_t op, uint64_t a, uint64_t b)
{
    int w = (int)(8 * dt_size[dt]);
    uint64_t mask = w == 64 ? UINT64_MAX : (1ull << w) - 1;
    switch (op) {
    case NEXAR_SUM:
        return (a + b) & mask; /* mod 2^w: two's complement wrap */
    case NEXAR_PROD:
        return (a * b) & mask;
    }
    bool less;
    if (is_signed(dt)) {
        int64_t sa = (int64_t)(a << (64 - w)) >> (64 - w);
        int64_t sb = (int64_t)(b << (64 - w)) >> (64 - w);
        less = sa < sb;
    } else {
        less = a < b;
    }
    if (op == NEXAR_MIN)
        return less ? a : b;
    return less ? b : a;
}

static float ref_f32_op(uint8_t op, float a, float b)
{
    switch (op) {
    case NEXAR_SUM:
        return a + b;
    case NEXAR_PROD:
        return a * b;
    }
    if (isnan(a) || isnan(b))
        return f32_of(0x7fc00000);
    if (a == 0 && b == 0) {
        bool neg = op == NEXAR_MIN ? (signbit(a) || signbit(b)) : (signbit(a) && signbit(b));
        return neg ? -0.0f : 0.0f;
    }
    if (op == NEXAR_MIN)
        return a < b ? a : b;
    return a > b ? a : b;
}

static double ref_f64_op(uint8_t op, double a, double b)
{
    switch (op) {
    case NEXAR_SUM:
        return a + b;
    case NEXAR_PROD:
        return a * b;
    }
    if (isnan(a) || isnan(b))
        return f64_of(0x7ff8000000000000);
    if (a == 0 && b == 0) {
        bool neg = op == NEXAR_MIN ? (signbit(a) || signbit(b)) : (signbit(a) && signbit(b));
        return neg ? -0.0 : 0.0;
    }
    if (op == NEXAR_MIN)
        return a < b ? a : b;
    return a > b ? a : b;
}

/* Left fold over v[0..k); half types fold in f32 and round once at the end. */
static uint64_t ref_fold(uint8_t dt, uint8_t op, const uint64_t *v, size_t k)
{
    if (dt == NEXAR_F32) {
        float acc = f32_of((uint32_t)v[0]);
        for (size_t i = 1; i < k; i++)
            acc = ref_f32_op(op, acc, f32_of((uint32_t)v[i]));
        return bits_of(acc);
    }
    if (dt == NEXAR_F64) {
        double acc = f64_of(v[0]);
        for (size_t i = 1; i < k; i++)
            acc = ref_f64_op(op, acc, f64_of(v[i]));
        return bits64_of(acc);
    }
    if (dt == NEXAR_F16 || dt == NEXAR_BF16) {
        bool bf = dt == NEXAR_BF16;
        float acc = f32_of(ref_widen((uint16_t)v[0], bf));
        for (size_t i = 1; i < k; i++)
            acc = ref_f32_op(op, acc, f32_of(ref_widen((uint16_t)v[i], bf)));
        return ref_narrow(bits_of(acc), bf);
    }
    uint64_t acc = v[0];
    for (size_t i = 1; i < k; i++)
        acc = ref_int(dt, op, acc, v[i]);
    return acc;
}

static bool is_nan_bits(uint8_t dt, uint64_t b)
{
    switch (dt) {
    case NEXAR_F32:
        return (b & 0x7fffffff) > 0x7f800000;
    case NEXAR_F64:
        return (b & 0x7fffffffffffffff) > 0x7ff0000000000000;
    case NEXAR_F16:
        return (b & 0x7fff) > 0x7c00;
    case NEXAR_BF16:
        return (b & 0x7fff) > 0x7f80;
    }
    return false;
}

/* Exact, except that reduce.h leaves the payload of a NaN from SUM/PROD unspecified (a
 * half type's must still be quiet). */
static bool same(uint8_t dt, uint8_t op, size_t k, uint64_t exp, uint64_t got)
{
    if (exp == got)
        return true;
    if (op > NEXAR_PROD || k < 2 || !is_nan_bits(dt, exp) || !is_nan_bits(dt, got))
        return false;
    if (dt == NEXAR_F16)
        return got & 0x0200;
    if (dt == NEXAR_BF16)
        return got & 0x0040;
    return true;
}

/* Identity bit patterns, built from the C library's constants and the reference rounding. */
static uint64_t ref_identity(uint8_t dt, uint8_t op)
{
    if (op == NEXAR_SUM)
        return 0;
    float f = op == NEXAR_PROD ? 1.0f : op == NEXAR_MIN ? INFINITY : -INFINITY;
    switch (dt) {
    case NEXAR_F32:
        return bits_of(f);
    case NEXAR_F64:
        return bits64_of((double)f);
    case NEXAR_F16:
        return ref_narrow(bits_of(f), false);
    case NEXAR_BF16:
        return ref_narrow(bits_of(f), true);
    }
    if (op == NEXAR_PROD)
        return 1;
    switch (dt) {
    case NEXAR_I8:
        return (uint8_t)(op == NEXAR_MIN ? INT8_MAX : INT8_MIN);
    case NEXAR_U8:
        return op == NEXAR_MIN ? UINT8_MAX : 0;
    case NEXAR_I32:
        return (uint32_t)(op == NEXAR_MIN ? INT32_MAX : INT32_MIN);
    case NEXAR_U32:
        return op == NEXAR_MIN ? UINT32_MAX : 0;
    case NEXAR_I64:
        return (uint64_t)(op == NEXAR_MIN ? INT64_MAX : INT64_MIN);
    default:
        return op == NEXAR_MIN ? UINT64_MAX : 0;
    }
}

/* ---- conversion tests ----------------------------------------------------------------- */

static void check_narrow(uint32_t f, bool bf)
{
    uint16_t exp = ref_narrow(f, bf);
    uint16_t got = bf ? nx_f32_to_bf16(f32_of(f)) : nx_f32_to_f16(f32_of(f));
    if (exp != got)
        fail("dtype=%s narrow f32 0x%08x: expected 0x%04x got 0x%04x", bf ? "BF16" : "F16", f,
             exp, got);
}

static void test_conversions(void)
{
    for (int bf = 0; bf < 2; bf++) {
        uint16_t qbit = bf ? 0x0040 : 0x0200;
        /* Every 16-bit pattern: widening matches the reference, and narrowing it back gives
         * the pattern itself (NaNs: quieted). */
        for (uint32_t h = 0; h < 65536; h++) {
            uint32_t exp = ref_widen((uint16_t)h, bf);
            uint32_t got = bits_of(bf ? nx_bf16_to_f32((uint16_t)h) : nx_f16_to_f32((uint16_t)h));
            if (exp != got)
                fail("dtype=%s widen 0x%04x: expected 0x%08x got 0x%08x", bf ? "BF16" : "F16", h,
                     exp, got);
            uint16_t back = bf ? nx_f32_to_bf16(f32_of(got)) : nx_f32_to_f16(f32_of(got));
            uint16_t want = is_nan_bits(bf ? NEXAR_BF16 : NEXAR_F16, h) ? (uint16_t)(h | qbit)
                                                                        : (uint16_t)h;
            if (back != want)
                fail("dtype=%s round trip 0x%04x: expected 0x%04x got 0x%04x",
                     bf ? "BF16" : "F16", h, want, back);
            /* Each midpoint to the next pattern and its f32 neighbours: every tie and
             * near-tie of the rounding. */
            uint32_t lo = exp, hi = ref_widen((uint16_t)(h + 1), bf);
            if ((h & 0x7fff) >= (bf ? 0x7f80u : 0x7c00u) || (h & 0x7fff) == 0x7fff)
                continue;
            double mid = ((double)f32_of(lo) + (double)f32_of(hi)) / 2;
            uint32_t m = bits_of((float)mid);
            if ((double)f32_of(m) != mid)
                fail("test bug: midpoint of 0x%04x not exact in f32", h);
            check_narrow(m, bf);
            check_narrow(m + 1, bf);
            check_narrow(m - 1, bf);
        }
        /* A spread over all f32 patterns. */
        for (uint64_t f = 0; f < (1ull << 32); f += 4093)
            check_narrow((uint32_t)f, bf);
    }
    /* Known cases, written out so that a reference bug cannot hide them. */
    static const struct {
        float in;
        uint16_t f16, bf16;
    } known[] = {
        { 1.0f, 0x3c00, 0x3f80 },
        { 1.0f + 0x1p-11f, 0x3c00, 0x3f80 },   /* f16 tie, even is down */
        { 1.0f + 0x3p-11f, 0x3c02, 0x3f80 },   /* f16 tie, even is up */
        { 1.0f + 0x1p-8f, 0x3c04, 0x3f80 },    /* bf16 tie, down */
        { 1.0f + 0x3p-8f, 0x3c0c, 0x3f82 },    /* bf16 tie, up */
        { 65504.0f, 0x7bff, 0x4780 },
        { 65519.996f, 0x7bff, 0x4780 },
        { 65520.0f, 0x7c00, 0x4780 },          /* f16 tie at the top rounds to inf */
        { 0x1p-24f, 0x0001, 0x3380 },
        { 0x1p-25f, 0x0000, 0x3300 },          /* tie between 0 and the smallest subnormal */
        { 0x3p-25f, 0x0002, 0x33c0 },
        { 0x1p-14f - 0x1p-25f, 0x0400, 0x3880 }, /* tie up into the smallest normal */
        { -0.0f, 0x8000, 0x8000 },
        { -INFINITY, 0xfc00, 0xff80 },
        { 3.4028235e38f, 0x7c00, 0x7f80 },     /* FLT_MAX: bf16 rounds up to inf */
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        uint16_t h = nx_f32_to_f16(known[i].in), b = nx_f32_to_bf16(known[i].in);
        if (h != known[i].f16)
            fail("dtype=F16 known case %zu (%a): expected 0x%04x got 0x%04x", i,
                 (double)known[i].in, known[i].f16, h);
        if (b != known[i].bf16)
            fail("dtype=BF16 known case %zu (%a): expected 0x%04x got 0x%04x", i,
                 (double)known[i].in, known[i].bf16, b);
    }
    /* Every 16-bit pattern through the library's own (possibly SIMD) conversion path: a
     * single source is widened and narrowed back. */
    for (int bf = 0; bf < 2; bf++) {
        static uint16_t all[65536], out[65536];
        uint8_t dt = bf ? NEXAR_BF16 : NEXAR_F16;
        for (uint32_t h = 0; h < 65536; h++)
            all[h] = (uint16_t)h;
        void *d = out;
        const void *src = all;
        if (nx_reduce_fanout(&d, 1, &src, 1, 65536, dt, NEXAR_SUM) != 0)
            fail("dtype=%s single-source fanout failed", dt_name[dt]);
        for (uint32_t h = 0; h < 65536; h++) {
            uint16_t want = is_nan_bits(dt, h) ? (uint16_t)(h | (bf ? 0x40 : 0x200)) : (uint16_t)h;
            if (out[h] != want) {
                fail("dtype=%s single source 0x%04x: expected 0x%04x got 0x%04x", dt_name[dt],
                     h, want, out[h]);
                break;
            }
        }
    }
    if (nx_f32_to_f16(f32_of(0x7f800001)) != 0x7e00 || nx_f32_to_f16(f32_of(0xffc00000)) != 0xfe00)
        fail("dtype=F16 NaN narrowing not quiet/sign-preserving");
    if (nx_f32_to_bf16(f32_of(0x7f800001)) != 0x7fc0 || nx_f32_to_bf16(f32_of(0xff812345)) != 0xffc1)
        fail("dtype=BF16 NaN narrowing not quiet/sign-preserving");
}

/* ---- fanout ------------------------------------------------------------------------- */

struct pool {
    void *base[16];
    void *buf[16]; /* element-aligned, but every other one is not 16-byte aligned */
    void *orig[16];
    size_t n;
};

static void pool_init(struct pool *p, size_t nbuf, size_t n, uint8_t dt)
{
    size_t esz = dt_size[dt];
    p->n = nbuf;
    for (size_t b = 0; b < nbuf; b++) {
        p->base[b] = malloc(n * esz + esz);
        p->orig[b] = malloc(n * esz + 1);
        p->buf[b] = (unsigned char *)p->base[b] + (b & 1) * esz;
        for (size_t i = 0; i < n; i++)
            put(p->buf[b], i, dt, gen(dt));
        memcpy(p->orig[b], p->buf[b], n * esz);
    }
}

static void pool_free(struct pool *p)
{
    for (size_t b = 0; b < p->n; b++) {
        free(p->base[b]);
        free(p->orig[b]);
    }
}

/* The last length is in bytes, not elements: about 2.4 of the kernels' 8 KiB blocks for
 * every element size (and 4.9 of the f32-accumulator blocks of the half types), which
 * crosses two block boundaries and ends in a partial block, with two fifths of the
 * elements that 20001 of every dtype had. */
static const size_t lengths[] = { 0, 1, 7, 1023, 4099, 20008 };
#define NLEN (sizeof lengths / sizeof lengths[0])
#define LONGEST (NLEN - 1)
#define NPAT 6

/* Builds which pool buffer each src and dst is; returns the pool size. */
static size_t pattern(int pat, size_t nsrc, size_t ndst, size_t *si, size_t *di)
{
    size_t np = nsrc;
    for (size_t i = 0; i < nsrc; i++)
        si[i] = i;
    for (size_t j = 0; j < ndst; j++)
        di[j] = np++;
    switch (pat) {
    case 1: /* in-place allreduce: dst j is src j */
        for (size_t j = 0; j < ndst && j < nsrc; j++)
            di[j] = j;
        break;
    case 2: /* rotated: dst j is src j+1 (dsts repeat when ndst > nsrc) */
        for (size_t j = 0; j < ndst; j++)
            di[j] = (j + 1) % nsrc;
        break;
    case 3: /* dst 0 is the last source, read last */
        di[0] = nsrc - 1;
        break;
    case 4: /* repeated sources; dst 0 is the first of them */
        for (size_t i = 0; i < nsrc; i++)
            si[i] = i / 2;
        di[0] = 0;
        break;
    case 5: /* every dst is the same buffer */
        for (size_t j = 0; j < ndst; j++)
            di[j] = nsrc;
        break;
    }
    return np;
}

static void run_fanout(uint8_t dt, uint8_t op, size_t nsrc, size_t ndst, size_t n, int pat)
{
    size_t si[8], di[8];
    struct pool p;
    pool_init(&p, pattern(pat, nsrc, ndst, si, di), n, dt);
    void *dsts[8];
    const void *srcs[8];
    for (size_t i = 0; i < nsrc; i++)
        srcs[i] = p.buf[si[i]];
    for (size_t j = 0; j < ndst; j++)
        dsts[j] = p.buf[di[j]];
    int rc = nx_reduce_fanout(dsts, ndst, srcs, nsrc, n, dt, op);
    if (rc != 0)
        fail("dtype=%s op=%s fanout nsrc=%zu ndst=%zu n=%zu: rc %d", dt_name[dt], op_name[op],
             nsrc, ndst, n, rc);
    uint64_t *exp = malloc((n ? n : 1) * sizeof *exp);
    for (size_t i = 0; i < n; i++) {
        uint64_t v[8];
        for (size_t k = 0; k < nsrc; k++)
            v[k] = get(p.orig[si[k]], i, dt);
        exp[i] = ref_fold(dt, op, v, nsrc);
    }
    for (size_t b = 0; b < p.n; b++) {
        bool is_dst = false;
        for (size_t j = 0; j < ndst; j++)
            is_dst |= di[j] == b;
        for (size_t i = 0; i < n; i++) {
            uint64_t want = is_dst ? exp[i] : get(p.orig[b], i, dt), got = get(p.buf[b], i, dt);
            if (!same(dt, op, is_dst ? nsrc : 1, want, got)) {
                fail("dtype=%s op=%s fanout nsrc=%zu ndst=%zu n=%zu pattern=%d buf=%zu%s "
                     "index=%zu: expected 0x%llx got 0x%llx",
                     dt_name[dt], op_name[op], nsrc, ndst, n, pat, b,
                     is_dst ? "" : " (not a dst, must be untouched)", i,
                     (unsigned long long)want, (unsigned long long)got);
                break;
            }
        }
    }
    free(exp);
    pool_free(&p);
}

static void run_inplace(uint8_t dt, uint8_t op, size_t n, bool self)
{
    struct pool p;
    pool_init(&p, 2, n, dt);
    int rc = nx_reduce_inplace(p.buf[0], p.buf[self ? 0 : 1], n, dt, op);
    if (rc != 0)
        fail("dtype=%s op=%s inplace n=%zu: rc %d", dt_name[dt], op_name[op], n, rc);
    for (size_t i = 0; i < n; i++) {
        uint64_t v[2] = { get(p.orig[0], i, dt), get(p.orig[self ? 0 : 1], i, dt) };
        uint64_t exp = ref_fold(dt, op, v, 2), got = get(p.buf[0], i, dt);
        if (!same(dt, op, 2, exp, got)) {
            fail("dtype=%s op=%s inplace%s n=%zu index=%zu: expected 0x%llx got 0x%llx",
                 dt_name[dt], op_name[op], self ? " dst==src" : "", n, i,
                 (unsigned long long)exp, (unsigned long long)got);
            break;
        }
    }
    pool_free(&p);
}

/* The source at an odd address (one byte to es - 1 past alignment), as a received payload
 * may lie: the same result.  Half types want 2-byte alignment (reduce.h). */
static void run_inplace_odd(uint8_t dt, uint8_t op, size_t n)
{
    struct pool p;
    pool_init(&p, 2, n, dt);
    size_t es = dt_size[dt];
    for (size_t mis = 1; mis < es; mis++) {
        unsigned char *odd = malloc(n * es + es);
        memcpy(odd + mis, p.orig[1], n * es);
        memcpy(p.buf[0], p.orig[0], n * es);
        int rc = nx_reduce_inplace(p.buf[0], odd + mis, n, dt, op);
        if (rc != 0)
            fail("dtype=%s op=%s inplace, source %zu past alignment, n=%zu: rc %d",
                 dt_name[dt], op_name[op], mis, n, rc);
        for (size_t i = 0; i < n; i++) {
            uint64_t v[2] = { get(p.orig[0], i, dt), get(p.orig[1], i, dt) };
            uint64_t exp = ref_fold(dt, op, v, 2), got = get(p.buf[0], i, dt);
            if (!same(dt, op, 2, exp, got)) {
                fail("dtype=%s op=%s inplace, source %zu past alignment, n=%zu index=%zu: "
                     "expected 0x%llx got 0x%llx", dt_name[dt], op_name[op], mis, n, i,
                     (unsigned long long)exp, (unsigned long long)got);
                break;
            }
        }
        free(odd);
    }
    pool_free(&p);
}

/* ---- scan ----------------------------------------------------------------------------- */

/* pat 0: fresh dsts; 1: dsts[r] == srcs[r]; 2: fresh, odd ranks NULL; 3: in place, rank 1
 * NULL. */
static void run_scan(uint8_t dt, uint8_t op, size_t nranks, size_t n, bool excl, int pat)
{
    struct pool p;
    bool inplace = pat == 1 || pat == 3;
    pool_init(&p, inplace ? nranks : 2 * nranks, n, dt);
    void *dsts[8];
    const void *srcs[8];
    for (size_t r = 0; r < nranks; r++) {
        srcs[r] = p.buf[r];
        dsts[r] = p.buf[inplace ? r : nranks + r];
        if ((pat == 2 && (r & 1)) || (pat == 3 && r == 1))
            dsts[r] = NULL;
    }
    int rc = nx_scan_fanout(dsts, srcs, nranks, n, dt, op, excl);
    if (rc != 0)
        fail("dtype=%s op=%s scan nranks=%zu n=%zu: rc %d", dt_name[dt], op_name[op], nranks,
             n, rc);
    for (size_t r = 0; r < nranks; r++) {
        size_t b = inplace ? r : nranks + r;
        size_t k = excl ? r : r + 1;
        for (size_t i = 0; i < n; i++) {
            uint64_t v[8], exp, got = get(p.buf[b], i, dt);
            for (size_t q = 0; q < k; q++)
                v[q] = get(p.orig[q], i, dt);
            if (!dsts[r])
                exp = get(p.orig[b], i, dt);
            else
                exp = k == 0 ? ref_identity(dt, op) : ref_fold(dt, op, v, k);
            if (!same(dt, op, dsts[r] ? k : 1, exp, got)) {
                fail("dtype=%s op=%s %s nranks=%zu n=%zu pattern=%d rank=%zu%s index=%zu: "
                     "expected 0x%llx got 0x%llx",
                     dt_name[dt], op_name[op], excl ? "exscan" : "scan", nranks, n, pat, r,
                     dsts[r] ? "" : " (NULL dst, must be untouched)", i,
                     (unsigned long long)exp, (unsigned long long)got);
                break;
            }
        }
    }
    pool_free(&p);
}

/* ---- identities, named cases, argument checks ---------------------------------------- */

static void test_identity(void)
{
    for (uint8_t dt = 0; dt < NDT; dt++) {
        for (uint8_t op = 0; op < NOP; op++) {
            uint64_t buf[37];
            memset(buf, 0xa5, sizeof buf);
            if (nx_fill_identity(buf, 33, dt, op) != 0)
                fail("dtype=%s op=%s fill_identity: rc != 0", dt_name[dt], op_name[op]);
            for (size_t i = 0; i < 33; i++)
                if (get(buf, i, dt) != ref_identity(dt, op)) {
                    fail("dtype=%s op=%s identity index=%zu: expected 0x%llx got 0x%llx",
                         dt_name[dt], op_name[op], i,
                         (unsigned long long)ref_identity(dt, op),
                         (unsigned long long)get(buf, i, dt));
                    break;
                }
            if (get(buf, 33, dt) != get((uint64_t[]){ 0xa5a5a5a5a5a5a5a5 }, 0, dt))
                fail("dtype=%s op=%s fill_identity wrote past n", dt_name[dt], op_name[op]);
        }
    }
}

/* One named case: a op b (op c) at every position of a 37-element array, so that vector
 * bodies and scalar tails both see it. */
static void named(const char *what, uint8_t dt, uint8_t op, size_t k, const uint64_t *in,
                  uint64_t exp)
{
    uint64_t bufs[3][37], out[37];
    const void *srcs[3] = { bufs[0], bufs[1], bufs[2] };
    void *dst = out;
    for (size_t s = 0; s < k; s++)
        for (size_t i = 0; i < 37; i++)
            put(bufs[s], i, dt, in[s]);
    if (nx_reduce_fanout(&dst, 1, srcs, k, 37, dt, op) != 0)
        fail("%s: rc != 0", what);
    for (size_t i = 0; i < 37; i++)
        if (!same(dt, op, k, exp, get(out, i, dt))) {
            fail("%s dtype=%s op=%s index=%zu: expected 0x%llx got 0x%llx", what, dt_name[dt],
                 op_name[op], i, (unsigned long long)exp, (unsigned long long)get(out, i, dt));
            return;
        }
}

#define NAMED(what, dt, op, exp, ...)                                                        \
    named(what, dt, op, sizeof((uint64_t[]){ __VA_ARGS__ }) / 8, (uint64_t[]){ __VA_ARGS__ }, \
          exp)

static void test_named(void)
{
    /* integer wraparound */
    NAMED("i32 max+1 wraps", NEXAR_I32, NEXAR_SUM, 0x80000000, 0x7fffffff, 1);
    NAMED("i8 127+1 wraps", NEXAR_I8, NEXAR_SUM, 0x80, 0x7f, 1);
    NAMED("i8 -128*-1 wraps", NEXAR_I8, NEXAR_PROD, 0x80, 0x80, 0xff);
    NAMED("u8 16*16 wraps", NEXAR_U8, NEXAR_PROD, 0, 16, 16);
    NAMED("u64 max+max", NEXAR_U64, NEXAR_SUM, UINT64_MAX - 1, UINT64_MAX, UINT64_MAX);
    NAMED("i64 min*-1 wraps", NEXAR_I64, NEXAR_PROD, 0x8000000000000000, 0x8000000000000000,
          UINT64_MAX);
    NAMED("i8 min is signed", NEXAR_I8, NEXAR_MIN, 0x80, 0x7f, 0x80);
    NAMED("u8 min is unsigned", NEXAR_U8, NEXAR_MIN, 0x7f, 0x7f, 0x80);
    NAMED("i64 max is signed", NEXAR_I64, NEXAR_MAX, 1, 1, UINT64_MAX);
    NAMED("u32 max is unsigned", NEXAR_U32, NEXAR_MAX, 0xffffffff, 1, 0xffffffff);
    /* float MIN/MAX: NaN propagates as the canonical NaN, -0 < +0 in either order */
    NAMED("f32 min NaN first", NEXAR_F32, NEXAR_MIN, 0x7fc00000, 0xffc12345, 0x3f800000);
    NAMED("f32 min NaN second", NEXAR_F32, NEXAR_MIN, 0x7fc00000, 0x3f800000, 0x7f800001);
    NAMED("f32 max NaN", NEXAR_F32, NEXAR_MAX, 0x7fc00000, 0x7f800000, 0x7fc00001);
    NAMED("f32 min -0,+0", NEXAR_F32, NEXAR_MIN, 0x80000000, 0x80000000, 0);
    NAMED("f32 min +0,-0", NEXAR_F32, NEXAR_MIN, 0x80000000, 0, 0x80000000);
    NAMED("f32 max -0,+0", NEXAR_F32, NEXAR_MAX, 0, 0x80000000, 0);
    NAMED("f32 max +0,-0", NEXAR_F32, NEXAR_MAX, 0, 0, 0x80000000);
    NAMED("f32 min -inf", NEXAR_F32, NEXAR_MIN, 0xff800000, 0xff800000, 0xff7fffff);
    NAMED("f64 max NaN", NEXAR_F64, NEXAR_MAX, 0x7ff8000000000000, 0x3ff0000000000000,
          0xfff0000000000001);
    NAMED("f64 min +0,-0", NEXAR_F64, NEXAR_MIN, 0x8000000000000000, 0, 0x8000000000000000);
    NAMED("f64 max -0,+0", NEXAR_F64, NEXAR_MAX, 0, 0x8000000000000000, 0);
    NAMED("f16 min NaN", NEXAR_F16, NEXAR_MIN, 0x7e00, 0x3c00, 0xfd01);
    NAMED("bf16 max NaN", NEXAR_BF16, NEXAR_MAX, 0x7fc0, 0xff81, 0x3f80);
    NAMED("f16 max -0,+0", NEXAR_F16, NEXAR_MAX, 0, 0x8000, 0);
    /* inf and NaN through SUM */
    NAMED("f32 inf-inf is NaN", NEXAR_F32, NEXAR_SUM, 0xffc00000, 0x7f800000, 0xff800000);
    NAMED("f32 inf+1", NEXAR_F32, NEXAR_SUM, 0x7f800000, 0x7f800000, 0x3f800000);
    NAMED("f32 max+max overflows", NEXAR_F32, NEXAR_SUM, 0x7f800000, 0x7f7fffff, 0x7f7fffff);
    /* half: one rounding at the end, not one per step */
    NAMED("f16 1+2^-11+2^-11 rounds once", NEXAR_F16, NEXAR_SUM, 0x3c01, 0x3c00, 0x1000,
          0x1000);
    NAMED("bf16 1+2^-8+2^-8 rounds once", NEXAR_BF16, NEXAR_SUM, 0x3f81, 0x3f80, 0x3b80,
          0x3b80);
    NAMED("f16 1+2^-11 tie to even", NEXAR_F16, NEXAR_SUM, 0x3c00, 0x3c00, 0x1000);
    NAMED("f16 65504+16 tie to inf", NEXAR_F16, NEXAR_SUM, 0x7c00, 0x7bff, 0x4c00);
    NAMED("f16 60000+60000 overflows", NEXAR_F16, NEXAR_SUM, 0x7c00, 0x7b53, 0x7b53);
    NAMED("f16 -60000*2 overflows", NEXAR_F16, NEXAR_PROD, 0xfc00, 0xfb53, 0x4000);
    NAMED("bf16 max+max overflows", NEXAR_BF16, NEXAR_SUM, 0x7f80, 0x7f7f, 0x7f7f);
    NAMED("f16 subnormal sum", NEXAR_F16, NEXAR_SUM, 0x0002, 0x0001, 0x0001);
    NAMED("f16 subnormal*0.5 tie to 0", NEXAR_F16, NEXAR_PROD, 0x0000, 0x0001, 0x3800);
    NAMED("f16 3 subnormals*0.5 tie to 2", NEXAR_F16, NEXAR_PROD, 0x0002, 0x0003, 0x3800);
    NAMED("f16 2^-14*2^-10", NEXAR_F16, NEXAR_PROD, 0x0001, 0x0400, 0x1400);
    NAMED("bf16 subnormal sum", NEXAR_BF16, NEXAR_SUM, 0x0002, 0x0001, 0x0001);
    NAMED("f16 signaling NaN single source comes out quiet", NEXAR_F16, NEXAR_SUM, 0x7e01,
          0x7c01);
}

static void test_args(void)
{
    float a[4] = { 0 }, b[4] = { 0 };
    void *d[2] = { a, NULL };
    const void *s[2] = { b, NULL };
    struct {
        const char *what;
        int rc;
    } cases[] = {
        { "bad dtype", nx_reduce_fanout(d, 1, s, 1, 4, NDT, NEXAR_SUM) },
        { "bad op", nx_reduce_fanout(d, 1, s, 1, 4, NEXAR_F32, NOP) },
        { "nsrc 0", nx_reduce_fanout(d, 1, s, 0, 4, NEXAR_F32, NEXAR_SUM) },
        { "ndst 0", nx_reduce_fanout(d, 0, s, 1, 4, NEXAR_F32, NEXAR_SUM) },
        { "NULL dst", nx_reduce_fanout(d, 2, s, 1, 4, NEXAR_F32, NEXAR_SUM) },
        { "NULL src", nx_reduce_fanout(d, 1, s, 2, 4, NEXAR_F32, NEXAR_SUM) },
        { "NULL dsts", nx_reduce_fanout(NULL, 1, s, 1, 4, NEXAR_F32, NEXAR_SUM) },
        { "size overflow", nx_reduce_fanout(d, 1, s, 1, SIZE_MAX / 2, NEXAR_F32, NEXAR_SUM) },
        { "inplace bad dtype", nx_reduce_inplace(a, b, 4, 200, NEXAR_SUM) },
        { "inplace bad op", nx_reduce_inplace(a, b, 4, NEXAR_F32, 4) },
        { "inplace NULL", nx_reduce_inplace(a, NULL, 4, NEXAR_F32, NEXAR_SUM) },
        { "scan bad op", nx_scan_fanout(d, s, 1, 4, NEXAR_F32, 9, false) },
        { "scan nranks 0", nx_scan_fanout(d, s, 0, 4, NEXAR_F32, NEXAR_SUM, false) },
        { "scan NULL src", nx_scan_fanout(d, s, 2, 4, NEXAR_F32, NEXAR_SUM, true) },
        { "fill bad dtype", nx_fill_identity(a, 4, NDT, NEXAR_SUM) },
        { "fill bad op", nx_fill_identity(a, 4, NEXAR_F32, NOP) },
        { "fill NULL", nx_fill_identity(NULL, 4, NEXAR_F32, NEXAR_SUM) },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (cases[i].rc != -EINVAL)
            fail("args: %s: expected -EINVAL got %d", cases[i].what, cases[i].rc);
    if (a[0] != 0 || b[0] != 0)
        fail("args: a rejected call wrote data");
    if (nx_reduce_fanout(d, 1, s, 1, 0, NEXAR_F32, NEXAR_SUM) != 0)
        fail("args: n == 0 must succeed");
}

int main(void)
{
    const char *isa = getenv("NEXAR_REDUCE_ISA");
    printf("reduce test, NEXAR_REDUCE_ISA=%s\n", isa ? isa : "(unset: best available)");
    test_conversions();
    test_identity();
    test_named();
    test_args();
    for (uint8_t dt = 0; dt < NDT; dt++) {
        for (uint8_t op = 0; op < NOP; op++) {
            for (size_t l = 0; l < NLEN; l++) {
                size_t n = l == LONGEST ? lengths[l] / dt_size[dt] : lengths[l];
                /* 6..8 sources reach the second and third fold passes (c4 + acc1..3) */
                for (size_t nsrc = 1; nsrc <= 8; nsrc++)
                    for (size_t ndst = 1; ndst <= 3; ndst++)
                        for (int pat = 0; pat < NPAT; pat++)
                            /* some shapes only at the shorter lengths, for time */
                            if ((l < LONGEST || pat < 2) && (nsrc <= 5 || l < LONGEST - 1 || pat < 2))
                                run_fanout(dt, op, nsrc, ndst, n, pat);
                run_inplace(dt, op, n, false);
                run_inplace(dt, op, n, true);
                if (dt != NEXAR_F16 && dt != NEXAR_BF16)
                    run_inplace_odd(dt, op, n);
                for (size_t nr = 1; nr <= 5; nr++)
                    for (int pat = 0; pat < 4; pat++) {
                        run_scan(dt, op, nr, n, false, pat);
                        run_scan(dt, op, nr, n, true, pat);
                    }
            }
        }
    }
    if (failures) {
        fprintf(stderr, "%ld failure(s)\n", failures);
        return 1;
    }
    printf("all reduce checks passed\n");
    return 0;
}
