/*
 * CPU reduction kernels (see reduce.h for the semantics).
 *
 * Shape: every (dtype, op) has two block kernels, c2 (d = a op b) and acc (d = d op b), with
 * restrict pointers in plain loops so that the compiler vectorizes them.  The drivers below
 * walk the buffers in blocks of BLOCK_BYTES, fold all sources into one accumulator block
 * that stays in L1, and copy it out to every destination while it is still there.  They
 * choose the accumulator so that no kernel ever sees aliased pointers: restrict stays
 * honest even when the caller reduces in place.
 *
 * F16/BF16 never get kernels of their own: a block is widened into an f32 scratch buffer,
 * folded with the F32 kernels and narrowed once on the way out, so float semantics (MIN/MAX
 * included) live in one place.
 *
 * The kernels are compiled twice, portable and for AVX2 (+F16C for the half conversions),
 * and one set is picked on first use.  Both give identical bits: the ops are the same C
 * expressions, and half.h's conversions match F16C exactly.
 */
#include "reduce.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "nexar.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define NX_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif

/* Accumulator block: big enough to amortize the per-block calls, small enough that the
 * accumulator and its scratch partners stay in a 32 KiB L1. */
#define BLOCK_BYTES 8192

typedef void (*c2_fn)(void *d, const void *a, const void *b, size_t n);
typedef void (*acc_fn)(void *d, const void *b, size_t n);
typedef void (*cvt_fn)(void *d, const void *s, size_t n);

struct kern {
    c2_fn c2;
    acc_fn acc;
};

struct isa {
    struct kern k[NEXAR_DTYPE_COUNT][NEXAR_OP_COUNT];
    cvt_fn widen[2], narrow[2]; /* [0] F16, [1] BF16 */
};

/* ---- element ops -------------------------------------------------------------------- */

/* Integer SUM/PROD run on the unsigned type of the same width, so wrapping is defined.
 * uint8_t operands promote to int; 255 * 255 cannot overflow it. */
#define OP_ADD(a, b) ((a) + (b))
#define OP_MUL(a, b) ((a) * (b))
#define OP_MIN(a, b) ((b) < (a) ? (b) : (a))
#define OP_MAX(a, b) ((a) < (b) ? (b) : (a))

/* IEEE 754-2019 minimum/maximum with a canonical NaN.  For equal operands only the sign of
 * a zero can differ: OR-ing the bits picks -0 for min, AND-ing picks +0 for max. */
static inline float fmin_f32(float a, float b)
{
    uint32_t ua = nx_f32_bits(a), ub = nx_f32_bits(b);
    uint32_t r = a < b ? ua : ub;
    r = a == b ? (ua | ub) : r;
    return nx_bits_f32(a != a || b != b ? 0x7fc00000u : r);
}

static inline float fmax_f32(float a, float b)
{
    uint32_t ua = nx_f32_bits(a), ub = nx_f32_bits(b);
    uint32_t r = a > b ? ua : ub;
    r = a == b ? (ua & ub) : r;
    return nx_bits_f32(a != a || b != b ? 0x7fc00000u : r);
}

