/*
 * CPU reduction kernels (see reduce.h for the semantics).
 *
 * Shape: the drivers walk the buffers in blocks of BLOCK_BYTES, fold every source into one
 * accumulator block that stays in L1, and copy it to the other destinations while it is
 * still there.  A fold takes up to four sources per pass (c2..c4, then acc1..acc3 for the
 * rest), so that several memory streams are in flight at once.  The kernels are plain
 * loops over restrict pointers, which the compiler vectorizes; the drivers choose the
 * accumulator so that no kernel ever sees aliased pointers, keeping restrict honest when
 * the caller reduces in place.
 *
 * F16/BF16 fold widened values into an f32 accumulator block and narrow it once on the way
 * out; with two sources the fused h2/ip kernels widen, fold and narrow in one pass.
 *
 * Everything is compiled twice, portable and for AVX2 (plus F16C), and one set is picked
 * on first use.  On AVX2 the half types get chunked kernels with explicit conversions
 * (below), since compilers do not vectorize half.h's conversions well there.  All paths
 * give identical bits: the ops are the same C expressions, and the SIMD conversions
 * compute exactly what half.h does (checked over every input when written).
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

/* Accumulator block: big enough to amortize the per-block calls, small enough that it and
 * the scratch blocks stay in a 32 KiB L1. */
#define BLOCK_BYTES 8192

/* d = fold of s[0..K) (c[K]), or d = fold of d, s[0..K) (acc[K]). */
typedef void (*fold_fn)(void *d, const void *const *s, size_t n);
typedef void (*cvt_fn)(void *d, const void *s, size_t n);

struct kern {
    fold_fn c[5];   /* [2..4] */
    fold_fn acc[4]; /* [1..3] */
};

/* Half types, two sources, straight to 16 bits: d = N(W(s0) op W(s1)) (h2) or
 * d = N(W(d) op W(s0)) (ip). */
struct hkern {
    fold_fn h2, ip;
};

struct isa {
    struct kern k[NEXAR_DTYPE_COUNT][NEXAR_OP_COUNT]; /* half types: f32 accumulator */
    struct hkern h[2][NEXAR_OP_COUNT];                /* [0] F16, [1] BF16 */
    cvt_fn widen[2], narrow[2];
};

/* ---- element ops -------------------------------------------------------------------- */

/* Integer SUM/PROD run on the unsigned type of the same width, so wrapping is defined;
 * every step is cast back to the type, so uint8_t products never overflow int.  F32/F64
 * SUM/PROD are fadd/fmul (below). */
#define OP_ADD(a, b) ((a) + (b))
#define OP_MUL(a, b) ((a) * (b))
#define OP_MIN(a, b) ((b) < (a) ? (b) : (a))
#define OP_MAX(a, b) ((a) < (b) ? (b) : (a))
#define ID(x) (x)

/*
 * IEEE 754-2019 minimum/maximum with a canonical NaN.  For equal operands only the sign of
 * a zero can differ: OR-ing the bits picks -0 for min, AND-ing picks +0 for max.  Written
 * with all-ones masks instead of ?: because gcc 12 gives up vectorizing a loop that
 * chains two of the ?: forms (a fold of three or four sources).
 */