static inline uint64_t f64_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static inline double bits_f64(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static inline double fmin_f64(double a, double b)
{
    uint64_t ua = f64_bits(a), ub = f64_bits(b);
    uint64_t r = a < b ? ua : ub;
    r = a == b ? (ua | ub) : r;
    return bits_f64(a != a || b != b ? 0x7ff8000000000000u : r);
}

static inline double fmax_f64(double a, double b)
{
    uint64_t ua = f64_bits(a), ub = f64_bits(b);
    uint64_t r = a > b ? ua : ub;
    r = a == b ? (ua & ub) : r;
    return bits_f64(a != a || b != b ? 0x7ff8000000000000u : r);
}

/* ---- kernels, instantiated once per instruction set ---------------------------------- */

#define DEF_KERN(isa, attr, name, T, OPF)                                                  \
    attr static void name##_c2_##isa(void *d_, const void *a_, const void *b_, size_t n)  \
    {                                                                                      \
        T *restrict d = d_;                                                                \
        const T *restrict a = a_;                                                          \
        const T *restrict b = b_;                                                          \
        for (size_t i = 0; i < n; i++)                                                     \
            d[i] = (T)OPF(a[i], b[i]);                                                     \
    }                                                                                      \
    attr static void name##_acc_##isa(void *d_, const void *b_, size_t n)                  \
    {                                                                                      \
        T *restrict d = d_;                                                                \
        const T *restrict b = b_;                                                          \
        for (size_t i = 0; i < n; i++)                                                     \
            d[i] = (T)OPF(d[i], b[i]);                                                     \
    }

#define DEF_SUM_PROD(isa, attr, sfx, T)                                                    \
    DEF_KERN(isa, attr, sum_##sfx, T, OP_ADD)                                              \
    DEF_KERN(isa, attr, prod_##sfx, T, OP_MUL)

#define DEF_MIN_MAX(isa, attr, sfx, T, MINF, MAXF)                                         \
    DEF_KERN(isa, attr, min_##sfx, T, MINF)                                                \
    DEF_KERN(isa, attr, max_##sfx, T, MAXF)

#define DEF_CVT(isa, attr, name, TD, TS, CVT)                                               \
    attr static void name##_##isa(void *d_, const void *s_, size_t n)                      \
    {                                                                                      \
        TD *restrict d = d_;                                                               \
        const TS *restrict s = s_;                                                         \
        for (size_t i = 0; i < n; i++)                                                     \
            d[i] = CVT(s[i]);                                                              \
    }

#define DEF_ALL(isa, attr)                                                                 \
    DEF_SUM_PROD(isa, attr, f32, float)                                                    \
    DEF_SUM_PROD(isa, attr, f64, double)                                                   \
    DEF_SUM_PROD(isa, attr, u8, uint8_t)                                                   \
    DEF_SUM_PROD(isa, attr, u32, uint32_t)                                                 \
    DEF_SUM_PROD(isa, attr, u64, uint64_t)                                                 \
    DEF_MIN_MAX(isa, attr, f32, float, fmin_f32, fmax_f32)                                 \
    DEF_MIN_MAX(isa, attr, f64, double, fmin_f64, fmax_f64)                                \
    DEF_MIN_MAX(isa, attr, i8, int8_t, OP_MIN, OP_MAX)                                     \
    DEF_MIN_MAX(isa, attr, u8, uint8_t, OP_MIN, OP_MAX)                                    \
    DEF_MIN_MAX(isa, attr, i32, int32_t, OP_MIN, OP_MAX)                                   \
    DEF_MIN_MAX(isa, attr, u32, uint32_t, OP_MIN, OP_MAX)                                  \
    DEF_MIN_MAX(isa, attr, i64, int64_t, OP_MIN, OP_MAX)                                   \
    DEF_MIN_MAX(isa, attr, u64, uint64_t, OP_MIN, OP_MAX)

#define K(name, isa) { name##_c2_##isa, name##_acc_##isa }
#define K4(sp, mm, isa) { K(sum_##sp, isa), K(prod_##sp, isa), K(min_##mm, isa), K(max_##mm, isa) }

/* Half types index the F32 kernels: they are folded in f32. */
#define ISA_TABLE(isa, f16w, f16n)                                                         \
    {                                                                                      \
        .k = {                                                                             \
            [NEXAR_F32] = K4(f32, f32, isa),  [NEXAR_F64] = K4(f64, f64, isa),             \
            [NEXAR_F16] = K4(f32, f32, isa),  [NEXAR_BF16] = K4(f32, f32, isa),            \
            [NEXAR_I8] = K4(u8, i8, isa),     [NEXAR_U8] = K4(u8, u8, isa),                \
            [NEXAR_I32] = K4(u32, i32, isa),  [NEXAR_U32] = K4(u32, u32, isa),             \
            [NEXAR_I64] = K4(u64, i64, isa),  [NEXAR_U64] = K4(u64, u64, isa),             \
        },                                                                                 \
        .widen = { f16w, bf16_widen_##isa }, .narrow = { f16n, bf16_narrow_##isa },        \
    }

DEF_ALL(generic, )
DEF_CVT(generic, , f16_widen, float, uint16_t, nx_f16_to_f32)
DEF_CVT(generic, , f16_narrow, uint16_t, float, nx_f32_to_f16)
DEF_CVT(generic, , bf16_widen, float, uint16_t, nx_bf16_to_f32)
DEF_CVT(generic, , bf16_narrow, uint16_t, float, nx_f32_to_bf16)
static const struct isa isa_generic =
    ISA_TABLE(generic, f16_widen_generic, f16_narrow_generic);

#ifdef NX_X86
#define ATTR_AVX2 __attribute__((target("avx2")))
#define ATTR_F16C __attribute__((target("avx2,f16c")))
DEF_ALL(avx2, ATTR_AVX2)
DEF_CVT(avx2, ATTR_AVX2, bf16_widen, float, uint16_t, nx_bf16_to_f32)
DEF_CVT(avx2, ATTR_AVX2, bf16_narrow, uint16_t, float, nx_f32_to_bf16)

/* The tails use half.h, which matches vcvtph2ps/vcvtps2ph bit for bit (NaNs included). */
ATTR_F16C static void f16_widen_f16c(void *d_, const void *s_, size_t n)
{
    float *d = d_;
    const uint16_t *s = s_;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < n; i++)
        d[i] = nx_f16_to_f32(s[i]);
}

ATTR_F16C static void f16_narrow_f16c(void *d_, const void *s_, size_t n)
{
    uint16_t *d = d_;
    const float *s = s_;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        d[i] = nx_f32_to_f16(s[i]);
}

static const struct isa isa_avx2 = ISA_TABLE(avx2, f16_widen_f16c, f16_narrow_f16c);
#endif

static const struct isa *isa_pick(void)
{
    const char *env = getenv("NEXAR_REDUCE_ISA");
    if (env && strcmp(env, "generic") == 0)
        return &isa_generic;
#ifdef NX_X86
    /* clang 14's __builtin_cpu_supports() does not know "f16c"; every AVX2 CPU has it,
     * but ask cpuid rather than assume. */
    unsigned eax, ebx, ecx, edx;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) &&
        (ecx & bit_F16C))
        return &isa_avx2;
#endif
    return &isa_generic;
}

static const struct isa *isa_get(void)
{
    static _Atomic(const struct isa *) cur;
    const struct isa *p = atomic_load_explicit(&cur, memory_order_acquire);
    if (!p) {
        /* Racing first calls pick the same table; storing it twice is harmless. */
        p = isa_pick();
        atomic_store_explicit(&cur, p, memory_order_release);
    }
    return p;
}

/* ---- helpers ------------------------------------------------------------------------- */

static const uint8_t dtype_size[NEXAR_DTYPE_COUNT] = { 4, 8, 2, 2, 1, 1, 4, 4, 8, 8 };

static bool is_half(uint8_t dtype)
{
    return dtype == NEXAR_F16 || dtype == NEXAR_BF16;
}

static unsigned char *at(const void *p, size_t off)
{
    return (unsigned char *)(uintptr_t)p + off;
}

static size_t min_sz(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* The identity's bit pattern, indexed [dtype][op]. */
static const uint64_t identity_bits[NEXAR_DTYPE_COUNT][NEXAR_OP_COUNT] = {
    [NEXAR_F32] = { 0, 0x3f800000, 0x7f800000, 0xff800000 },
    [NEXAR_F64] = { 0, 0x3ff0000000000000, 0x7ff0000000000000, 0xfff0000000000000 },
    [NEXAR_F16] = { 0, 0x3c00, 0x7c00, 0xfc00 },
    [NEXAR_BF16] = { 0, 0x3f80, 0x7f80, 0xff80 },
    [NEXAR_I8] = { 0, 1, 0x7f, 0x80 },
    [NEXAR_U8] = { 0, 1, 0xff, 0 },
    [NEXAR_I32] = { 0, 1, 0x7fffffff, 0x80000000 },
    [NEXAR_U32] = { 0, 1, 0xffffffff, 0 },
    [NEXAR_I64] = { 0, 1, 0x7fffffffffffffff, 0x8000000000000000 },
    [NEXAR_U64] = { 0, 1, UINT64_MAX, 0 },
};

static void fill(void *dst, size_t n, uint8_t dtype, uint8_t op)
{
    uint64_t v = identity_bits[dtype][op];
    switch (dtype_size[dtype]) {
    case 1:
        memset(dst, (int)v, n);
        break;
    case 2:
        for (uint16_t *d = dst, *e = d + n; d < e; d++)
            *d = (uint16_t)v;
        break;
    case 4:
        for (uint32_t *d = dst, *e = d + n; d < e; d++)
            *d = (uint32_t)v;
        break;
    default:
        for (uint64_t *d = dst, *e = d + n; d < e; d++)
            *d = v;
        break;
    }
}

/* Copies the finished block at src to every destination that is not src itself. */
static void fan_copy(void *const *dsts, size_t ndst, const void *src, size_t off, size_t bytes)
{
    for (size_t j = 0; j < ndst; j++) {
        unsigned char *d = at(dsts[j], off);
        if (d != src)
            memcpy(d, src, bytes);
    }
}

static bool valid(uint8_t dtype, uint8_t op, size_t n)
{
    return dtype < NEXAR_DTYPE_COUNT && op < NEXAR_OP_COUNT && n <= SIZE_MAX / dtype_size[dtype];
}

/* ---- drivers ------------------------------------------------------------------------- */

static void fanout_plain(const struct kern *k, void *const *dsts, size_t ndst,
                         const void *const *srcs, size_t nsrc, size_t n, size_t esz)
{
    _Alignas(64) unsigned char scratch[BLOCK_BYTES];
    /* The accumulator may hold srcs[0] but no later source, whose block it would clobber
     * before reading.  Take the first dst that qualifies, else the scratch block. */
    size_t p = 0;
    for (; p < ndst; p++) {
        size_t i = 1;
        while (i < nsrc && srcs[i] != dsts[p])
            i++;
        if (i == nsrc)
            break;
    }
    size_t blk = BLOCK_BYTES / esz;
    for (size_t off = 0; off < n; off += blk) {
        size_t len = min_sz(blk, n - off), o = off * esz;
        unsigned char *acc = p < ndst ? at(dsts[p], o) : scratch;
        const unsigned char *s0 = at(srcs[0], o);
        if (nsrc == 1) {
            if (acc != s0)
                memcpy(acc, s0, len * esz);
        } else if (acc == s0) {
            k->acc(acc, at(srcs[1], o), len);
        } else {
            k->c2(acc, s0, at(srcs[1], o), len);
        }
        for (size_t i = 2; i < nsrc; i++)
            k->acc(acc, at(srcs[i], o), len);
        fan_copy(dsts, ndst, acc, o, len * esz);
    }
}

static void fanout_half(const struct isa *isa, const struct kern *k, int h, void *const *dsts,
                        size_t ndst, const void *const *srcs, size_t nsrc, size_t n)
{
    _Alignas(64) float acc[BLOCK_BYTES / sizeof(float)];
    _Alignas(64) float tmp[BLOCK_BYTES / sizeof(float)];
    size_t blk = BLOCK_BYTES / sizeof(float);
    for (size_t off = 0; off < n; off += blk) {
        size_t len = min_sz(blk, n - off), o = off * 2;
        isa->widen[h](acc, at(srcs[0], o), len);
        for (size_t i = 1; i < nsrc; i++) {
            isa->widen[h](tmp, at(srcs[i], o), len);
            k->acc(acc, tmp, len);
        }
        /* Every source block has been read, so dsts[0] may alias any of them. */
        isa->narrow[h](at(dsts[0], o), acc, len);
        fan_copy(dsts, ndst, at(dsts[0], o), o, len * 2);
    }
}

int nx_reduce_fanout(void *const *dsts, size_t ndst, const void *const *srcs, size_t nsrc,
                     size_t n, uint8_t dtype, uint8_t op)
{
    if (!valid(dtype, op, n) || !dsts || !srcs || ndst == 0 || nsrc == 0)
        return -EINVAL;
    for (size_t j = 0; j < ndst; j++)
        if (!dsts[j])
            return -EINVAL;
    for (size_t i = 0; i < nsrc; i++)
        if (!srcs[i])
            return -EINVAL;
    if (n == 0)
        return 0;
    const struct isa *isa = isa_get();
    const struct kern *k = &isa->k[dtype][op];
    if (is_half(dtype))
        fanout_half(isa, k, dtype == NEXAR_BF16, dsts, ndst, srcs, nsrc, n);
    else
        fanout_plain(k, dsts, ndst, srcs, nsrc, n, dtype_size[dtype]);
    return 0;
}

int nx_reduce_inplace(void *dst, const void *src, size_t n, uint8_t dtype, uint8_t op)
{
    const void *srcs[2] = { dst, src };
    return nx_reduce_fanout(&dst, 1, srcs, 2, n, dtype, op);
}

/* A and B ping-pong as the running prefix: the exclusive form must read srcs[r] (which
 * dsts[r] may alias) before it writes the previous prefix to dsts[r]. */
static void scan_plain(const struct kern *k, void *const *dsts, const void *const *srcs,
                       size_t nranks, size_t n, uint8_t dtype, uint8_t op, bool exclusive)
{
    _Alignas(64) unsigned char bufa[BLOCK_BYTES], bufb[BLOCK_BYTES];
    size_t esz = dtype_size[dtype], blk = BLOCK_BYTES / esz;
    for (size_t off = 0; off < n; off += blk) {
        size_t len = min_sz(blk, n - off), o = off * esz, bytes = len * esz;
        unsigned char *a = bufa, *b = bufb;
        memcpy(a, at(srcs[0], o), bytes);
        if (dsts[0] && exclusive)
            fill(at(dsts[0], o), len, dtype, op);
        else if (dsts[0] && dsts[0] != srcs[0])
            memcpy(at(dsts[0], o), a, bytes);
        for (size_t r = 1; r < nranks; r++) {
            if (!exclusive) {
                k->acc(a, at(srcs[r], o), len);
                if (dsts[r])
                    memcpy(at(dsts[r], o), a, bytes);
                continue;
            }
            if (r + 1 < nranks)
                k->c2(b, a, at(srcs[r], o), len);
            if (dsts[r])
                memcpy(at(dsts[r], o), a, bytes);
            unsigned char *t = a;
            a = b;
            b = t;
        }
    }
}

static void scan_half(const struct isa *isa, const struct kern *k, void *const *dsts,
                      const void *const *srcs, size_t nranks, size_t n, uint8_t dtype,
                      uint8_t op, bool exclusive)
{
    _Alignas(64) float bufa[BLOCK_BYTES / sizeof(float)], bufb[BLOCK_BYTES / sizeof(float)];
    _Alignas(64) float tmp[BLOCK_BYTES / sizeof(float)];
    int h = dtype == NEXAR_BF16;
    size_t blk = BLOCK_BYTES / sizeof(float);
    for (size_t off = 0; off < n; off += blk) {
        size_t len = min_sz(blk, n - off), o = off * 2;
        float *a = bufa, *b = bufb;
        isa->widen[h](a, at(srcs[0], o), len);
        if (dsts[0] && exclusive)
            fill(at(dsts[0], o), len, dtype, op);
        else if (dsts[0])
            isa->narrow[h](at(dsts[0], o), a, len);
        for (size_t r = 1; r < nranks; r++) {
            if (!exclusive) {
                isa->widen[h](tmp, at(srcs[r], o), len);
                k->acc(a, tmp, len);
                if (dsts[r])
                    isa->narrow[h](at(dsts[r], o), a, len);
                continue;
            }
            if (r + 1 < nranks) {
                isa->widen[h](tmp, at(srcs[r], o), len);
                k->c2(b, a, tmp, len);
            }
            if (dsts[r])
                isa->narrow[h](at(dsts[r], o), a, len);
            float *t = a;
            a = b;
            b = t;
        }
    }
}

int nx_scan_fanout(void *const *dsts, const void *const *srcs, size_t nranks, size_t n,
                   uint8_t dtype, uint8_t op, bool exclusive)
{
    if (!valid(dtype, op, n) || !dsts || !srcs || nranks == 0)
        return -EINVAL;
    for (size_t r = 0; r < nranks; r++)
        if (!srcs[r])
            return -EINVAL;
    if (n == 0)
        return 0;
    const struct isa *isa = isa_get();
    const struct kern *k = &isa->k[dtype][op];
    if (is_half(dtype))
        scan_half(isa, k, dsts, srcs, nranks, n, dtype, op, exclusive);
    else
        scan_plain(k, dsts, srcs, nranks, n, dtype, op, exclusive);
    return 0;
}

int nx_fill_identity(void *dst, size_t n, uint8_t dtype, uint8_t op)
{
    if (!valid(dtype, op, n) || !dst)
        return -EINVAL;
    fill(dst, n, dtype, op);
    return 0;
}