#define DEF_FMINMAX(T, U, FT, TF, QNAN)                                                    \
    static inline T fmin_##T(T a, T b)                                                     \
    {                                                                                      \
        U ua = FT(a), ub = FT(b);                                                          \
        U lt = -(U)(a < b), eq = -(U)(a == b), nan = -(U)((a != a) | (b != b));            \
        U r = (ua & lt) | (ub & ~lt) | (ua & eq);                                          \
        return TF((r & ~nan) | (QNAN & nan));                                              \
    }                                                                                      \
    static inline T fmax_##T(T a, T b)                                                     \
    {                                                                                      \
        U ua = FT(a), ub = FT(b);                                                          \
        U gt = -(U)(a > b), eq = -(U)(a == b), nan = -(U)((a != a) | (b != b));            \
        U r = ((ua & gt) | (ub & ~gt)) & (ua | ~eq);                                       \
        return TF((r & ~nan) | (QNAN & nan));                                              \
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

/*
 * F32/F64 SUM/PROD: a NaN result is the canonical quiet NaN.  Which operand's payload the
 * hardware keeps depends on the operand order the compiler picked, which may differ between
 * a loop's vector body and its scalar tail; a streamed receive cuts a message's elements
 * anywhere, so without this two nodes could hold different NaNs for one element.  (Across
 * nodes half types travel as f32 partials, so their own kernels need not: in cache this
 * costs them a quarter of their speed, and f32/f64 nothing measurable.)
 */
#define DEF_FARITH(T, U, FT, TF, QNAN)                                                     \
    static inline T fcanon_##T(T r)                                                        \
    {                                                                                      \
        U nan = -(U)(r != r);                                                              \
        return TF((FT(r) & ~nan) | (QNAN & nan));                                          \
    }                                                                                      \
    static inline T fadd_##T(T a, T b)                                                     \
    {                                                                                      \
        return fcanon_##T(a + b);                                                          \
    }                                                                                      \
    static inline T fmul_##T(T a, T b)                                                     \
    {                                                                                      \
        return fcanon_##T(a * b);                                                          \
    }

DEF_FMINMAX(float, uint32_t, nx_f32_bits, nx_bits_f32, UINT32_C(0x7fc00000))
DEF_FMINMAX(double, uint64_t, f64_bits, bits_f64, UINT64_C(0x7ff8000000000000))
DEF_FARITH(float, uint32_t, nx_f32_bits, nx_bits_f32, UINT32_C(0x7fc00000))
DEF_FARITH(double, uint64_t, f64_bits, bits_f64, UINT64_C(0x7ff8000000000000))

/* ---- kernels, instantiated once per instruction set ---------------------------------- */

/* TD accumulates, TS is the source type and W maps a source element into TD. */
#define KERN_HEAD(fn, attr, TD)                                                            \
    attr static void fn(void *d_, const void *const *s, size_t n)                          \
    {                                                                                      \
        TD *restrict d = d_;
/* Sources may lie at any address (a received payload sits where the packet put it): read
 * through a typedef of alignment 1, which x86's vector loads do at full speed. */
#define SRC(TS, x, k)                                                                      \
    typedef TS x##_u __attribute__((aligned(1)));                                          \
    const x##_u *restrict x = s[k];
#define STEP(TD, OPF, v, y) v = (TD)OPF(v, y);

#define DEF_FOLDS(isa, attr, name, TD, TS, W, OPF)                                         \
    KERN_HEAD(name##_c2_##isa, attr, TD) SRC(TS, a, 0) SRC(TS, b, 1)                       \
        for (size_t i = 0; i < n; i++)                                                     \
            d[i] = (TD)OPF(W(a[i]), W(b[i]));                                              \
    }                                                                                      \
    KERN_HEAD(name##_c3_##isa, attr, TD) SRC(TS, a, 0) SRC(TS, b, 1) SRC(TS, c, 2)         \
        for (size_t i = 0; i < n; i++) {                                                   \
            TD v = (TD)OPF(W(a[i]), W(b[i]));                                              \
            d[i] = (TD)OPF(v, W(c[i]));                                                    \
        }                                                                                  \
    }                                                                                      \
    KERN_HEAD(name##_c4_##isa, attr, TD)                                                   \
        SRC(TS, a, 0) SRC(TS, b, 1) SRC(TS, c, 2) SRC(TS, e, 3)                            \
        for (size_t i = 0; i < n; i++) {                                                   \
            TD v = (TD)OPF(W(a[i]), W(b[i]));                                              \
            STEP(TD, OPF, v, W(c[i]))                                                      \
            d[i] = (TD)OPF(v, W(e[i]));                                                    \
        }                                                                                  \
    }                                                                                      \
    KERN_HEAD(name##_acc1_##isa, attr, TD) SRC(TS, a, 0)                                   \
        for (size_t i = 0; i < n; i++)                                                     \
            d[i] = (TD)OPF(d[i], W(a[i]));                                                 \
    }                                                                                      \
    KERN_HEAD(name##_acc2_##isa, attr, TD) SRC(TS, a, 0) SRC(TS, b, 1)                     \
        for (size_t i = 0; i < n; i++) {                                                   \
            TD v = (TD)OPF(d[i], W(a[i]));                                                 \
            d[i] = (TD)OPF(v, W(b[i]));                                                    \
        }                                                                                  \
    }                                                                                      \
    KERN_HEAD(name##_acc3_##isa, attr, TD) SRC(TS, a, 0) SRC(TS, b, 1) SRC(TS, c, 2)       \
        for (size_t i = 0; i < n; i++) {                                                   \
            TD v = (TD)OPF(d[i], W(a[i]));                                                 \
            STEP(TD, OPF, v, W(b[i]))                                                      \
            d[i] = (TD)OPF(v, W(c[i]));                                                    \
        }                                                                                  \
    }

/* Two half sources straight to 16 bits, one pass. */
#define DEF_HALF2(isa, attr, name, W, N, OPF)                                              \
    KERN_HEAD(name##_h2_##isa, attr, uint16_t) SRC(uint16_t, a, 0) SRC(uint16_t, b, 1)     \
        for (size_t i = 0; i < n; i++)                                                     \
            d[i] = N(OPF(W(a[i]), W(b[i])));                                               \
    }                                                                                      \
    KERN_HEAD(name##_ip_##isa, attr, uint16_t) SRC(uint16_t, a, 0)                         \
        for (size_t i = 0; i < n; i++)                                                     \
            d[i] = N(OPF(W(d[i]), W(a[i])));                                               \
    }

#define DEF_CVT(isa, attr, name, TD, TS, CVT)                                              \
    attr static void name##_##isa(void *d_, const void *s_, size_t n)                      \
    {                                                                                      \
        TD *restrict d = d_;                                                               \
        const TS *restrict s = s_;                                                         \
        for (size_t i = 0; i < n; i++)                                                     \
            d[i] = CVT(s[i]);                                                              \
    }

#define DEF_HALF(isa, attr, t, W, N)                                                       \
    DEF_FOLDS(isa, attr, sum_##t, float, uint16_t, W, OP_ADD)                              \
    DEF_FOLDS(isa, attr, prod_##t, float, uint16_t, W, OP_MUL)                             \
    DEF_FOLDS(isa, attr, min_##t, float, uint16_t, W, fmin_float)                          \
    DEF_FOLDS(isa, attr, max_##t, float, uint16_t, W, fmax_float)                          \
    DEF_HALF2(isa, attr, sum_##t, W, N, OP_ADD)                                            \
    DEF_HALF2(isa, attr, prod_##t, W, N, OP_MUL)                                           \
    DEF_HALF2(isa, attr, min_##t, W, N, fmin_float)                                        \
    DEF_HALF2(isa, attr, max_##t, W, N, fmax_float)                                        \
    DEF_CVT(isa, attr, t##_widen, float, uint16_t, W)                                      \
    DEF_CVT(isa, attr, t##_narrow, uint16_t, float, N)

#define DEF_PLAIN(isa, attr, name, T, OPF) DEF_FOLDS(isa, attr, name, T, T, ID, OPF)

#define DEF_ALL(isa, attr)                                                                 \
    DEF_PLAIN(isa, attr, sum_f32, float, fadd_float)                                       \
    DEF_PLAIN(isa, attr, prod_f32, float, fmul_float)                                      \
    DEF_PLAIN(isa, attr, min_f32, float, fmin_float)                                       \
    DEF_PLAIN(isa, attr, max_f32, float, fmax_float)                                       \
    DEF_PLAIN(isa, attr, sum_f64, double, fadd_double)                                     \
    DEF_PLAIN(isa, attr, prod_f64, double, fmul_double)                                    \
    DEF_PLAIN(isa, attr, min_f64, double, fmin_double)                                     \
    DEF_PLAIN(isa, attr, max_f64, double, fmax_double)                                     \
    DEF_PLAIN(isa, attr, sum_u8, uint8_t, OP_ADD)                                          \
    DEF_PLAIN(isa, attr, prod_u8, uint8_t, OP_MUL)                                         \
    DEF_PLAIN(isa, attr, sum_u32, uint32_t, OP_ADD)                                        \
    DEF_PLAIN(isa, attr, prod_u32, uint32_t, OP_MUL)                                       \
    DEF_PLAIN(isa, attr, sum_u64, uint64_t, OP_ADD)                                        \
    DEF_PLAIN(isa, attr, prod_u64, uint64_t, OP_MUL)                                       \
    DEF_PLAIN(isa, attr, min_i8, int8_t, OP_MIN)                                           \
    DEF_PLAIN(isa, attr, max_i8, int8_t, OP_MAX)                                           \
    DEF_PLAIN(isa, attr, min_u8, uint8_t, OP_MIN)                                          \
    DEF_PLAIN(isa, attr, max_u8, uint8_t, OP_MAX)                                          \
    DEF_PLAIN(isa, attr, min_i32, int32_t, OP_MIN)                                         \
    DEF_PLAIN(isa, attr, max_i32, int32_t, OP_MAX)                                         \
    DEF_PLAIN(isa, attr, min_u32, uint32_t, OP_MIN)                                        \
    DEF_PLAIN(isa, attr, max_u32, uint32_t, OP_MAX)                                        \
    DEF_PLAIN(isa, attr, min_i64, int64_t, OP_MIN)                                         \
    DEF_PLAIN(isa, attr, max_i64, int64_t, OP_MAX)                                         \
    DEF_PLAIN(isa, attr, min_u64, uint64_t, OP_MIN)                                        \
    DEF_PLAIN(isa, attr, max_u64, uint64_t, OP_MAX)

#define K(name, isa)                                                                       \
    {                                                                                      \
        .c = { NULL, NULL, name##_c2_##isa, name##_c3_##isa, name##_c4_##isa },            \
        .acc = { NULL, name##_acc1_##isa, name##_acc2_##isa, name##_acc3_##isa },          \
    }
#define K4(sp, mm, isa) { K(sum_##sp, isa), K(prod_##sp, isa), K(min_##mm, isa), K(max_##mm, isa) }
#define H(name, isa) { name##_h2_##isa, name##_ip_##isa }
#define H4(t, isa) { H(sum_##t, isa), H(prod_##t, isa), H(min_##t, isa), H(max_##t, isa) }

/* hisa: where the half-type kernels come from. */
#define ISA_TABLE(isa, hisa)                                                               \
    {                                                                                      \
        .k = {                                                                             \
            [NEXAR_F32] = K4(f32, f32, isa),  [NEXAR_F64] = K4(f64, f64, isa),             \
            [NEXAR_F16] = K4(f16, f16, hisa), [NEXAR_BF16] = K4(bf16, bf16, hisa),         \
            [NEXAR_I8] = K4(u8, i8, isa),     [NEXAR_U8] = K4(u8, u8, isa),                \
            [NEXAR_I32] = K4(u32, i32, isa),  [NEXAR_U32] = K4(u32, u32, isa),             \
            [NEXAR_I64] = K4(u64, i64, isa),  [NEXAR_U64] = K4(u64, u64, isa),             \
        },                                                                                 \
        .h = { H4(f16, hisa), H4(bf16, hisa) },                                            \
        .widen = { f16_widen_##hisa, bf16_widen_##hisa },                                  \
        .narrow = { f16_narrow_##hisa, bf16_narrow_##hisa },                               \
    }

DEF_ALL(generic, )
DEF_HALF(generic, , f16, nx_f16_to_f32, nx_f32_to_f16)
DEF_HALF(generic, , bf16, nx_bf16_to_f32, nx_f32_to_bf16)
static const struct isa isa_generic = ISA_TABLE(generic, generic);

#ifdef NX_X86
#define ATTR_AVX2 __attribute__((target("avx2")))
#define ATTR_F16C __attribute__((target("avx2,f16c")))
DEF_ALL(avx2, ATTR_AVX2)

/*
 * Half types with AVX2: CHUNK lanes at a time are widened into small local f32 arrays
 * (F16 with vcvtph2ps, BF16 with a zero-extend and shift), folded with the same scalar
 * expression as everywhere else (a fixed-length loop the compiler vectorizes), and
 * narrowed back (vcvtps2ph; half.h's BF16 rounding, eight lanes at a time).  The locals
 * cannot alias anything, and each output chunk is written after its inputs are read.  The
 * tails use half.h, which matches both bit for bit.
 */
#define CHUNK 64

ATTR_F16C static inline void wide_chunk_f16(float *x, const uint16_t *p)
{
    for (int k = 0; k < CHUNK; k += 8)
        _mm256_storeu_ps(x + k, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + k))));
}

ATTR_F16C static inline void narrow_chunk_f16(uint16_t *p, const float *x)
{
    for (int k = 0; k < CHUNK; k += 8)
        _mm_storeu_si128((__m128i *)(p + k),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + k), _MM_FROUND_TO_NEAREST_INT));
}

ATTR_F16C static inline void wide_chunk_bf16(float *x, const uint16_t *p)
{
    for (int k = 0; k < CHUNK; k += 8) {
        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + k)));
        _mm256_storeu_ps(x + k, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    }
}

/* nx_f32_to_bf16() on eight lanes, results in the low 16 bits of each. */
ATTR_F16C static inline __m256i bf16_round8(__m256 v)
{
    __m256i x = _mm256_castps_si256(v);
    __m256i abs = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
    __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    __m256i add = _mm256_andnot_si256(nan, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
    __m256i quiet = _mm256_and_si256(nan, _mm256_set1_epi32(0x00400000));
    return _mm256_srli_epi32(_mm256_add_epi32(_mm256_or_si256(x, quiet), add), 16);
}

ATTR_F16C static inline void narrow_chunk_bf16(uint16_t *p, const float *x)
{
    for (int k = 0; k < CHUNK; k += 16) {
        __m256i lo = bf16_round8(_mm256_loadu_ps(x + k));
        __m256i hi = bf16_round8(_mm256_loadu_ps(x + k + 8));
        /* packus works per 128-bit lane; the permute restores element order. */
        __m256i r = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
        _mm256_storeu_si256((__m256i *)(p + k), r);
    }
}

/* x = first operand (FIRST), folded with K widened sources from FROM on, then STORE.  The
 * source pointers are copied to locals, which d cannot alias. */
#define SIMD_KERN(fn, t, TD, FIRST, FROM, K, STORE, OPF)                                   \
    ATTR_F16C static void fn(void *d_, const void *const *s, size_t n)                     \
    {                                                                                      \
        TD *d = d_;                                                                        \
        const uint16_t *src[FROM + K];                                                     \
        for (int k = 0; k < FROM + K; k++)                                                 \
            src[k] = s[k];                                                                 \
        size_t i = 0;                                                                      \
        for (; i + CHUNK <= n; i += CHUNK) {                                               \
            _Alignas(32) float x[CHUNK];                                                   \
            _Alignas(32) float y[CHUNK];                                                   \
            FIRST(t);                                                                      \
            for (int k = FROM; k < FROM + K; k++) {                                        \
                wide_chunk_##t(y, src[k] + i);                                             \
                for (int j = 0; j < CHUNK; j++)                                            \
                    x[j] = OPF(x[j], y[j]);                                                \
            }                                                                              \
            STORE(t);                                                                      \
        }                                                                                  \
        for (; i < n; i++) {                                                               \
            float v = FROM ? nx_##t##_to_f32(src[0][i]) : (float)d[i];                     \
            for (int k = FROM; k < FROM + K; k++)                                          \
                v = OPF(v, nx_##t##_to_f32(src[k][i]));                                    \
            d[i] = STORE_ONE_##TD(t, v);                                                   \
        }                                                                                  \
    }
#define STORE_ONE_float(t, v) (v)
#define STORE_ONE_uint16_t(t, v) nx_f32_to_##t(v)
#define X_SRC0(t) wide_chunk_##t(x, src[0] + i)
/* Intrinsics, not memcpy or element loops: gcc 12 turns both into scalar moves here. */
#define X_ACC(t)                                                                           \
    for (int j = 0; j < CHUNK; j += 8)                                                     \
        _mm256_store_ps(x + j, _mm256_loadu_ps((const float *)d + i + j));
#define TO_ACC(t)                                                                          \
    for (int j = 0; j < CHUNK; j += 8)                                                     \
        _mm256_storeu_ps((float *)d + i + j, _mm256_load_ps(x + j));
#define TO_D16(t) narrow_chunk_##t(d + i, x)

/* ip is h2 with d as its first source, which these kernels allow. */
#define DEF_SIMD_OP(name, t, OPF)                                                          \
    SIMD_KERN(name##_c2_simd, t, float, X_SRC0, 1, 1, TO_ACC, OPF)                         \
    SIMD_KERN(name##_c3_simd, t, float, X_SRC0, 1, 2, TO_ACC, OPF)                         \
    SIMD_KERN(name##_c4_simd, t, float, X_SRC0, 1, 3, TO_ACC, OPF)                         \
    SIMD_KERN(name##_acc1_simd, t, float, X_ACC, 0, 1, TO_ACC, OPF)                        \
    SIMD_KERN(name##_acc2_simd, t, float, X_ACC, 0, 2, TO_ACC, OPF)                        \
    SIMD_KERN(name##_acc3_simd, t, float, X_ACC, 0, 3, TO_ACC, OPF)                        \
    SIMD_KERN(name##_h2_simd, t, uint16_t, X_SRC0, 1, 1, TO_D16, OPF)                      \
    ATTR_F16C static void name##_ip_simd(void *d_, const void *const *s, size_t n)         \
    {                                                                                      \
        const void *both[2] = { d_, s[0] };                                                \
        name##_h2_simd(d_, both, n);                                                       \
    }

#define DEF_SIMD_CVT(t)                                                                    \
    ATTR_F16C static void t##_widen_simd(void *d_, const void *s_, size_t n)               \
    {                                                                                      \
        float *d = d_;                                                                     \
        const uint16_t *s = s_;                                                            \
        size_t i = 0;                                                                      \
        for (; i + CHUNK <= n; i += CHUNK)                                                 \
            wide_chunk_##t(d + i, s + i);                                                  \
        for (; i < n; i++)                                                                 \
            d[i] = nx_##t##_to_f32(s[i]);                                                  \
    }                                                                                      \
    ATTR_F16C static void t##_narrow_simd(void *d_, const void *s_, size_t n)              \
    {                                                                                      \
        uint16_t *d = d_;                                                                  \
        const float *s = s_;                                                               \
        size_t i = 0;                                                                      \
        for (; i + CHUNK <= n; i += CHUNK)                                                 \
            narrow_chunk_##t(d + i, s + i);                                                \
        for (; i < n; i++)                                                                 \
            d[i] = nx_f32_to_##t(s[i]);                                                    \
    }

#define DEF_SIMD_HALF(t)                                                                   \
    DEF_SIMD_OP(sum_##t, t, OP_ADD)                                                        \
    DEF_SIMD_OP(prod_##t, t, OP_MUL)                                                       \
    DEF_SIMD_OP(min_##t, t, fmin_float)                                                    \
    DEF_SIMD_OP(max_##t, t, fmax_float)                                                    \
    DEF_SIMD_CVT(t)

DEF_SIMD_HALF(f16)
DEF_SIMD_HALF(bf16)

static const struct isa isa_avx2 = ISA_TABLE(avx2, simd);
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

/* The first dst that equals none of srcs[from..nsrc), or ndst if every one does. */
static size_t free_dst(void *const *dsts, size_t ndst, const void *const *srcs, size_t from,
                       size_t nsrc)
{
    for (size_t j = 0; j < ndst; j++) {
        size_t i = from;
        while (i < nsrc && srcs[i] != dsts[j])
            i++;
        if (i == nsrc)
            return j;
    }
    return ndst;
}

static bool valid(uint8_t dtype, uint8_t op, size_t n)
{
    return dtype < NEXAR_DTYPE_COUNT && op < NEXAR_OP_COUNT && n <= SIZE_MAX / dtype_size[dtype];
}

/* ---- drivers ------------------------------------------------------------------------- */

/* acc (len elements) op= srcs[from..nsrc) at byte offset o, up to three per pass; with
 * from == 0, acc is first set to the fold of up to four. */
static void fold(const struct kern *k, void *acc, const void *const *srcs, size_t from,
                 size_t nsrc, size_t o, size_t len)
{
    const void *s[4];
    size_t i = from;
    if (i == 0) {
        size_t m = min_sz(nsrc, 4);
        for (size_t j = 0; j < m; j++)
            s[j] = at(srcs[j], o);
        k->c[m](acc, s, len);
        i = m;
    }
    while (i < nsrc) {
        size_t m = min_sz(nsrc - i, 3);
        for (size_t j = 0; j < m; j++)
            s[j] = at(srcs[i + j], o);
        k->acc[m](acc, s, len);
        i += m;
    }
}

static void fanout_plain(const struct kern *k, void *const *dsts, size_t ndst,
                         const void *const *srcs, size_t nsrc, size_t n, size_t esz)
{
    _Alignas(64) unsigned char scratch[BLOCK_BYTES];
    /* The accumulator may hold srcs[0] but no later source, whose block it would clobber
     * before reading it. */
    size_t p = free_dst(dsts, ndst, srcs, 1, nsrc);
    size_t blk = BLOCK_BYTES / esz;
    for (size_t off = 0; off < n; off += blk) {
        size_t len = min_sz(blk, n - off), o = off * esz;
        unsigned char *acc = p < ndst ? at(dsts[p], o) : scratch;
        const unsigned char *s0 = at(srcs[0], o);
        if (nsrc == 1) {
            if (acc != s0)
                memcpy(acc, s0, len * esz);
        } else {
            fold(k, acc, srcs, acc == s0, nsrc, o, len);
        }
        fan_copy(dsts, ndst, acc, o, len * esz);
    }
}

/* Folds in an f32 block and narrows once.  Two sources go straight to a destination with
 * h2 or ip when the aliasing allows that under restrict. */
static void fanout_half(const struct isa *isa, int h, const struct kern *k,
                        const struct hkern *hk, void *const *dsts, size_t ndst,
                        const void *const *srcs, size_t nsrc, size_t n)
{
    _Alignas(64) float acc[BLOCK_BYTES / sizeof(float)];
    size_t blk = BLOCK_BYTES / sizeof(float);
    enum { VIA_ACC, H2, IP } mode = VIA_ACC;
    size_t p = 0;
    if (nsrc == 2 && (p = free_dst(dsts, ndst, srcs, 0, 2)) < ndst)
        mode = H2;
    else if (nsrc == 2 && (p = free_dst(dsts, ndst, srcs, 1, 2)) < ndst)
        mode = IP; /* dsts[p] is srcs[0] */
    else
        p = 0;
    for (size_t off = 0; off < n; off += blk) {
        size_t len = min_sz(blk, n - off), o = off * 2;
        void *d = at(dsts[p], o);
        const void *s[2] = { at(srcs[0], o), at(srcs[nsrc - 1], o) };
        if (mode == H2) {
            hk->h2(d, s, len);
        } else if (mode == IP) {
            hk->ip(d, s + 1, len);
        } else {
            if (nsrc == 1)
                isa->widen[h](acc, s[0], len);
            else
                fold(k, acc, srcs, 0, nsrc, o, len);
            isa->narrow[h](d, acc, len);
        }
        fan_copy(dsts, ndst, d, o, len * 2);
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
    int h = dtype == NEXAR_BF16;
    if (is_half(dtype))
        fanout_half(isa, h, k, &isa->h[h][op], dsts, ndst, srcs, nsrc, n);
    else
        fanout_plain(k, dsts, ndst, srcs, nsrc, n, dtype_size[dtype]);
    return 0;
}

int nx_reduce_inplace(void *dst, const void *src, size_t n, uint8_t dtype, uint8_t op)
{
    const void *srcs[2] = { dst, src };
    return nx_reduce_fanout(&dst, 1, srcs, 2, n, dtype, op);
}

/*
 * The running prefix lives in scratch block a (f32 for half types).  The exclusive form
 * ping-pongs with block b: it must read srcs[r] (which dsts[r] may alias) into the next
 * prefix before it writes the previous one to dsts[r].
 */
static void scan(const struct isa *isa, const struct kern *k, void *const *dsts,
                 const void *const *srcs, size_t nranks, size_t n, uint8_t dtype, uint8_t op,
                 bool exclusive)
{
    _Alignas(64) unsigned char bufa[BLOCK_BYTES], bufb[BLOCK_BYTES];
    bool half = is_half(dtype);
    int h = dtype == NEXAR_BF16;
    size_t esz = dtype_size[dtype], aesz = half ? sizeof(float) : esz;
    size_t blk = BLOCK_BYTES / aesz;
    for (size_t off = 0; off < n; off += blk) {
        size_t len = min_sz(blk, n - off), o = off * esz;
        unsigned char *a = bufa, *b = bufb;
        if (half)
            isa->widen[h](a, at(srcs[0], o), len);
        else
            memcpy(a, at(srcs[0], o), len * esz);
        for (size_t r = 0; r < nranks; r++) {
            void *d = dsts[r] ? at(dsts[r], o) : NULL;
            const void *s = at(srcs[r], o);
            if (exclusive && r == 0) {
                if (d)
                    fill(d, len, dtype, op);
                continue;
            }
            if (!exclusive && r > 0) {
                k->acc[1](a, &s, len);
            } else if (exclusive && r + 1 < nranks) {
                memcpy(b, a, len * aesz);
                k->acc[1](b, &s, len);
            }
            if (d && half)
                isa->narrow[h](d, a, len);
            else if (d)
                memcpy(d, a, len * esz);
            if (exclusive) {
                unsigned char *t = a;
                a = b;
                b = t;
            }
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
    scan(isa, &isa->k[dtype][op], dsts, srcs, nranks, n, dtype, op, exclusive);
    return 0;
}

int nx_fill_identity(void *dst, size_t n, uint8_t dtype, uint8_t op)
{
    if (!valid(dtype, op, n) || !dst)
        return -EINVAL;
    fill(dst, n, dtype, op);
    return 0;
}

int nx_half_widen(float *dst, const void *src, size_t n, uint8_t dtype)
{
    if (!is_half(dtype) || !dst || !src || n > SIZE_MAX / sizeof(float))
        return -EINVAL;
    if (n)
        isa_get()->widen[dtype == NEXAR_BF16](dst, src, n);
    return 0;
}

int nx_half_narrow(void *dst, const float *src, size_t n, uint8_t dtype)
{
    if (!is_half(dtype) || !dst || !src || n > SIZE_MAX / sizeof(float))
        return -EINVAL;
    if (n)
        isa_get()->narrow[dtype == NEXAR_BF16](dst, src, n);
    return 0;
}
